package schedule_test

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/store"
)

// The engine's fire batches carry its leadership term: once another node
// took over, a deposed engine's batch is refused by the store and fires
// nothing; the current leader's fires.
func TestEngineFireBatchesAreFenced(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var term atomic.Int64
	eng, err := schedule.NewEngine(schedule.EngineConfig{
		Store: e.st, Dispatcher: e.disp, Clock: e.clk, Logger: slog.New(slog.DiscardHandler), Metrics: e.m, IDs: e.ids,
		FireAhead: -1, Term: term.Load,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng.SetLeader(true)
	e.eng = eng
	elect := func(node string) int64 {
		t.Helper()
		res, err := e.st.LeaderAttemptElect(e.ctx, store.LeaderElectParams{NodeID: node, TTL: 10 * time.Second, Now: e.clk.Now()})
		if err != nil || !res.Leader {
			t.Fatalf("elect %s: %+v, %v", node, res, err)
		}
		return res.Term
	}
	runs := func(id string) int {
		t.Helper()
		res, err := e.st.ScheduleRuns(e.ctx, store.ScheduleRunsParams{ScheduleID: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Runs)
	}
	term.Store(elect("a"))
	sc := e.add(nil) // every 5 s
	e.clk.Advance(sec(5))
	if _, err := eng.RunOnce(e.ctx); err != nil {
		t.Fatalf("leader's pass: %v", err)
	}
	if n := runs(sc.ID); n != 1 {
		t.Fatalf("%d runs after the leader's fire, want 1", n)
	}
	// a stalls past its lease; b takes over; a's engine, not yet told,
	// fires under its old term.
	e.clk.Advance(sec(10))
	b := elect("b")
	if _, err := eng.RunOnce(e.ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed engine's pass: %v, want store.ErrFenced", err)
	}
	if n := runs(sc.ID); n != 1 {
		t.Fatalf("%d runs after the deposed engine's fire, want still 1", n)
	}
	term.Store(b)
	if _, err := eng.RunOnce(e.ctx); err != nil {
		t.Fatalf("new leader's pass: %v", err)
	}
	if n := runs(sc.ID); n < 2 {
		t.Fatalf("%d runs after the new leader's fire, want more than 1", n)
	}
}
