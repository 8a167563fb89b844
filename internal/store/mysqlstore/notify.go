package mysqlstore

import (
	"context"
	"slices"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// SupportsNotify is true: nodes sharing the database hear of each other's
// changes through the change sequence.
func (s *Store) SupportsNotify() bool { return true }

// Change sequence timings.
const (
	// gapWait is how long a hole in the ids read is looked at again: an
	// auto-increment id is taken at the insert, so a transaction that
	// commits after a later one leaves a hole until it commits (or rolls
	// back, then the hole stays).
	gapWait = 3 * time.Second
	// maxGaps bounds the holes watched.
	maxGaps = 512
	// changeRetention is the age past which pollers delete changes, and
	// trimEvery how often each poller does.
	changeRetention = time.Minute
	trimEvery       = 10 * time.Second
)

// Subscribe implements store.Store. It polls the changes table every
// PollInterval for the rows past the last it read (and the holes below it,
// for a while) and calls fn, from the calling goroutine, for the changes of
// the other nodes and for those of this node (Config.NodeID) that its own
// callers cannot know of (txn.notifySelf). When the database cannot be read
// it keeps trying; once it reads again it calls fn once per known kind with
// a zero RunAt (and once with Events), so that receivers look again. It
// returns nil when ctx ends or the store is closed.
func (s *Store) Subscribe(ctx context.Context, fn func(store.Notification)) error {
	ctx = storecost.Async(ctx) // the poller is the store's own work
	p := poller{s: s, fn: fn}
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	started := false
	for {
		if !started {
			started = p.start(ctx) == nil
		} else {
			p.poll(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return nil
		case <-tick.C:
		}
	}
}

// poller is the state of one subscription.
type poller struct {
	s       *Store
	fn      func(store.Notification)
	last    int64
	gaps    map[int64]time.Time // id → watched until
	lost    bool                // the last poll failed
	trimmed time.Time
}

// start reads the end of the sequence: the subscription hears what comes
// after it.
func (p *poller) start(ctx context.Context) error {
	p.gaps = map[int64]time.Time{}
	return p.s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM changes`).Scan(&p.last)
}

// poll reads and delivers the new changes.
func (p *poller) poll(ctx context.Context) {
	q := `SELECT id, node, self, kind, run_at, events FROM changes WHERE id > ?`
	args := []any{p.last}
	if len(p.gaps) > 0 {
		ids := make([]any, 0, len(p.gaps))
		for id := range p.gaps {
			ids = append(ids, id)
		}
		q += ` OR id IN (` + inList(len(ids)) + `)`
		args = append(args, ids...)
	}
	rows, err := p.s.r.QueryContext(ctx, q+` ORDER BY id LIMIT 1000`, args...)
	type change struct {
		id         int64
		node, kind string
		self, ev   bool
		runAt      int64
	}
	got, err := collect(rows, err, "read changes", func(sc scanner) (change, error) {
		var c change
		err := sc.Scan(&c.id, &c.node, &c.self, &c.kind, &c.runAt, &c.ev)
		return c, err
	})
	if err != nil {
		if !p.lost && ctx.Err() == nil {
			p.s.log.Warn("mysqlstore: cannot read the change sequence; retrying", "err", err)
		}
		p.lost = true
		return
	}
	if p.lost {
		p.lost = false
		p.resync(ctx)
	}
	now := time.Now()
	for _, c := range got {
		delete(p.gaps, c.id)
		for id := p.last + 1; id < c.id && len(p.gaps) < maxGaps; id++ {
			p.gaps[id] = now.Add(gapWait)
		}
		p.last = max(p.last, c.id)
		if c.node == p.s.cfg.NodeID && p.s.cfg.NodeID != "" && !c.self {
			continue
		}
		if c.ev {
			p.fn(store.Notification{Events: true})
			continue
		}
		p.fn(store.Notification{Kind: c.kind, RunAt: tm(c.runAt)})
	}
	for id, until := range p.gaps {
		if now.After(until) {
			delete(p.gaps, id)
		}
	}
	if now.Sub(p.trimmed) > trimEvery {
		p.trimmed = now
		_, _ = p.s.r.ExecContext(ctx, `DELETE FROM changes WHERE at < ? ORDER BY id LIMIT 10000`, now.Add(-changeRetention).UnixMilli())
	}
}

// resync tells fn to look again at every kind (and the event log) after
// changes may have been missed.
func (p *poller) resync(ctx context.Context) {
	kinds, err := p.s.KindList(ctx)
	if err != nil {
		return
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	slices.Sort(names)
	for _, k := range names {
		p.fn(store.Notification{Kind: k})
	}
	p.fn(store.Notification{Events: true})
}
