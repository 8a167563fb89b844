// Package events is Rota's live event stream: a Hub that fans task and run
// state changes out to subscribers, and the server-sent-events handler of
// GET /api/events on top of it.
//
// With a Log (the store's event log, as every server has), the stream is
// the cluster's: Publish hands an event to a per-node appender, which
// writes what piled up in one statement (ids come from the store, in
// commit order, the same on every node) and fans the batch out at once
// when it follows the last event delivered; otherwise, and for the other
// nodes' events, a tailer reads the log after the last ID delivered, when
// woken (a notification of another node, an append that found a gap) or
// every Poll. A client that
// reconnects to any node with the last ID it saw gets what it missed, from
// the node's buffer or, older, from the store, as long as the store keeps
// it. What a crash can lose: the events published on the node in the few
// milliseconds before it died that the appender had not written yet (the
// state changes themselves are committed; a stream just does not hear of
// them).
//
// Without a Log (tests, a hub on its own) the Hub numbers the events
// itself: its first ID is its start time in unix microseconds, so the IDs
// of a restarted hub are far above those of its previous life.
//
// Either way a client that reconnects with an ID that is unknown (another
// database's, a previous process's) or no longer kept is told to reload (a
// reset event) instead of being handed unrelated events.
//
// A subscriber gets the events after the ID it names, then every new one,
// through a bounded channel. Delivery never blocks: a subscriber whose
// channel is full is dropped (its stream ends; the client reconnects with
// its last ID and loses nothing that is still kept).
package events

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Defaults of Config.
const (
	DefaultRetention = 10 * time.Minute
	DefaultMaxEvents = 100_000
	// DefaultMaxEventsWithLog caps the buffer of a Hub with a Log: older
	// events are read back from the Log, so the buffer only spares it the
	// reads of streams that reconnect soon (each entry is ~0.3 KiB plus its
	// strings: 10,000 are ~4 MiB, 100,000 were a third of the server's
	// memory under load).
	DefaultMaxEventsWithLog = 10_000
	DefaultSubscriberBuffer = 1024
	DefaultHeartbeat        = 15 * time.Second
	DefaultRetry            = 2 * time.Second
	DefaultPoll             = time.Second
	DefaultMaxReplay        = 100_000
	DefaultMaxPending       = 100_000
	DefaultAppendInterval   = 20 * time.Millisecond
)

// appendBatch is the most events one append writes; readBatch the most one
// read of the tailer (or of a replay) asks for.
//
// An append shares the store's writer with the submits that publish the
// events (on the embedded store, one writer): at 1,000 a batch the
// appender fell behind batch submits of 1,000 tasks from a few clients, and
// its backlog filled MaxPending (~40 MiB) and dropped events. A read asks
// for as many, so that a reader of a store that keeps an append as one
// chunk (PostgreSQL) decodes each chunk once, not once per thousand.
const (
	appendBatch = 10_000
	readBatch   = appendBatch
)

// ErrSlow ends a subscription whose channel was full when an event had to
// be delivered.
var ErrSlow = errors.New("events: subscriber too slow: dropped")

// ErrClosed ends the subscriptions of a closed Hub.
var ErrClosed = errors.New("events: hub closed")

// Log is the store's event log, as the Hub uses it (store.EventStore).
type Log interface {
	EventAppend(ctx context.Context, evs []rota.Event) (uint64, error)
	EventList(ctx context.Context, p store.EventListParams) ([]rota.Event, error)
	EventBounds(ctx context.Context) (store.EventBounds, error)
}

// Config configures a Hub. Zero values mean the documented defaults.
type Config struct {
	// Log, when set, is where events are kept and numbered: the stream
	// is then the cluster's (see the package documentation). Nil: the
	// Hub keeps and numbers them in memory.
	Log Log
	// Retention is how long an event stays in the in-memory buffer
	// (default DefaultRetention, 10 minutes). With a Log older events are
	// read back from it.
	Retention time.Duration
	// MaxEvents caps the buffer (default DefaultMaxEventsWithLog, 10,000,
	// with a Log, else DefaultMaxEvents, 100,000): the oldest events go
	// first when it is full.
	MaxEvents int
	// SubscriberBuffer is the capacity of each subscriber's channel
	// (default DefaultSubscriberBuffer).
	SubscriberBuffer int
	// Heartbeat is how often an idle stream sends a comment line, so that
	// proxies and clients see it alive (default DefaultHeartbeat, 15 s).
	Heartbeat time.Duration
	// Retry is the reconnection delay the stream suggests to clients
	// (default DefaultRetry).
	Retry time.Duration
	// Poll is how often the tailer reads the Log without being woken
	// (default DefaultPoll, 1 s): the bound on the delay of an event whose
	// notification was lost.
	Poll time.Duration
	// MaxReplay is the most events a reconnecting client is sent from the
	// Log; one further behind is told to reload (default
	// DefaultMaxReplay).
	MaxReplay int
	// AppendInterval is the least time between two appends of the
	// appender (default DefaultAppendInterval, 20 ms): what is published
	// meanwhile goes in the next one. It bounds the appends to 50 a second
	// a node whatever the load — on the embedded store each is a commit
	// (an fsync) unless it joins other writes' — at the price of up to
	// that much delay on the stream.
	AppendInterval time.Duration
	// MaxPending caps the events waiting for the appender (default
	// DefaultMaxPending): while the store is unreachable the oldest are
	// dropped past it, and logged.
	MaxPending int
	// Now is the clock (default time.Now). The buffer's retention and the
	// throughput series use it.
	Now func() time.Time
	// FirstID is the ID of the first event of a Hub without a Log
	// (default: Now in unix microseconds; see the package documentation).
	FirstID uint64
	// Logger receives the appender's and tailer's errors (default
	// slog.Default()).
	Logger *slog.Logger
}

// entry is one buffered event with the time the Hub received it.
type entry struct {
	ev rota.Event
	at time.Time
}

// Hub buffers and fans out events. Create it with New; with a Log, Start
// runs its appender and tailer. It is safe for concurrent use.
type Hub struct {
	cfg Config // immutable after New

	mu      sync.Mutex // guards the fields below
	last    uint64     // ID of the latest event delivered
	ring    []entry    // circular buffer, grown up to MaxEvents
	head    int        // index of the oldest entry
	n       int        // entries in the ring
	subs    map[*Subscription]struct{}
	closed  bool
	rates   *throughput
	pending []rota.Event // published, not yet appended to the Log
	spare   []rota.Event // an appended batch's array, for pending's next turn (see flush)
	lost    int          // pending events dropped since the last log line

	flushMu sync.Mutex // held across a batch's take and append: batches go in order

	appendWake chan struct{} // Publish → appender
	tailWake   chan struct{} // appender, Wake → tailer

	stopMu   sync.Mutex         // guards the fields below
	started  bool               // Start ran
	cancel   context.CancelFunc // ends the loops
	loops    sync.WaitGroup
	stopOnce sync.Once

	done chan struct{} // closed by Close
}

// New returns a Hub for cfg.
func New(cfg Config) (*Hub, error) {
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxEvents <= 0 && cfg.Log != nil {
		cfg.MaxEvents = DefaultMaxEventsWithLog
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MaxReplay <= 0 {
		cfg.MaxReplay = DefaultMaxReplay
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.AppendInterval <= 0 {
		cfg.AppendInterval = DefaultAppendInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FirstID == 0 {
		cfg.FirstID = uint64(max(cfg.Now().UnixMicro(), 1))
	}
	return &Hub{
		cfg:        cfg,
		last:       cfg.FirstID - 1,
		subs:       map[*Subscription]struct{}{},
		rates:      newThroughput(),
		appendWake: make(chan struct{}, 1),
		tailWake:   make(chan struct{}, 1),
		done:       make(chan struct{}),
	}, nil
}

// Start reads the Log's position (the stream goes on from its last event)
// and runs the appender and the tailer until Stop. Without a Log it does
// nothing.
func (h *Hub) Start(ctx context.Context) error {
	if h.cfg.Log == nil {
		return nil
	}
	b, err := h.cfg.Log.EventBounds(ctx)
	if err != nil {
		return err
	}
	h.stopMu.Lock()
	defer h.stopMu.Unlock()
	if h.started {
		return errors.New("events: hub already started")
	}
	h.started = true
	h.mu.Lock()
	h.last = b.Last
	h.mu.Unlock()
	ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.loops.Add(2)
	go func() { defer h.loops.Done(); h.appendLoop(ctx) }()
	go func() { defer h.loops.Done(); h.tailLoop(ctx) }()
	return nil
}

// Stop ends the appender and the tailer after a last append of what is
// pending (bounded by ctx); call it after the last Publish, before the
// store closes. It is idempotent.
func (h *Hub) Stop(ctx context.Context) {
	h.stopOnce.Do(func() {
		h.stopMu.Lock()
		defer h.stopMu.Unlock()
		if !h.started {
			return
		}
		h.cancel()
		h.loops.Wait()
		if err := h.flush(ctx); err != nil {
			h.cfg.Logger.Warn("events: events lost at stop", "err", err)
		}
	})
}

// Wake tells the tailer that the Log has new events (another node's
// notification). It never blocks.
func (h *Hub) Wake() { signal(h.tailWake) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Publish hands ev to the stream. A zero ev.Time is set to now. Without a
// Log it numbers and delivers ev at once; with one it queues ev for the
// appender. It never blocks. Its signature matches dispatch.Config.Events.
// After Close it does nothing.
func (h *Hub) Publish(ev rota.Event) {
	now := h.cfg.Now()
	if ev.Time.IsZero() {
		ev.Time = now
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if h.cfg.Log == nil {
		ev.ID = h.last + 1
		h.deliverLocked(ev, now)
		return
	}
	if len(h.pending) >= h.cfg.MaxPending {
		h.pending = h.pending[1:]
		h.lost++
	}
	h.pending = append(h.pending, ev)
	signal(h.appendWake)
}

// appendLoop writes the pending events whenever there are some.
func (h *Hub) appendLoop(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.appendWake:
		}
		if err := h.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.cfg.Logger.Warn("events: append to the event log; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			signal(h.appendWake)
			continue
		}
		backoff = 50 * time.Millisecond
		select { // let the next batch gather
		case <-ctx.Done():
			return
		case <-time.After(h.cfg.AppendInterval):
		}
	}
}

// Flush appends the events published so far now, without waiting for the
// appender (measurements: a cost counted after it includes the events of
// the work done). Without a Log it does nothing.
func (h *Hub) Flush(ctx context.Context) error {
	if h.cfg.Log == nil {
		return nil
	}
	return h.flush(ctx)
}

// flush appends the pending events, appendBatch at a time, and delivers
// them (or wakes the tailer). On failure the batch goes back to the front
// of the pending events.
func (h *Hub) flush(ctx context.Context) error {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	for {
		h.mu.Lock()
		k := min(len(h.pending), appendBatch)
		all := h.pending
		batch := all[:k:k] // Publish appends past k, never into batch
		h.pending = all[k:]
		whole := len(h.pending) == 0 && k > 0
		if whole {
			// The batch takes the whole array: Publish fills the spare one
			// meanwhile, and the batch's becomes the spare once appended,
			// so that the two arrays take turns (the events of every
			// state change, ~a sixth of the server's allocations when each
			// batch grew an array of its own). The batch keeps the array's
			// whole capacity, which Publish no longer appends into: cut
			// to the batch's length, the spare grew again whenever a batch
			// was longer than the one before (8% of the server's
			// allocated bytes in an end-to-end run).
			batch = all[:k]
			h.pending = h.spare[:0]
			h.spare = nil
		}
		lost := h.lost
		h.lost = 0
		h.mu.Unlock()
		if lost > 0 {
			h.cfg.Logger.Error("events: the event log was unreachable too long: events dropped", "events", lost)
		}
		if len(batch) == 0 {
			return nil
		}
		last, err := h.cfg.Log.EventAppend(ctx, batch)
		if err != nil {
			h.mu.Lock()
			h.pending = append(batch, h.pending...)
			if over := len(h.pending) - h.cfg.MaxPending; over > 0 {
				h.pending = h.pending[over:]
				h.lost += over
			}
			h.mu.Unlock()
			return err
		}
		h.deliverAppended(batch, last)
		if whole {
			clear(batch) // drop the payloads and results it refers to
			h.mu.Lock()
			if h.spare == nil && keepSpare(len(batch), cap(batch)) {
				h.spare = batch[:0]
			}
			h.mu.Unlock()
		}
	}
}

// keepSpare reports whether an appended batch of n events whose array
// holds c is kept for the next turn: not when it is beyond appendBatch,
// nor when it is much longer than the batch (grown by a burst, it would
// hold megabytes for good: the load that grew it has passed, and a new
// one grows another).
func keepSpare(n, c int) bool {
	return c <= appendBatch && (c <= 1024 || c <= 4*n)
}

// deliverAppended delivers the batch just appended, whose last event got
// the ID last, without reading it back, when it follows the last event
// delivered: IDs are consecutive, so nothing of another node's lies
// between. Otherwise the tailer reads the log (the batch with the rest).
func (h *Hub) deliverAppended(batch []rota.Event, last uint64) {
	first := last - uint64(len(batch)) + 1
	h.mu.Lock()
	defer h.mu.Unlock()
	if first != h.last+1 || h.closed {
		signal(h.tailWake)
		return
	}
	now := h.cfg.Now()
	for i, ev := range batch {
		ev.ID = first + uint64(i)
		// As the log gives it back: UTC milliseconds.
		ev.Time = time.UnixMilli(ev.Time.UnixMilli()).UTC()
		if !ev.RunAt.IsZero() {
			ev.RunAt = time.UnixMilli(ev.RunAt.UnixMilli()).UTC()
		}
		if !ev.FireTime.IsZero() {
			ev.FireTime = time.UnixMilli(ev.FireTime.UnixMilli()).UTC()
		}
		h.deliverLocked(ev, now)
	}
}

// tailLoop reads the Log after the last event delivered, when woken or
// every Poll, and delivers what it finds.
func (h *Hub) tailLoop(ctx context.Context) {
	t := time.NewTimer(h.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.tailWake:
		case <-t.C:
		}
		h.catchUp(ctx)
		t.Reset(h.cfg.Poll)
	}
}

// catchUp delivers the Log's events after the last one delivered.
func (h *Hub) catchUp(ctx context.Context) {
	for {
		// Wait for an append in progress to be delivered: the
		// notification of its commit (echoed to this node while it does
		// not yet know it is alone) wakes the tailer, which otherwise
		// read the chunk back and decoded it before the appender could
		// deliver it (3% of the server's CPU and 4% of its allocated
		// bytes in an end-to-end run).
		h.flushMu.Lock()
		h.mu.Lock()
		after := h.last
		h.mu.Unlock()
		h.flushMu.Unlock()
		evs, err := h.cfg.Log.EventList(ctx, store.EventListParams{After: after, Limit: readBatch})
		if err != nil {
			if ctx.Err() == nil {
				h.cfg.Logger.Warn("events: read the event log", "err", err)
			}
			return
		}
		if len(evs) == 0 {
			return
		}
		now := h.cfg.Now()
		h.mu.Lock()
		for _, ev := range evs {
			if ev.ID > h.last && !h.closed {
				h.deliverLocked(ev, now)
			}
		}
		h.mu.Unlock()
		if len(evs) < readBatch {
			return
		}
	}
}

// deliverLocked buffers ev (whose ID is above h.last) and hands it to
// every subscriber whose filter it matches; h.mu must be held.
func (h *Hub) deliverLocked(ev rota.Event, now time.Time) {
	h.last = ev.ID
	h.prune(now)
	h.push(entry{ev: ev, at: now})
	h.rates.add(ev, now)
	for s := range h.subs {
		if ev.ID <= s.skip || !s.filter.match(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			h.dropLocked(s, ErrSlow)
		}
	}
}

// push appends e to the ring: it grows up to MaxEvents entries, then the
// oldest entry makes room.
func (h *Hub) push(e entry) {
	switch {
	case h.n < len(h.ring):
		h.ring[(h.head+h.n)%len(h.ring)] = e
		h.n++
	case len(h.ring) < h.cfg.MaxEvents:
		grown := make([]entry, min(max(2*len(h.ring), 1024), h.cfg.MaxEvents))
		for i := 0; i < h.n; i++ {
			grown[i] = *h.at(i)
		}
		h.ring, h.head = grown, 0
		h.ring[h.n] = e
		h.n++
	default:
		h.ring[h.head] = e
		h.head = (h.head + 1) % len(h.ring)
	}
}

// at returns the i-th oldest buffered entry.
func (h *Hub) at(i int) *entry { return &h.ring[(h.head+i)%len(h.ring)] }

// prune forgets the events older than the retention.
func (h *Hub) prune(now time.Time) {
	cut := now.Add(-h.cfg.Retention)
	for h.n > 0 && h.at(0).at.Before(cut) {
		*h.at(0) = entry{}
		h.head = (h.head + 1) % len(h.ring)
		h.n--
	}
	if h.n == 0 {
		h.head = 0
	}
}

// Filter selects events.
type Filter struct {
	// Kinds, when not empty, keeps only the events of these kinds (events
	// that belong to no kind are left out too).
	Kinds []string
	// Types, when not empty, keeps only the events whose type (as
	// "task") or name (rota.Event.Name, as "task.succeeded") is listed.
	Types []string
	// TaskID, when set, keeps only the events of this task.
	TaskID string
}

func (f Filter) match(ev rota.Event) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, ev.Kind) {
		return false
	}
	if f.TaskID != "" && ev.TaskID != f.TaskID {
		return false
	}
	return len(f.Types) == 0 || slices.Contains(f.Types, string(ev.Type)) || slices.Contains(f.Types, ev.Name())
}

// Subscription is one subscriber of a Hub: read C until it is closed, then
// Err says why.
type Subscription struct {
	hub    *Hub            // immutable
	filter Filter          // immutable
	ch     chan rota.Event // closed by the hub (under hub.mu) when dropped
	err    error           // guarded by hub.mu; set before ch is closed
	skip   uint64          // guarded by hub.mu: events up to it are not sent (the replay has them)
	once   sync.Once       // guards Close
}

// C delivers the events published after Subscribe returned, in order. It
// is closed when the subscription ends (Close, the hub's Close, or a slow
// reader).
func (s *Subscription) C() <-chan rota.Event { return s.ch }

// Err tells why C was closed: ErrSlow, ErrClosed, or nil after Close. It
// must be called only after C is closed.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.hub.mu.Lock()
		s.hub.dropLocked(s, nil)
		s.hub.mu.Unlock()
	})
}

// dropLocked removes s and closes its channel; h.mu must be held.
func (h *Hub) dropLocked(s *Subscription, err error) {
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	s.err = err
	close(s.ch)
}

// Replay is what Subscribe found for a subscriber that names the last
// event it saw.
type Replay struct {
	// Events are the events after the named ID that match the filter,
	// oldest first.
	Events []rota.Event
	// Reset is true when events after the named ID may be missing: the ID
	// is no longer kept, or it is not one of this stream (another
	// database's, a previous process's). The client should reload its
	// state.
	Reset bool
	// LastID is the subscriber's position: the ID of the latest event
	// before the subscription's channel begins.
	LastID uint64
}

// Subscribe registers a subscriber of the events that match f. When after
// is not 0 it also returns the events after that ID (after is the last ID
// the client saw), from the buffer or, with a Log, from the store; the
// subscription's channel then continues exactly where the replay ends,
// with nothing missing and nothing twice. With a Log, an ID another node
// issued that this one has not read yet is valid: the channel starts after
// it. It fails with ErrClosed after Close, and with the Log's error when
// it could not be read.
func (h *Hub) Subscribe(ctx context.Context, f Filter, after uint64) (*Subscription, Replay, error) {
	ch := make(chan rota.Event, h.cfg.SubscriberBuffer)
	s := &Subscription{hub: h, filter: f, ch: ch}
	now := h.cfg.Now()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, Replay{}, ErrClosed
	}
	h.prune(now)
	h.subs[s] = struct{}{}
	pos := h.last
	rep := Replay{LastID: pos}
	if after == 0 || after == pos {
		h.mu.Unlock()
		return s, rep, nil
	}
	if i, ok := h.ringAfter(after); ok {
		for ; i < h.n; i++ {
			if ev := h.at(i).ev; f.match(ev) {
				rep.Events = append(rep.Events, ev)
			}
		}
		h.mu.Unlock()
		return s, rep, nil
	}
	if h.cfg.Log == nil {
		rep.Reset = true // not an ID of this hub, or evicted
		h.mu.Unlock()
		return s, rep, nil
	}
	if after > pos {
		s.skip = after // perhaps another node's, not read here yet
	} else {
		s.skip = pos // the channel begins after pos; the store has the rest
	}
	h.mu.Unlock()
	rep, err := h.replayFromLog(ctx, f, after, pos)
	if err != nil {
		s.Close()
		return nil, Replay{}, err
	}
	if rep.Reset {
		h.mu.Lock()
		s.skip = 0
		h.mu.Unlock()
	}
	return s, rep, nil
}

// ringAfter returns the ring index of the first event after the ID after
// when the ring holds every event after it.
func (h *Hub) ringAfter(after uint64) (int, bool) {
	if h.n == 0 || after+1 < h.at(0).ev.ID || after > h.last {
		return 0, false
	}
	return sort.Search(h.n, func(i int) bool { return h.at(i).ev.ID > after }), true
}

// replayFromLog returns the events of the Log after the ID after, up to
// pos, or a reset when they are not all kept (or after is unknown, or too
// far behind). A filter on one task replays what is kept of its events
// when after is older than the log: a task's page shows its history.
func (h *Hub) replayFromLog(ctx context.Context, f Filter, after, pos uint64) (Replay, error) {
	b, err := h.cfg.Log.EventBounds(ctx)
	if err != nil {
		return Replay{}, err
	}
	if after > pos {
		if after > b.Last {
			return Replay{Reset: true, LastID: pos}, nil // unknown
		}
		return Replay{LastID: after}, nil
	}
	oldest := b.Oldest
	if oldest == 0 {
		oldest = b.Last + 1 // nothing kept
	}
	if f.TaskID != "" && after+1 < oldest {
		after = oldest - 1 // one task's events: all that is kept of them
	}
	if after+1 < oldest || pos-after > uint64(h.cfg.MaxReplay) {
		return Replay{Reset: true, LastID: pos}, nil
	}
	rep := Replay{LastID: pos}
	for after < pos {
		evs, err := h.cfg.Log.EventList(ctx, store.EventListParams{After: after, Limit: readBatch})
		if err != nil {
			return Replay{}, err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.ID > pos {
				break
			}
			if f.match(ev) {
				rep.Events = append(rep.Events, ev)
			}
		}
		after = evs[len(evs)-1].ID
	}
	return rep, nil
}

// Oldest returns the ID of the oldest buffered event, and false when the
// buffer is empty.
func (h *Hub) Oldest() (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prune(h.cfg.Now())
	if h.n == 0 {
		return 0, false
	}
	return h.at(0).ev.ID, true
}

// Close ends every subscription (their streams return, so that
// http.Server.Shutdown is not held up by them) and refuses new ones.
// Publish does nothing afterwards. It is idempotent; register it with
// http.Server.RegisterOnShutdown.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for s := range h.subs {
		h.dropLocked(s, ErrClosed)
	}
	close(h.done)
}

// Done is closed by Close.
func (h *Hub) Done() <-chan struct{} { return h.done }
