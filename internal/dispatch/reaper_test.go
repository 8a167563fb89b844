package dispatch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func TestReapOnceTakesOverSilentWorker(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.ReapInterval = time.Second })
	task := f.submit("k", time.Time{})
	res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "silent", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	// Within the lease the reaper does nothing and sleeps until the lease
	// ends, at most ReapInterval.
	if sleep := f.d.ReapOnce(context.Background()); sleep != time.Second {
		t.Fatalf("reaper sleep = %v, want the 1s cap", sleep)
	}
	waiter := f.claimAsync("w2", "k", time.Minute)
	f.clock.Advance(31 * time.Second)
	f.d.ReapOnce(context.Background())
	got := receive(t, waiter)
	if len(got.Runs) != 1 || got.Runs[0].TaskID != task.ID || got.Runs[0].Attempt != 2 {
		t.Fatalf("take-over claim = %+v, want %s attempt 2", got, task.ID)
	}
	if _, err := f.d.Heartbeat(context.Background(), res.Runs[0].RunID, "silent", ""); !errors.Is(err, rota.ErrLeaseLost) {
		t.Fatalf("silent worker's heartbeat: %v, want lease lost", err)
	}
}

// electAt makes node the store's leader at the fixture's clock (lease 10s)
// and returns its term.
func (f *fixture) electAt(node string) int64 {
	f.t.Helper()
	res, err := f.st.LeaderAttemptElect(context.Background(), store.LeaderElectParams{NodeID: node, TTL: 10 * time.Second, Now: f.clock.Now()})
	if err != nil || !res.Leader {
		f.t.Fatalf("elect %s: %+v, %v", node, res, err)
	}
	return res.Term
}

// A deposed leader's reaper round is refused by the store: the run it
// would have expired stays RUNNING until the current leader's round.
func TestReaperFencedByTerm(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	var term atomic.Int64
	r, err := NewReaper(ReaperConfig{Store: f.st, Clock: f.clock, Leader: func() (int64, bool) { return term.Load(), true }})
	if err != nil {
		t.Fatal(err)
	}
	task := f.submit("k", time.Time{})
	claimed, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "silent", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(claimed.Runs) != 1 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	term.Store(f.electAt("a"))
	f.clock.Advance(31 * time.Second) // a's lease and the run's lease passed
	b := f.electAt("b")
	if d := r.runOnce(context.Background()); d != DefaultReapInterval {
		t.Errorf("fenced round's sleep = %v, want the interval %v", d, DefaultReapInterval)
	}
	if got, err := f.st.TaskGet(context.Background(), task.ID); err != nil || got.Status != rota.StatusRunning {
		t.Fatalf("after the deposed leader's round: %v, %v; want still RUNNING", got.Status, err)
	}
	term.Store(b)
	r.runOnce(context.Background())
	if got, err := f.st.TaskGet(context.Background(), task.ID); err != nil || got.Status != rota.StatusScheduled || got.Attempt != 1 {
		t.Fatalf("after the leader's round: %+v, %v; want SCHEDULED for a retry", got, err)
	}
}

// countingReaperStore counts RunExpire calls and expires nothing.
type countingReaperStore struct{ calls atomic.Int64 }

func (s *countingReaperStore) RunExpire(context.Context, store.RunExpireParams) (store.RunExpireResult, error) {
	s.calls.Add(1)
	return store.RunExpireResult{}, nil
}

func (s *countingReaperStore) RunNextExpiry(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}

// The loop reaps only while this node leads, and Stop ends it.
func TestReaperLoopLeaderOnly(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	st := &countingReaperStore{}
	var leading atomic.Bool
	r, err := NewReaper(ReaperConfig{Store: st, Clock: f.clock, Interval: time.Second,
		Leader: func() (int64, bool) { return 1, leading.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	for range 3 {
		f.eventually("the reaper sleeping", func() bool { return f.clock.Timers() > 0 })
		f.clock.Advance(time.Second)
	}
	if n := st.calls.Load(); n != 0 {
		t.Fatalf("a follower's reaper called RunExpire %d times", n)
	}
	leading.Store(true)
	f.clock.Advance(time.Second)
	f.eventually("the leader's round", func() bool { return st.calls.Load() > 0 })
	r.Stop()
	r.Stop()
	if err := errors.Join(r.Start(context.Background())); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}
