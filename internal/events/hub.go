// Package events is Rota's live event stream: a Hub that numbers every task
// and run state change, keeps the recent ones in a ring buffer and fans them
// out to subscribers, and the server-sent-events handler of GET /api/events
// on top of it.
//
// IDs increase by one per event. The first ID of a Hub is its start time in
// unix microseconds, so the IDs of a restarted node are far above those of
// its previous life: a client that reconnects with an ID the Hub never
// issued (or one that fell out of the buffer) is told to reload (a reset
// event) instead of being handed unrelated events.
//
// A subscriber gets the buffered events after the ID it names, then every
// new one, through a bounded channel. Publish never blocks: a subscriber
// whose channel is full is dropped (its stream ends; the client reconnects
// with its last ID and loses nothing that is still buffered).
package events

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rotahq/rota"
)

// Defaults of Config.
const (
	DefaultRetention        = 10 * time.Minute
	DefaultMaxEvents        = 100_000
	DefaultSubscriberBuffer = 1024
	DefaultHeartbeat        = 15 * time.Second
	DefaultRetry            = 2 * time.Second
)

// ErrSlow ends a subscription whose channel was full when an event had to
// be delivered.
var ErrSlow = errors.New("events: subscriber too slow: dropped")

// ErrClosed ends the subscriptions of a closed Hub.
var ErrClosed = errors.New("events: hub closed")

// Config configures a Hub. Zero values mean the documented defaults.
type Config struct {
	// Retention is how long an event stays in the buffer (default
	// DefaultRetention, 10 minutes).
	Retention time.Duration
	// MaxEvents caps the buffer (default DefaultMaxEvents, 100,000): the
	// oldest events go first when it is full.
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
	// Now is the clock (default time.Now). The buffer's retention and the
	// throughput series use it.
	Now func() time.Time
	// FirstID is the ID of the first event (default: Now in unix
	// microseconds; see the package documentation).
	FirstID uint64
}

// entry is one buffered event with the time the Hub received it.
type entry struct {
	ev rota.Event
	at time.Time
}

// Hub numbers, buffers and fans out events. Create it with New; it is safe
// for concurrent use.
type Hub struct {
	cfg Config // immutable after New

	mu     sync.Mutex // guards the fields below
	next   uint64     // ID of the next event
	ring   []entry    // circular buffer, grown up to MaxEvents
	head   int        // index of the oldest entry
	n      int        // entries in the ring
	subs   map[*Subscription]struct{}
	closed bool
	rates  *throughput

	done chan struct{} // closed by Close
}

// New returns a Hub for cfg.
func New(cfg Config) (*Hub, error) {
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FirstID == 0 {
		cfg.FirstID = uint64(max(cfg.Now().UnixMicro(), 1))
	}
	return &Hub{
		cfg:   cfg,
		next:  cfg.FirstID,
		subs:  map[*Subscription]struct{}{},
		rates: newThroughput(),
		done:  make(chan struct{}),
	}, nil
}

// Publish numbers ev, buffers it and hands it to every subscriber whose
// filter it matches. A zero ev.Time is set to now. It never blocks: a
// subscriber whose channel is full is dropped with ErrSlow. Its signature
// matches dispatch.Config.Events. After Close it does nothing.
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
	ev.ID = h.next
	h.next++
	h.prune(now)
	h.push(entry{ev: ev, at: now})
	h.rates.add(ev, now)
	for s := range h.subs {
		if !s.filter.match(ev) {
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
}

func (f Filter) match(ev rota.Event) bool {
	return len(f.Kinds) == 0 || slices.Contains(f.Kinds, ev.Kind)
}

// Subscription is one subscriber of a Hub: read C until it is closed, then
// Err says why.
type Subscription struct {
	hub    *Hub            // immutable
	filter Filter          // immutable
	ch     chan rota.Event // closed by the hub (under hub.mu) when dropped
	err    error           // guarded by hub.mu; set before ch is closed
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

// Replay is what Subscribe found in the buffer for a subscriber that names
// the last event it saw.
type Replay struct {
	// Events are the buffered events after the named ID that match the
	// filter, oldest first.
	Events []rota.Event
	// Reset is true when events after the named ID may be missing: the ID
	// is older than the buffer, or it is not one this Hub issued (a client
	// of a previous server process). The client should reload its state.
	Reset bool
	// LastID is the ID of the latest event published before the
	// subscription began (FirstID−1 when none was).
	LastID uint64
}

// Subscribe registers a subscriber of the events that match f. When after
// is not 0 it also returns the buffered events after that ID (after is
// the last ID the client saw); the subscription's channel then continues
// exactly where the replay ends, with nothing missing and nothing twice.
// It fails with ErrClosed after Close.
func (h *Hub) Subscribe(f Filter, after uint64) (*Subscription, Replay, error) {
	ch := make(chan rota.Event, h.cfg.SubscriberBuffer)
	s := &Subscription{hub: h, filter: f, ch: ch}
	now := h.cfg.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, Replay{}, ErrClosed
	}
	h.prune(now)
	rep := Replay{LastID: h.next - 1}
	if after != 0 {
		oldest := h.next // the ID of the oldest buffered event
		if h.n > 0 {
			oldest = h.at(0).ev.ID
		}
		switch {
		case after < h.cfg.FirstID-1 || after > h.next-1:
			// Not an ID of this hub.
			rep.Reset = true
		case after+1 < oldest:
			// Events after it were evicted.
			rep.Reset = true
		}
		if !rep.Reset {
			for i := int(after + 1 - oldest); i < h.n; i++ {
				if ev := h.at(i).ev; f.match(ev) {
					rep.Events = append(rep.Events, ev)
				}
			}
		}
	}
	h.subs[s] = struct{}{}
	return s, rep, nil
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
