package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// SupportsNotify is true: nodes sharing the database hear of each other's
// changes through LISTEN/NOTIFY.
func (s *Store) SupportsNotify() bool { return true }

// Subscription timings.
const (
	// listenPing is how long the listening connection may stay silent
	// before Subscribe checks it with a ping, so a connection that died
	// without a word is noticed.
	listenPing = 30 * time.Second
	// pingTimeout bounds that check.
	pingTimeout = 5 * time.Second
	// Reconnection backoff: from minBackoff, doubling up to maxBackoff,
	// with jitter.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// Subscribe implements store.Store. It LISTENs on a connection of its own
// (not from the pool) on the schema's channel and calls fn, from the
// calling goroutine, for every notification of the other nodes, and for
// those of this node (Config.NodeID) that its callers cannot know of
// (txn.notifySelf): a node's dispatcher wakes its own waiters when it
// submits or completes, and an echo of those would only send them claiming
// again for nothing (an empty claim transaction, with the kind's lock, per
// echo). A store without a NodeID hears everything. When
// the connection drops it reconnects with backoff; as notifications sent
// meanwhile are lost, it then calls fn once per known kind with a zero
// RunAt, so that receivers look again. It returns nil when ctx ends or the
// store is closed; it never gives up otherwise.
//
// fn must return quickly: while it runs, notifications wait in the
// server's queue, which is shared by the whole database cluster and which
// PostgreSQL cannot trim past the slowest listener.
func (s *Store) Subscribe(ctx context.Context, fn func(store.Notification)) error {
	ctx, cancel := context.WithCancel(storecost.Async(ctx)) // the listener is the store's own work

	defer cancel()
	go func() { // Close ends the subscription too
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := minBackoff
	for attempt := 0; ; attempt++ {
		listening, err := s.listen(ctx, fn, attempt > 0)
		if ctx.Err() != nil {
			return nil
		}
		if listening {
			backoff = minBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		s.log.Warn("pgstore: notification connection lost; reconnecting", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listen opens the dedicated connection, LISTENs and delivers until the
// connection fails or ctx ends. listening reports whether LISTEN
// succeeded; resync makes it announce every kind once it has.
func (s *Store) listen(ctx context.Context, fn func(store.Notification), resync bool) (listening bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	s.listening.Store(true)
	defer s.listening.Store(false)
	s.control(helloControl) // the listening nodes answer: this one learns of them
	if resync {
		if err := s.announceAll(ctx, fn); err != nil {
			return true, fmt.Errorf("after reconnecting: %w", err)
		}
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, fmt.Errorf("ping: %w", err)
			}
			continue
		case err != nil:
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		if what, from, ok := decodeControl(n.Payload); ok {
			if from != s.cfg.NodeID {
				if err := s.heardPeer(ctx, what, from, fn); err != nil {
					return true, err
				}
			}
			continue
		}
		note, from, ok := decodePayload(n.Payload)
		if ok && from != "" && from != s.cfg.NodeID {
			s.peerSeen.Store(time.Now().UnixNano())
		}
		if ok && (from == "" || from != s.cfg.NodeID) { // anonymous, or another node's
			fn(note)
		}
	}
}

// --- presence ------------------------------------------------------------------

// A node's notifications are for the other nodes (its own waiters are woken
// in the process), so a node that knows no other is listening sends none:
// on a single node that saves a pg_notify transaction per burst of
// changes (measured at 500 tasks/s: ~0.8 a task, 0.1–0.2 ms of
// PostgreSQL's CPU a task, 10–15% of it), and the listener's wake-up to
// read its own echo. What it sends anyway: the anonymous notes its own
// listener must hear (txn.notifySelf), and everything while its own
// listener is down (it cannot know who listens then).
//
// Nodes learn of each other with control payloads on the same channel:
// a node that starts listening sends hello, every listening node answers
// here, and each sends here every presenceEvery while it listens. A node
// has peers while it heard one of those, or any note of another node,
// within peerTTL. A task inserted on node A just before A heard B's hello
// was not announced to B; so when B hears a node it did not know, it
// wakes its receivers for every kind, as after a reconnection, and they
// find that task (committed before A's answer was sent: A's notifier sends
// in order). Older nodes ignore control payloads (no kind), and do not
// send them: a node of an older version is seen only by the notes it
// sends, so during a rolling upgrade its waiting workers may wait for
// their own timers rather than a newer node's notification.

const (
	presenceEvery = 10 * time.Second
	peerTTL       = 3 * presenceEvery
	helloControl  = "hello" // asks for here
	hereControl   = "here"
)

// alone reports whether this store listens and heard no other node within
// peerTTL, so that only anonymous notes need sending.
func (s *Store) alone() bool {
	return s.listening.Load() && time.Since(time.Unix(0, s.peerSeen.Load())) > peerTTL
}

// control queues a presence payload for the notifier.
func (s *Store) control(what string) {
	s.noteMu.Lock()
	s.controls = append(s.controls, "|"+what+"|"+s.cfg.NodeID)
	s.noteMu.Unlock()
	s.wakeNotifier()
}

// heardPeer records a control payload of node from: it answers a hello,
// and when the node was not known it wakes fn's receivers for every kind
// and the event log (announceAll: see above).
func (s *Store) heardPeer(ctx context.Context, what, from string, fn func(store.Notification)) error {
	known := !s.alone()
	s.peerSeen.Store(time.Now().UnixNano())
	if what == helloControl {
		s.control(hereControl)
	}
	if known {
		return nil
	}
	if err := s.announceAll(ctx, fn); err != nil {
		return fmt.Errorf("on learning of node %s: %w", from, err)
	}
	return nil
}

// announceAll calls fn for every known kind and for the event log, as if
// each had changed: the notifications sent meanwhile may have been missed
// (a lost connection; a node that did not know this one listened).
func (s *Store) announceAll(ctx context.Context, fn func(store.Notification)) error {
	kinds, err := s.KindList(ctx)
	if err != nil {
		return fmt.Errorf("list kinds: %w", err)
	}
	for _, k := range kinds {
		fn(store.Notification{Kind: k.Name})
	}
	fn(store.Notification{Events: true})
	return nil
}

// decodeControl parses a presence payload: "|what|nodeID".
func decodeControl(p string) (what, node string, ok bool) {
	rest, found := strings.CutPrefix(p, "|")
	if !found {
		return "", "", false
	}
	what, node, ok = strings.Cut(rest, "|")
	return what, node, ok && (what == helloControl || what == hereControl)
}

// --- sending -----------------------------------------------------------------

// notes are notifications to send, merged per kind.
type notes map[string]kindNote

// kindNote is what is known of one kind: claimable tasks now, and the
// earliest later instant some become claimable. Both are kept, so that a
// receiver both wakes its waiters and sets a timer for the later ones.
type kindNote struct {
	now  bool
	next int64 // unix ms; 0 = none
	// self: the sending node hears it too (see txn.notifySelf).
	self bool
}

// add records that tasks of kind are claimable from runAt on; an instant
// not after now means now.
func (ns notes) add(kind string, runAt, now int64, self bool) {
	n := ns[kind]
	n.self = n.self || self
	if runAt <= now {
		n.now = true
	} else if n.next == 0 || runAt < n.next {
		n.next = runAt
	}
	ns[kind] = n
}

// merge adds the notes of o.
func (ns notes) merge(o notes) {
	for kind, n := range o {
		if n.now {
			ns.add(kind, 0, 0, n.self)
		}
		if n.next != 0 {
			ns.add(kind, n.next, 0, n.self)
		}
	}
}

// payloads renders the notes, in kind order; alone, only the anonymous
// ones (see alone).
func (ns notes) payloads(node string, alone bool) []string {
	kinds := make([]string, 0, len(ns))
	for k := range ns {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var out []string
	for _, k := range kinds {
		from := node
		if ns[k].self {
			from = "" // anonymous: every node hears it, the sender too
		} else if alone {
			continue
		}
		if ns[k].now {
			out = append(out, encodePayload(k, 0, from))
		}
		if ns[k].next != 0 {
			out = append(out, encodePayload(k, ns[k].next, from))
		}
	}
	return out
}

// post hands the notes of a committed transaction to the notifier.
func (s *Store) post(ns notes) {
	if len(ns) == 0 {
		return
	}
	s.noteMu.Lock()
	s.pending.merge(ns)
	s.noteMu.Unlock()
	s.wakeNotifier()
}

// wakeNotifier tells the notifier something is pending (a wake-up already
// pending will do).
func (s *Store) wakeNotifier() {
	select {
	case s.noteWake <- struct{}{}:
	default:
	}
}

// notifier sends the pending notifications until the store closes, then
// the last ones.
//
// Notifications are sent after the commit of the transaction that made
// the change, by this goroutine, not by pg_notify inside the transaction:
// PostgreSQL serializes the commits of transactions that notified (they
// hold a database-wide lock on the notification queue while they commit),
// so notifying inside every insert made concurrent inserts across the
// cluster no faster than a single one (measured on a busy 2-CPU machine,
// 8 writers: about 210 inserts/s with pg_notify in the transaction, 1,100
// with this notifier; 1 writer: about 300 either way). Here one statement
// carries whatever piled up while the previous one committed, so
// notifications cost one commit at a time whatever the write rate, and
// arrive about a commit later. A process that dies between a commit and
// its notification loses that hint; receivers treat notifications as
// hints and have their own timers.
func (s *Store) notifier() {
	defer close(s.noteDone)
	backoff := minBackoff
	presence := time.NewTicker(presenceEvery)
	defer presence.Stop()
	for {
		select {
		case <-s.noteWake:
		case <-presence.C:
			if s.listening.Load() {
				s.control(hereControl)
			}
			continue // the wake-up it queued sends it
		case <-s.closed:
			// The store's life has ended: the last send gets a bounded
			// context of its own.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.life), pingTimeout)
			defer cancel()
			if err := s.sendPending(ctx); err != nil {
				s.log.Warn("pgstore: notifications lost at close", "err", err)
			}
			return
		}
		if err := s.sendPending(s.life); err != nil {
			s.log.Warn("pgstore: send notifications; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.closed:
			}
			backoff = min(2*backoff, maxBackoff)
			s.wakeNotifier() // try again
			continue
		}
		backoff = minBackoff
	}
}

// sendPending sends the pending notifications and presence payloads in
// one statement (none when nothing is to be sent: see alone); on failure
// they stay pending.
func (s *Store) sendPending(ctx context.Context) error {
	s.noteMu.Lock()
	ns, controls := s.pending, s.controls
	s.pending, s.controls = make(notes), nil
	s.noteMu.Unlock()
	payloads := append(ns.payloads(s.cfg.NodeID, s.alone()), controls...)
	if len(payloads) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, s.channel, payloads)
	if err != nil {
		s.noteMu.Lock()
		s.pending.merge(ns)
		s.controls = append(controls, s.controls...)
		s.noteMu.Unlock()
		return err
	}
	return nil
}

// --- payloads -----------------------------------------------------------------

// encodePayload renders a notification: "kind|runAtMs|nodeID". Kind names
// cannot contain '|' (rota.KindPattern); the node id comes last, so it may.
func encodePayload(kind string, runAt int64, node string) string {
	return kind + "|" + strconv.FormatInt(runAt, 10) + "|" + node
}

// decodePayload parses what encodePayload made.
func decodePayload(p string) (n store.Notification, node string, ok bool) {
	parts := strings.SplitN(p, "|", 3)
	if len(parts) != 3 || parts[0] == "" {
		return store.Notification{}, "", false
	}
	if parts[0] == eventsNote {
		return store.Notification{Events: true}, parts[2], true
	}
	at, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return store.Notification{}, "", false
	}
	return store.Notification{Kind: parts[0], RunAt: tm(at)}, parts[2], true
}
