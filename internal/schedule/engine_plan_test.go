package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/schedule/firetime"
	"github.com/rotahq/rota/internal/store"
)

func planSchedule(p rota.PlanSpec) func(s *rota.Schedule) {
	return func(s *rota.Schedule) { s.CronExpr, s.Plan = "", &p }
}

// runOne claims the schedule's pending run and ends it after d.
func (e *env) runOne(d time.Duration, ok bool) {
	e.t.Helper()
	c := e.claim("w1", "job")
	for d > 0 { // heartbeat through long runs
		step := min(d, 10*time.Second)
		e.clk.Advance(step)
		d -= step
		if _, err := e.disp.Heartbeat(e.ctx, c.RunID, "w1", ""); err != nil {
			e.t.Fatalf("heartbeat: %v", err)
		}
	}
	e.finish("w1", c, ok)
}

func (e *env) wantState(id string, seq, realRepet int64, ended bool) *rota.Schedule {
	e.t.Helper()
	s := e.get(id)
	if s.PlanSeq != seq || s.RealRepet != realRepet || s.Ended != ended || s.Enabled == ended {
		e.t.Fatalf("plan state at %v: seq %d real_repet %d ended %v enabled %v; want %d %d %v",
			e.clk.Now().Sub(base), s.PlanSeq, s.RealRepet, s.Ended, s.Enabled, seq, realRepet, ended)
	}
	return s
}

func TestPlanTime(t *testing.T) {
	t.Parallel()
	t.Run("Future", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(planSchedule(rota.PlanSpec{Type: "time", Time: base.Add(sec(30)).Unix()}))
		e.step(sec(29))
		e.wantRuns(s.ID)
		e.step(sec(1))
		e.wantRuns(s.ID, "+30s:SCHEDULED#1")
		e.runOne(sec(2), true)
		e.step(sec(1))
		e.wantState(s.ID, 1, 1, true)
		e.wantRuns(s.ID, "+30s:SUCCESS#1")
	})
	t.Run("PastWithNoKeepRunsAtOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.clk.Advance(time.Hour)
		s := e.add(planSchedule(rota.PlanSpec{Type: "time", Time: base.Unix(), NoKeep: true}))
		e.pass()
		e.wantRuns(s.ID, "+0s:SCHEDULED#1")
	})
	t.Run("PastWithoutNoKeepEndsWithoutRunning", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.clk.Advance(time.Hour)
		s := e.add(planSchedule(rota.PlanSpec{Type: "time", Time: base.Unix()}))
		if s.EndReason != schedule.PastPlanReason || s.Enabled || !s.Ended || s.RealRepet != 0 {
			t.Fatalf("past time plan: ended %v enabled %v real_repet %d reason %q", s.Ended, s.Enabled, s.RealRepet, s.EndReason)
		}
		e.step(time.Hour)
		e.wantRuns(s.ID)
		e.wantState(s.ID, 0, 0, true)
	})
	t.Run("None", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(planSchedule(rota.PlanSpec{Type: "none"}))
		e.pass()
		e.wantRuns(s.ID, "+0s:SCHEDULED#1")
		e.runOne(sec(1), true)
		e.step(sec(1))
		e.wantState(s.ID, 1, 1, true)
	})
}

// Without no_keep an interval plan is a fixed series: occurrences that
// pass while a run lasts are skipped and use up their place.
func TestPlanIntervalFixedSeries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(planSchedule(rota.PlanSpec{Type: "minute", Value: 1, Repeat: 3, Time: base.Unix()}))
	e.wantState(s.ID, 1, 0, false)
	e.step(time.Minute)
	e.wantRuns(s.ID, "+1m0s:SCHEDULED#1")
	e.runOne(90*time.Second, true) // ends at +2m30s: occurrence 2 (+2m) is lost
	e.step(sec(1))
	e.wantState(s.ID, 3, 1, false)
	if got := e.get(s.ID).NextFire; !got.Equal(base.Add(3 * time.Minute)) {
		t.Fatalf("next fire %v", got.Sub(base))
	}
	e.step(29 * time.Second) // +3m
	e.wantRuns(s.ID, "+1m0s:SUCCESS#1", "+3m0s:SCHEDULED#1")
	e.runOne(sec(5), true)
	e.step(sec(1))
	e.wantState(s.ID, 3, 2, true) // plan_repet 3 reached: ended
	e.step(10 * time.Minute)
	e.wantRuns(s.ID, "+1m0s:SUCCESS#1", "+3m0s:SUCCESS#1")
}

// With no_keep each occurrence comes one interval after the previous run
// ended, and plan_repet counts down to the end.
func TestPlanIntervalNoKeep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(planSchedule(rota.PlanSpec{Type: "second", Value: 10, Repeat: 3, Time: base.Unix(), NoKeep: true}))
	e.step(sec(10))
	e.wantRuns(s.ID, "+10s:SCHEDULED#1")
	e.runOne(sec(15), true) // ends at +25s
	e.step(sec(1))
	e.wantState(s.ID, 2, 1, false)
	if got := e.get(s.ID).NextFire; !got.Equal(base.Add(sec(35))) {
		t.Fatalf("next fire %v, want +35s", got.Sub(base))
	}
	e.step(sec(9))
	e.wantRuns(s.ID, "+10s:SUCCESS#1", "+35s:SCHEDULED#1")
	e.runOne(sec(1), true) // ends at +36s → next at +46s
	e.step(sec(10))
	e.wantRuns(s.ID, "+10s:SUCCESS#1", "+35s:SUCCESS#1", "+46s:SCHEDULED#1")
	e.wantState(s.ID, 3, 2, false)
	e.runOne(sec(1), true)
	e.step(sec(1))
	e.wantState(s.ID, 3, 3, true)
}

// A no_keep interval whose first occurrence is already past runs at once.
func TestPlanIntervalNoKeepPastStart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.clk.Advance(time.Hour)
	s := e.add(planSchedule(rota.PlanSpec{Type: "minute", Value: 1, Repeat: -1, Time: base.Unix(), NoKeep: true}))
	e.pass()
	e.wantRuns(s.ID, "+1m0s:SCHEDULED#1")
}

func TestPlanFailure(t *testing.T) {
	t.Parallel()
	t.Run("RETRY puts the plan back", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(func(s *rota.Schedule) {
			planSchedule(rota.PlanSpec{Type: "second", Value: 10, Repeat: 2, Time: base.Unix(), NoKeep: true})(s)
			s.FailureAction = rota.FailureRetry
		})
		e.step(sec(10))
		e.runOne(sec(1), false) // fails at +11s
		e.step(sec(1))          // retry after 1 s (backoff of the first failure)
		e.wantRuns(s.ID, "+10s:FAILED#1", "+12s:SCHEDULED#2")
		e.wantState(s.ID, 1, 0, false) // not advanced
		e.runOne(sec(1), true)
		e.step(sec(1))
		e.wantState(s.ID, 2, 1, false)
	})
	t.Run("RUN_NEW advances", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := e.add(planSchedule(rota.PlanSpec{Type: "second", Value: 10, Repeat: 2, Time: base.Unix(), NoKeep: true}))
		e.step(sec(10))
		e.runOne(sec(1), false)
		e.step(sec(10)) // +21s: the next occurrence, attempt 1
		e.wantRuns(s.ID, "+10s:FAILED#1", "+21s:SCHEDULED#1")
		e.wantState(s.ID, 2, 0, false)
	})
}

func TestPlanWeekAndMisfire(t *testing.T) {
	t.Parallel()
	// base is Thursday 2026-01-01; plan: Saturdays (6) at 09:30.
	e := setup(t)
	at930 := time.Date(2026, 1, 1, 9, 30, 0, 0, time.UTC).Unix()
	s := e.add(planSchedule(rota.PlanSpec{Type: "week", Value: 6, Repeat: -1, Time: at930}))
	sat := time.Date(2026, 1, 3, 9, 30, 0, 0, time.UTC)
	if got := e.get(s.ID).NextFire; !got.Equal(sat) {
		t.Fatalf("first occurrence %v, want %v", got, sat)
	}
	e.clk.Set(sat)
	e.pass()
	e.wantRuns(s.ID, "+57h30m0s:SCHEDULED#1")
	e.runOne(time.Minute, true)
	e.pass()
	e.wantState(s.ID, 2, 1, false)
	// Down for the whole next Saturday: misfire SKIP records it and moves
	// to the one after, without using up a repetition.
	e.clk.Set(sat.AddDate(0, 0, 7).Add(3 * time.Hour))
	e.pass()
	runs := e.wantRuns(s.ID, "+57h30m0s:SUCCESS#1", "+225h30m0s:SKIPPED(misfire)")
	_ = runs
	got := e.wantState(s.ID, 2, 1, false)
	if !got.NextFire.Equal(sat.AddDate(0, 0, 14)) {
		t.Fatalf("next fire %v", got.NextFire)
	}
}

func TestPlanPreview(t *testing.T) {
	t.Parallel()
	s := rota.Schedule{Plan: &rota.PlanSpec{Type: "minute", Value: 5, Repeat: 3}, Timezone: "UTC"}
	got, err := firetime.NextFires(&s, base, 10)
	if err != nil || len(got) != 3 || !got[2].Equal(base.Add(15*time.Minute)) {
		t.Fatalf("NextFires: %v, %v", got, err)
	}
	c := rota.Schedule{CronExpr: "0 0 12 * * *", Timezone: "Europe/Paris"}
	got, err = firetime.NextFires(&c, base, 2)
	if err != nil || len(got) != 2 || got[0].Hour() != 11 {
		t.Fatalf("NextFires(cron): %v, %v", got, err)
	}
	bad := rota.Schedule{CronExpr: "0 0 12 * *", Timezone: "Mars/Olympus"}
	var fe *firetime.FieldError
	if _, err := firetime.NextFires(&bad, base, 2); !errors.As(err, &fe) || fe.Field != firetime.FieldTimezone {
		t.Fatalf("bad zone: %v", err)
	}
	_ = store.ScheduleRunsParams{}
}
