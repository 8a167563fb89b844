package schedule_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/schedule/firetime"
	"github.com/rotahq/rota/internal/schedule/httpexec"
)

func (e *env) service() *schedule.Service {
	e.t.Helper()
	sv, err := schedule.NewService(schedule.ServiceConfig{
		Store: e.st, Dispatcher: e.disp, Now: e.clk.Now, IDs: e.ids, Metrics: e.m, Events: e.record,
		Changed: e.eng.Changed,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return sv
}

// A manual trigger honours overlap_action and concurrency_policy (the
// skip is recorded with its reason) unless forced.
func TestTriggerHonoursPolicies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.OverlapAction = rota.OverlapSkip })
	sv := e.service()
	e.step(sec(1))
	first, err := sv.Trigger(e.ctx, s.ID, false)
	if err != nil || first.Run.Status != rota.StatusScheduled || !first.Run.Triggered {
		t.Fatalf("first trigger: %+v, %v", first, err)
	}
	second, err := sv.Trigger(e.ctx, s.ID, false)
	if err != nil || second.Run.Status != rota.StatusSkipped || second.Run.Reason != rota.SkipOverlap {
		t.Fatalf("trigger over an unfinished run: %+v, %v; want SKIPPED(overlap)", second, err)
	}
	forced, err := sv.Trigger(e.ctx, s.ID, true)
	if err != nil || forced.Run.Status != rota.StatusScheduled {
		t.Fatalf("forced trigger: %+v, %v", forced, err)
	}
	if got := e.get(s.ID).LastRunID; got != forced.Run.TaskID {
		t.Fatalf("previous run %s, want the forced one", got)
	}
	skipped := e.eventsOf(rota.EventScheduleSkipped)
	if len(skipped) != 1 || skipped[0].Message != string(rota.SkipOverlap) || skipped[0].ScheduleID != s.ID {
		t.Fatalf("schedule.skipped events: %+v", skipped)
	}
	if _, err := sv.Trigger(e.ctx, "0123456789abcdef0123456789abcdef", false); !errors.Is(err, rota.ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
}

// Concurrency: with max_concurrency 1 and SKIP a trigger while a run is
// unfinished is skipped (concurrency).
func TestTriggerConcurrency(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.CronExpr = "0 0 0 1 1 *" })
	sv := e.service()
	if _, err := sv.Trigger(e.ctx, s.ID, false); err != nil {
		t.Fatal(err)
	}
	got, err := sv.Trigger(e.ctx, s.ID, false)
	if err != nil || got.Run.Reason != rota.SkipConcurrency {
		t.Fatalf("trigger: %+v, %v; want SKIPPED(concurrency)", got, err)
	}
}

// Backfill creates one run per fire time of [from, to) that has none,
// honouring the policies unless forced; a repeated backfill adds nothing.
func TestBackfill(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.CronExpr = "0 * * * * *"; s.MaxConcurrency = 2 })
	e.clk.Advance(time.Hour)
	sv := e.service()
	from, to := base.Add(-5*time.Minute), base
	res, err := sv.Backfill(e.ctx, s.ID, from, to, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Queued) != 2 || len(res.Skipped) != 3 || res.Skipped[0].Reason != rota.SkipConcurrency {
		t.Fatalf("backfill: queued %v skipped %+v; want 2 queued, 3 skipped (concurrency)", res.Queued, res.Skipped)
	}
	again, err := sv.Backfill(e.ctx, s.ID, from, to, true)
	if err != nil || len(again.Queued) != 0 || len(again.Skipped) != 5 || again.Skipped[0].Reason != rota.SkipDuplicate {
		t.Fatalf("repeated backfill: %+v, %v; want 5 duplicates", again, err)
	}
	forced, err := sv.Backfill(e.ctx, s.ID, to, to.Add(3*time.Minute), true)
	if err != nil || len(forced.Queued) != 3 {
		t.Fatalf("forced backfill: %+v, %v", forced, err)
	}
	if n := len(e.runs(s.ID)); n != 8 {
		t.Fatalf("%d runs, want 8", n)
	}
	var fe *firetime.FieldError
	for _, tc := range []struct {
		from, to time.Time
		field    string
	}{
		{base, base.Add(-time.Second), schedule.FieldTo},
		{base, base.Add(2 * time.Hour), schedule.FieldTo},                    // the future
		{base.Add(-17 * time.Hour), base.Add(time.Minute), schedule.FieldTo}, // 1,021 fire times
	} {
		if _, err := sv.Backfill(e.ctx, s.ID, tc.from, tc.to, false); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("backfill [%v, %v): %v, want an error on %s", tc.from, tc.to, err, tc.field)
		}
	}
	p := e.add(planSchedule(rota.PlanSpec{Type: "minute", Value: 1, Repeat: -1}))
	if _, err := sv.Backfill(e.ctx, p.ID, from, to, false); !errors.As(err, &fe) || fe.Field != firetime.FieldCronExpr {
		t.Errorf("backfill of a plan: %v", err)
	}
}

// The runs workers execute count in rota_runs_total and
// rota_task_timeout_total, and every run's task emits task events plus
// schedule.fired.
func TestMetricsAndEventsOfWorkerRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.CronExpr, s.TimeoutSeconds = "*/10 * * * * *", 3 })
	e.step(sec(10))
	e.finish("w1", e.claim("w1", "job"), true)
	e.step(sec(10))
	e.claim("w1", "job")
	e.clk.Advance(sec(4))
	e.disp.ReapOnce(e.ctx)
	if n := testutil.ToFloat64(e.m.RunsTotal.WithLabelValues("SUCCESS")); n != 1 {
		t.Errorf("rota_runs_total{SUCCESS} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(e.m.RunsTotal.WithLabelValues("TIMEOUT")); n != 1 {
		t.Errorf("rota_runs_total{TIMEOUT} = %v, want 1", n)
	}
	if n := e.counter(e.m.Timeout); n != 1 {
		t.Errorf("rota_task_timeout_total = %v, want 1", n)
	}
	fired := e.eventsOf(rota.EventScheduleFired)
	if len(fired) != 2 || fired[0].ScheduleID != s.ID || !fired[0].FireTime.Equal(base.Add(sec(10))) {
		t.Fatalf("schedule.fired: %+v", fired)
	}
	var created int
	for _, ev := range e.eventsOf(rota.EventTask) {
		if ev.TaskID == fired[0].TaskID && ev.Status == rota.StatusScheduled && ev.ScheduleID == s.ID {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d task events of the new run, want 1", created)
	}
}

// Workers see why they run: the claim carries the schedule and the nominal
// fire time.
func TestClaimCarriesFireContext(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(nil)
	e.step(sec(5))
	e.clk.Advance(sec(3)) // claimed late
	c := e.claim("w1", "job")
	if c.ScheduleID != s.ID || !c.FireTime.Equal(base.Add(sec(5))) {
		t.Fatalf("claim: schedule %q fire time %v; want %s, +5s", c.ScheduleID, c.FireTime.Sub(base), s.ID)
	}
	if task := e.task(c.TaskID); task.ScheduleID != s.ID || !task.FireTime.Equal(c.FireTime) {
		t.Fatalf("task: %q %v", task.ScheduleID, task.FireTime)
	}
}

// A stop aborts the HTTP executor's request in flight within StopPoll
// (no heartbeat needed).
func TestHTTPExecutorStopAbortsAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	arrived, aborted := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server sees the client go only once the body is read
		close(arrived)
		<-r.Context().Done()
		close(aborted)
	}))
	defer srv.Close()
	_, c := e.fireTarget(srv.URL, "", 3600)
	x := e.executor()
	done := make(chan rota.Status, 1)
	go func() { done <- x.Execute(e.ctx, c) }()
	<-arrived
	if _, err := e.disp.StopTask(e.ctx, c.TaskID, "stop"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(httpexec.DefaultHTTPStopPoll)
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the request was not aborted after a stop poll")
	}
	if st := <-done; st != rota.StatusCanceled {
		t.Fatalf("status %s, want CANCELED", st)
	}
}

// Changed makes the executor read the target kinds at once, ending a claim
// that waits on the old ones.
func TestHTTPExecutorChangedPicksUpNewKind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	hit := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit <- r.Header.Get("Rota-Schedule-Id") }))
	defer srv.Close()
	e.add(func(s *rota.Schedule) {
		s.Kind, s.CronExpr, s.Target = "old", "0 0 0 1 1 *", &rota.Target{URL: srv.URL}
	})
	x := e.executor()
	ret := make(chan error, 1)
	go func() { _, err := x.ClaimOnce(e.ctx, time.Hour); ret <- err }()
	for e.disp.Waiting("old") == 0 {
		time.Sleep(time.Millisecond)
	}
	s := e.add(func(s *rota.Schedule) { s.Kind, s.Target = "new", &rota.Target{URL: srv.URL} })
	x.Changed()
	select {
	case err := <-ret:
		if err != nil {
			t.Fatalf("ClaimOnce: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim did not end on Changed")
	}
	e.step(sec(5))
	if n, err := x.ClaimOnce(e.ctx, 0); err != nil || n != 1 {
		t.Fatalf("ClaimOnce of the new kind: %d, %v", n, err)
	}
	if got := <-hit; got != s.ID {
		t.Fatalf("request for schedule %s, want %s", got, s.ID)
	}
	_ = fmt.Sprint()
}
