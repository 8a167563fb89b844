package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// base is the fake clock's start: a whole minute, so that every-5-seconds
// fire times are base+5s, base+10s, …
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

// env is an engine over a real SQLite file, a dispatcher and a fake clock.
type env struct {
	t    testing.TB
	ctx  context.Context
	clk  *clock.Fake
	path string
	st   *sqlitestore.Store
	disp *dispatch.Dispatcher
	eng  *schedule.Engine
	m    *metrics.Metrics
	reg  *prometheus.Registry
	ids  *rota.IDGenerator

	evMu   sync.Mutex
	events []rota.Event // every event of the dispatcher and the engine
}

// record is the event sink of the env's dispatcher and engine.
func (e *env) record(ev rota.Event) {
	e.m.ObserveEvent(ev)
	e.evMu.Lock()
	e.events = append(e.events, ev)
	e.evMu.Unlock()
}

// eventsOf returns the events of type typ so far.
func (e *env) eventsOf(typ rota.EventType) []rota.Event {
	e.evMu.Lock()
	defer e.evMu.Unlock()
	var out []rota.Event
	for _, ev := range e.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func setup(t testing.TB) *env {
	t.Helper()
	return open(t, filepath.Join(t.TempDir(), "rota.db"), clock.NewFake(base))
}

// open starts an engine (leader) over the database at path.
func open(t testing.TB, path string, clk *clock.Fake) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path, Relaxed: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, ctx: ctx, clk: clk, path: path, st: st, ids: &rota.IDGenerator{}}
	logger := slog.New(slog.DiscardHandler)
	e.reg = prometheus.NewRegistry()
	if e.m, err = metrics.New(e.reg); err != nil {
		t.Fatal(err)
	}
	// As the server wires them: the ends of schedule runs are counted
	// from the dispatcher's task events, whoever executed them.
	e.disp, err = dispatch.New(dispatch.Config{Store: st, Clock: clk, Logger: logger, Events: e.record})
	if err != nil {
		t.Fatal(err)
	}
	e.eng = e.newEngine()
	return e
}

func (e *env) newEngine() *schedule.Engine {
	eng, err := schedule.NewEngine(schedule.EngineConfig{
		Store: e.st, Dispatcher: e.disp, Clock: e.clk, Logger: slog.New(slog.DiscardHandler), Metrics: e.m, IDs: e.ids,
		Events:    e.record,
		FireAhead: -1, // deterministic: the lead depends on measured store speed (TestFireAhead covers it)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	eng.SetLeader(true)
	return eng
}

// add creates a schedule (defaults: kind "job", every 5 s, max 1, SKIP
// concurrency, ALLOW, RUN_NEW, misfire SKIP, timeout 1 h).
func (e *env) add(mod func(s *rota.Schedule)) *rota.Schedule {
	e.t.Helper()
	now := e.clk.Now()
	s := rota.Schedule{
		ID: e.ids.New(now), Name: fmt.Sprintf("s-%d", now.UnixNano()) + e.ids.New(now)[20:], Kind: "job",
		Priority: rota.PriorityMid, Payload: json.RawMessage(`{"n":1}`), CronExpr: "*/5 * * * * *", Timezone: "UTC",
		Enabled: true, MaxConcurrency: 1, ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapAllow,
		FailureAction: rota.FailureRunNew, MisfirePolicy: rota.MisfireSkip, CatchupLimit: 3, TimeoutSeconds: 3600,
	}
	if mod != nil {
		mod(&s)
	}
	if err := schedule.Arm(&s, nil, now); err != nil {
		e.t.Fatalf("Arm: %v", err)
	}
	got, err := e.st.ScheduleInsert(e.ctx, store.ScheduleInsertParams{Schedule: s, Now: now})
	if err != nil {
		e.t.Fatalf("ScheduleInsert: %v", err)
	}
	e.eng.Changed(got.ID)
	return got
}

// edit changes a schedule as the API does: read, modify, Arm, update.
func (e *env) edit(id string, mod func(s *rota.Schedule)) *rota.Schedule {
	e.t.Helper()
	prev := e.get(id)
	s := *prev
	mod(&s)
	if err := schedule.Arm(&s, prev, e.clk.Now()); err != nil {
		e.t.Fatalf("Arm: %v", err)
	}
	got, err := e.st.ScheduleUpdate(e.ctx, store.ScheduleUpdateParams{Schedule: s, Now: e.clk.Now()})
	if err != nil {
		e.t.Fatalf("ScheduleUpdate: %v", err)
	}
	e.eng.Changed(id)
	return got
}

func (e *env) get(id string) *rota.Schedule {
	e.t.Helper()
	s, err := e.st.ScheduleGet(e.ctx, id)
	if err != nil {
		e.t.Fatalf("ScheduleGet: %v", err)
	}
	return s
}

// step moves the clock by d and runs one engine pass.
func (e *env) step(d time.Duration) {
	e.t.Helper()
	e.clk.Advance(d)
	e.pass()
}

func (e *env) pass() {
	e.t.Helper()
	if _, err := e.eng.RunOnce(e.ctx); err != nil {
		e.t.Fatalf("RunOnce at %v: %v", e.clk.Now().Sub(base), err)
	}
}

// runs returns a schedule's runs, oldest fire first.
func (e *env) runs(id string) []rota.ScheduleRun {
	e.t.Helper()
	var out []rota.ScheduleRun
	p := store.ScheduleRunsParams{ScheduleID: id, Limit: 1000}
	for {
		res, err := e.st.ScheduleRuns(e.ctx, p)
		if err != nil {
			e.t.Fatalf("ScheduleRuns: %v", err)
		}
		out = append(out, res.Runs...)
		if res.NextCursor == "" {
			break
		}
		p.Cursor = res.NextCursor
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].FireTime.Before(out[j].FireTime) })
	return out
}

// summary renders runs as "+5s:SCHEDULED#1 +10s:SKIPPED(overlap) …".
func summary(runs []rota.ScheduleRun) []string {
	out := make([]string, 0, len(runs))
	for _, r := range runs {
		s := fmt.Sprintf("+%v:%s", r.FireTime.Sub(base), r.Status)
		switch {
		case r.Reason != "":
			s += "(" + string(r.Reason) + ")"
		case r.Held:
			s += "(held)#" + fmt.Sprint(r.Attempt)
		default:
			s += "#" + fmt.Sprint(r.Attempt)
		}
		out = append(out, s)
	}
	return out
}

func (e *env) wantRuns(id string, want ...string) []rota.ScheduleRun {
	e.t.Helper()
	runs := e.runs(id)
	got := summary(runs)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("runs at %v:\n got  %v\n want %v", e.clk.Now().Sub(base), got, want)
	}
	return runs
}

// claim takes one task of kind as worker w (no waiting).
func (e *env) claim(w, kind string) rota.ClaimedRun {
	e.t.Helper()
	res, err := e.disp.Claim(e.ctx, dispatch.ClaimRequest{WorkerID: w, Kinds: []string{kind}, Max: 1})
	if err != nil || len(res.Runs) != 1 {
		e.t.Fatalf("claim %s at %v: %d runs, %v", kind, e.clk.Now().Sub(base), len(res.Runs), err)
	}
	return res.Runs[0]
}

func (e *env) claimNone(w, kind string) {
	e.t.Helper()
	res, err := e.disp.Claim(e.ctx, dispatch.ClaimRequest{WorkerID: w, Kinds: []string{kind}, Max: 10})
	if err != nil || len(res.Runs) != 0 {
		e.t.Fatalf("claim %s: got %d runs (%v), want none", kind, len(res.Runs), err)
	}
}

func (e *env) finish(w string, c rota.ClaimedRun, ok bool) {
	e.t.Helper()
	if _, err := e.disp.Complete(e.ctx, store.RunCompleteParams{RunID: c.RunID, WorkerID: w, Success: ok, Message: "done"}); err != nil {
		e.t.Fatalf("complete: %v", err)
	}
}

func (e *env) task(id string) *rota.Task {
	e.t.Helper()
	t, err := e.st.TaskGet(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return t
}

func (e *env) counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

func TestFiresOnTime(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(nil)
	e.pass()
	e.wantRuns(s.ID)
	e.step(sec(4))
	e.wantRuns(s.ID)
	e.step(sec(1))
	runs := e.wantRuns(s.ID, "+5s:SCHEDULED#1")
	task := e.task(runs[0].TaskID)
	if task.ScheduleID != s.ID || task.Kind != "job" || task.TimeoutSeconds != 3600 || task.MaxRetries != 0 {
		t.Fatalf("run task: %+v", task)
	}
	c := e.claim("w1", "job")
	e.finish("w1", c, true)
	e.step(sec(5))
	e.step(sec(5))
	e.wantRuns(s.ID, "+5s:SUCCESS#1", "+10s:SCHEDULED#1", "+15s:SKIPPED(concurrency)")
	got := e.get(s.ID)
	if !got.HighWater.Equal(base.Add(sec(15))) || !got.NextFire.Equal(base.Add(sec(20))) {
		t.Fatalf("state: high-water %v next %v", got.HighWater, got.NextFire)
	}
	if n := e.counter(e.m.RunsTotal.WithLabelValues("SCHEDULED")); n != 2 {
		t.Fatalf("rota_runs_total{SCHEDULED} = %v, want 2", n)
	}
	if n := e.counter(e.m.ConcurrencySkipped); n != 1 {
		t.Fatalf("rota_concurrency_skipped_total = %v, want 1", n)
	}
	if n := testutil.CollectAndCount(e.m.FireLateness); n != 1 {
		t.Fatalf("lateness series: %d", n)
	}
}

func TestOverlapActions(t *testing.T) {
	t.Parallel()
	t.Run("SKIP", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(func(s *rota.Schedule) { s.OverlapAction, s.MaxConcurrency = rota.OverlapSkip, 5 })
		e.step(sec(5))
		e.step(sec(5)) // the first run waits for a worker: it is still the round in progress
		c := e.claim("w1", "job")
		e.step(sec(5)) // running
		e.wantRuns(s.ID, "+5s:RUNNING#1", "+10s:SKIPPED(overlap)", "+15s:SKIPPED(overlap)")
		e.finish("w1", c, true)
		e.step(sec(5))
		e.wantRuns(s.ID, "+5s:SUCCESS#1", "+10s:SKIPPED(overlap)", "+15s:SKIPPED(overlap)", "+20s:SCHEDULED#1")
		if n := e.counter(e.m.OverlapSkipped); n != 2 {
			t.Fatalf("rota_task_overlap_skipped_total = %v", n)
		}
	})
	t.Run("CANCEL_PREV", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(func(s *rota.Schedule) { s.OverlapAction = rota.OverlapCancelPrev })
		e.step(sec(5))
		c := e.claim("w1", "job")
		e.step(sec(5)) // run 1 is running: stop it through the normal stop path, start run 2
		runs := e.wantRuns(s.ID, "+5s:RUNNING#1", "+10s:SCHEDULED#1")
		if !runs[0].StopRequested {
			t.Fatal("the previous run was not asked to stop")
		}
		hb, err := e.disp.Heartbeat(e.ctx, c.RunID, "w1", "")
		if err != nil || !hb.Stop {
			t.Fatalf("heartbeat of the canceled run: stop %v, %v", hb.Stop, err)
		}
		e.finish("w1", c, true) // whatever it reports, it ends CANCELED
		e.step(sec(5))          // run 2 waits for a worker: canceled at once
		e.wantRuns(s.ID, "+5s:CANCELED#1", "+10s:CANCELED#1", "+15s:SCHEDULED#1")
	})
	t.Run("PARALLEL", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(func(s *rota.Schedule) { s.OverlapAction = rota.OverlapParallel })
		e.step(sec(5))
		c1 := e.claim("w1", "job")
		e.step(sec(5))
		c2 := e.claim("w2", "job")
		e.wantRuns(s.ID, "+5s:RUNNING#1", "+10s:RUNNING#1")
		// Run 2 (the previous round) ends while run 1 still runs: no
		// overlap, so the limit applies again.
		e.finish("w2", c2, true)
		e.step(sec(5))
		e.wantRuns(s.ID, "+5s:RUNNING#1", "+10s:SUCCESS#1", "+15s:SKIPPED(concurrency)")
		e.finish("w1", c1, true)
	})
	t.Run("ALLOW_QUEUE", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(func(s *rota.Schedule) { s.ConcurrencyPolicy = rota.ConcurrencyQueue })
		e.step(sec(5))
		c := e.claim("w1", "job")
		e.step(sec(5))
		e.step(sec(5))
		e.wantRuns(s.ID, "+5s:RUNNING#1", "+10s:SCHEDULED(held)#1", "+15s:SCHEDULED(held)#1")
		e.claimNone("w2", "job")
		e.finish("w1", c, true)
		e.step(sec(1)) // the watch sees the slot free and releases the oldest held run
		e.wantRuns(s.ID, "+5s:SUCCESS#1", "+10s:SCHEDULED#1", "+15s:SCHEDULED(held)#1")
		if c := e.claim("w2", "job"); c.TaskID != e.runs(s.ID)[1].TaskID {
			t.Fatal("released run not claimable")
		}
	})
}

func TestFailureActions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action rota.FailureAction
		want   []string
	}{
		{rota.FailureRunNew, []string{"+5s:FAILED#1", "+10s:FAILED#1", "+15s:SUCCESS#1", "+20s:SCHEDULED#1"}},
		{rota.FailureRetry, []string{"+5s:FAILED#1", "+10s:FAILED#2", "+15s:SUCCESS#3", "+20s:SCHEDULED#1"}},
		{rota.FailureSkip, []string{"+5s:FAILED#1", "+10s:SKIPPED(failure)", "+15s:FAILED#1", "+20s:SKIPPED(failure)"}},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			s := e.add(func(s *rota.Schedule) { s.FailureAction = tc.action })
			outcomes := []bool{false, false, true} // of the runs, in order
			for i := range 4 {
				e.step(sec(5))
				if runs := e.runs(s.ID); i < 3 && runs[len(runs)-1].Status == rota.StatusScheduled {
					e.finish("w1", e.claim("w1", "job"), outcomes[0])
					outcomes = outcomes[1:]
				}
			}
			e.wantRuns(s.ID, tc.want...)
			if tc.action == rota.FailureRetry {
				if n := e.counter(e.m.FailureRetry); n != 2 {
					t.Fatalf("rota_task_failure_retry_total = %v, want 2", n)
				}
			}
		})
	}
}

func TestTimeoutCountsAsFailure(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) {
		s.CronExpr, s.TimeoutSeconds, s.FailureAction = "*/20 * * * * *", 8, rota.FailureRetry
	})
	e.step(sec(20))
	e.claim("w1", "job")
	e.clk.Advance(sec(9))
	e.disp.ReapOnce(e.ctx) // the deadline passed: the store ends the run TIMEOUT
	e.step(sec(11))
	e.wantRuns(s.ID, "+20s:TIMEOUT#1", "+40s:SCHEDULED#2")
}

// TestCronDesignWorkedExample is the worked example of the cron engine design:
// */5 * * * * *, max_concurrency 1, concurrency SKIP, overlap CANCEL_PREV,
// failure RETRY, misfire CATCH_UP_LIMITED 3, timeout 8.
func TestCronDesignWorkedExample(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) {
		s.Name, s.CronExpr, s.MaxConcurrency, s.ConcurrencyPolicy = "demo-task", "*/5 * * * * *", 1, rota.ConcurrencySkip
		s.OverlapAction, s.FailureAction, s.MisfirePolicy, s.CatchupLimit, s.TimeoutSeconds =
			rota.OverlapCancelPrev, rota.FailureRetry, rota.MisfireCatchUpLimited, 3, 8
	})
	if got := e.get(s.ID); got.TimeoutSeconds != 8 {
		t.Fatalf("timeout %d", got.TimeoutSeconds)
	}
	// "If the previous run still runs when a new fire arrives: cancel it and
	// start a new one at once."
	e.step(sec(5))
	c1 := e.claim("w1", "job")
	if c1.TimeoutSeconds != 8 {
		t.Fatalf("run timeout %d, want 8", c1.TimeoutSeconds)
	}
	e.step(sec(5))
	e.finish("w1", c1, true)
	e.wantRuns(s.ID, "+5s:CANCELED#1", "+10s:SCHEDULED#1")
	// "If the previous run failed: attempt = previous attempt + 1." (A
	// canceled run counts as a failure too.)
	c2 := e.claim("w1", "job")
	e.finish("w1", c2, false)
	e.step(sec(5))
	e.wantRuns(s.ID, "+5s:CANCELED#1", "+10s:FAILED#1", "+15s:SCHEDULED#2")
	c3 := e.claim("w1", "job")
	if c3.Attempt != 1 { // the task's own run count, not the schedule attempt
		t.Fatalf("claim attempt %d", c3.Attempt)
	}
	e.finish("w1", c3, false)
	e.step(sec(5))
	e.wantRuns(s.ID, "+5s:CANCELED#1", "+10s:FAILED#1", "+15s:FAILED#2", "+20s:SCHEDULED#3")
	e.finish("w1", e.claim("w1", "job"), true)
	// "If scanning was late and missed several fires: catch up the latest 3
	// at most." The engine stalls for 30 s (fires +25 … +50 missed): the
	// latest three are fired, each through the policies — each one cancels
	// the one before it (CANCEL_PREV) — and the older three are SKIPPED.
	e.clk.Advance(sec(30) + 200*time.Millisecond)
	e.pass()
	e.wantRuns(s.ID, "+5s:CANCELED#1", "+10s:FAILED#1", "+15s:FAILED#2", "+20s:SUCCESS#3",
		"+25s:SKIPPED(misfire)", "+30s:SKIPPED(misfire)", "+35s:SKIPPED(misfire)",
		"+40s:CANCELED#1", "+45s:CANCELED#1", "+50s:SCHEDULED#1")
	// "Over the concurrency limit (1) and not the overlap case: skip." A
	// manual trigger runs outside the series; then the previous round ends
	// while the trigger still runs: the next fire does not overlap, and the
	// limit is taken.
	c := e.claim("w1", "job")
	if _, err := e.st.ScheduleTrigger(e.ctx, store.ScheduleTriggerParams{ID: s.ID, TaskID: e.ids.New(e.clk.Now()), Now: e.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	e.eng.Changed(s.ID)
	ct := e.claim("w2", "job")
	e.finish("w1", c, true)
	_ = ct
	// The trigger is now the previous run and still runs: this is overlap,
	// so CANCEL_PREV applies to it.
	e.step(sec(5) - 200*time.Millisecond)
	runs := e.runs(s.ID)
	last := runs[len(runs)-1]
	if last.FireTime != base.Add(sec(55)) || last.Status != rota.StatusScheduled {
		t.Fatalf("after the trigger: %v", summary(runs))
	}
	if n := e.get(s.ID).MisfireDropped; n != 3 {
		t.Fatalf("MisfireDropped = %d, want 3", n)
	}
}
