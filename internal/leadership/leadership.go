// Package leadership keeps a node registered in the store and elects one
// leader among the nodes that share it. The leader runs the cluster's
// periodic duties (the lease reaper, the retention cleanup, the schedule
// engine); the others stand by and take over within one lease after the
// leader dies or at once after it resigns.
//
// Each election round heartbeats the node (its address and version, as
// GET /api/cluster shows them) and asks the store for the leader lease
// (store.LeaderAttemptElect): granted to a node when nobody holds it or the
// holder's lease passed, renewed while the holder keeps asking. A lease
// carries a term, the fencing token: it increases each time leadership
// changes hands. The leader's duties pass its term with every leader-only
// write and the store refuses a write whose term is not current
// (store.CheckFence, store.ErrFenced), so a deposed leader that has not yet
// noticed (a paused process, a stalled loop) changes nothing.
//
// Leading also stops early on this side: Leading answers true only until
// two ticks before the lease ends, so that a successor, who must wait for
// the whole lease, never overlaps with us even if the loop stalls for a
// tick. On Stop the node resigns (another node takes over at once) and
// leaves the node list.
package leadership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
)

// DefaultTTL is Config.TTL's default.
const DefaultTTL = 5 * time.Second

// NoTerm is the term Leading reports before this node ever led: no
// election grants it, so a fenced write under it is always refused (0
// would mean unfenced).
const NoTerm int64 = -1

// Store is what the elector asks of the store.
type Store interface {
	// LeaderAttemptElect, LeaderResign, NodeHeartbeat and NodeRemove: see
	// store.Store.
	LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error)
	LeaderResign(ctx context.Context, nodeID string) error
	NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error
	NodeRemove(ctx context.Context, nodeID string) error
}

// Config configures an Elector. Zero values mean the defaults.
type Config struct {
	Store  Store  // required
	NodeID string // required: this node's id, unique in the cluster
	// Address returns the address other nodes and the UI show for this
	// node; asked each round (it may be known only once the server
	// listens). Nil: "".
	Address func() string
	// Version is the node's version, shown in GET /api/cluster.
	Version string
	// TTL is how long a leader holds its lease without renewing it
	// (default DefaultTTL): a dead leader is replaced within TTL plus one
	// Tick.
	TTL time.Duration
	// Tick is the time between election rounds (default TTL/4). It must be
	// under TTL/2, or the leader would stop leading before it renews.
	Tick   time.Duration
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
}

// Elector runs this node's election rounds. Create it with New, register
// OnChange hooks, then Start; Stop resigns.
type Elector struct {
	cfg Config // immutable after New

	mu        sync.Mutex // guards the fields below
	leader    bool       // won the last round (or kept a lease known to be ours)
	term      int64      // the term of our own current or last leadership; NoTerm if never
	leaseEnd  time.Time  // when we stop acting as leader: the lease's end minus two ticks
	startedAt time.Time  // set by Start
	onChange  []func(leader bool)
	cancel    context.CancelFunc // the loop's; nil until Start
	done      chan struct{}      // closed when the loop returned
	stopped   bool
}

// New returns an Elector with cfg's defaults applied.
func New(cfg Config) (*Elector, error) {
	if cfg.Store == nil || cfg.NodeID == "" {
		return nil, errors.New("leadership: Store and NodeID are required")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Tick <= 0 {
		cfg.Tick = cfg.TTL / 4
	}
	if cfg.Tick*2 >= cfg.TTL {
		return nil, fmt.Errorf("leadership: tick %v must be under half the lease %v", cfg.Tick, cfg.TTL)
	}
	if cfg.Address == nil {
		cfg.Address = func() string { return "" }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Elector{cfg: cfg, term: NoTerm}, nil
}

// OnChange registers fn to be called, from the election loop (or Start or
// Stop), when this node gains or loses leadership. Register hooks before
// Start.
func (e *Elector) OnChange(fn func(leader bool)) {
	e.mu.Lock()
	e.onChange = append(e.onChange, fn)
	e.mu.Unlock()
}

// Leading reports whether this node leads now, from a lease it knows is
// still its own, and the term of its own current or last leadership
// (NoTerm if it never led): the fencing token of its leader-only writes.
// It has the shape of dispatch.LeaderFunc.
func (e *Elector) Leading() (term int64, leading bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term, e.leader && e.cfg.Clock.Now().Before(e.leaseEnd)
}

// Start runs one election round at once (so that a lone node leads from
// its first request on) and then one every Tick in the background, until
// ctx ends or Stop. A second Start, or one after Stop, fails.
func (e *Elector) Start(ctx context.Context) error {
	e.mu.Lock()
	switch {
	case e.stopped:
		e.mu.Unlock()
		return errors.New("leadership: started after Stop")
	case e.cancel != nil:
		e.mu.Unlock()
		return errors.New("leadership: already started")
	}
	e.startedAt = e.cfg.Clock.Now()
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	e.cancel, e.done = cancel, done
	e.mu.Unlock()
	e.runOnce(lctx)
	go func() {
		defer close(done)
		e.loop(lctx)
	}()
	return nil
}

// Stop ends the election loop, then resigns if this node leads (its hooks
// hear false first, so its duties stop before another node may start
// them) and leaves the node list. ctx bounds the store calls. It is
// idempotent and safe before Start.
func (e *Elector) Stop(ctx context.Context) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	cancel, done := e.cancel, e.done
	e.mu.Unlock()
	if cancel == nil {
		return // never started: never joined
	}
	cancel()
	<-done
	e.resign(ctx)
}

func (e *Elector) loop(ctx context.Context) {
	c := e.cfg.Clock
	for {
		t := c.NewTimer(e.cfg.Tick)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		e.runOnce(ctx)
	}
}

// runOnce heartbeats the node and runs one election round, and calls the
// hooks if leadership changed.
func (e *Elector) runOnce(ctx context.Context) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	started := e.startedAt
	e.mu.Unlock()
	if err := e.cfg.Store.NodeHeartbeat(ctx, store.NodeHeartbeatParams{
		NodeID: e.cfg.NodeID, Address: e.cfg.Address(), Version: e.cfg.Version, StartedAt: started, Now: now,
	}); err != nil && ctx.Err() == nil {
		e.cfg.Logger.Warn("leadership: node heartbeat", "err", err)
	}
	res, err := e.cfg.Store.LeaderAttemptElect(ctx, store.LeaderElectParams{NodeID: e.cfg.NodeID, TTL: e.cfg.TTL, Now: now})
	e.mu.Lock()
	leader := err == nil && res.Leader
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("leadership: election", "err", err)
		}
		// Keep leading only while the lease we hold is certainly ours.
		leader = e.leader && now.Before(e.leaseEnd)
	case leader:
		e.term = res.Term
		// Stop acting as leader two ticks before the lease ends (Leading
		// checks it before every duty round), so that a successor, who
		// must wait for the whole lease, never overlaps with us even if
		// this loop stalls for a tick.
		e.leaseEnd = now.Add(e.cfg.TTL - 2*e.cfg.Tick)
	}
	changed := leader != e.leader
	e.leader = leader
	hooks := append([]func(bool){}, e.onChange...)
	term := e.term
	e.mu.Unlock()
	if changed {
		e.cfg.Logger.Info("leadership changed", "node", e.cfg.NodeID, "leader", leader, "term", term,
			"leader_id", res.LeaderID, "at_ms", now.UnixMilli())
		for _, fn := range hooks {
			fn(leader)
		}
	}
}

// resign gives up leadership and leaves the node list.
func (e *Elector) resign(ctx context.Context) {
	e.mu.Lock()
	wasLeader := e.leader
	e.leader = false
	hooks := append([]func(bool){}, e.onChange...)
	e.mu.Unlock()
	if wasLeader {
		for _, fn := range hooks {
			fn(false)
		}
		if err := e.cfg.Store.LeaderResign(ctx, e.cfg.NodeID); err != nil {
			e.cfg.Logger.Warn("leadership: resign", "err", err)
		}
	}
	if err := e.cfg.Store.NodeRemove(ctx, e.cfg.NodeID); err != nil {
		e.cfg.Logger.Warn("leadership: leave the node list", "err", err)
	}
}
