package schedule_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/schedule/firetime"
)

// The no_keep rule: each occurrence counts from the end of the
// previous execution; a first one already past runs at once. The preview
// must not list a catch-up one interval apart.
func TestPlanNoKeepPastPreview(t *testing.T) {
	t.Parallel()
	T := base.Add(time.Hour)
	p := firetime.Plan{Type: firetime.PlanSecond, Value: 1, Repeat: 3, Time: T.Add(-20 * time.Second).Unix(), NoKeep: true}
	got := p.NextN(T, 10, nil)
	want := []time.Time{T.Add(-19 * time.Second), T.Add(time.Second), T.Add(2 * time.Second)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("NextN:\n got  %v\n want %v", got, want)
	}
}

// TestPreviewAgreesWithEngine runs every plan type on the engine, each
// execution finishing the moment it starts, and checks that the fire times
// it records are the ones the preview listed.
func TestPreviewAgreesWithEngine(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration) int64 { return base.Add(d).Unix() }
	for _, tc := range []struct {
		name string
		p    rota.PlanSpec
	}{
		{"none", rota.PlanSpec{Type: "none"}},
		{"time", rota.PlanSpec{Type: "time", Time: at(90 * time.Second)}},
		{"time past no_keep", rota.PlanSpec{Type: "time", Time: at(-time.Hour), NoKeep: true}},
		{"second", rota.PlanSpec{Type: "second", Value: 7, Repeat: 4}},
		{"second from plan_time", rota.PlanSpec{Type: "second", Value: 5, Repeat: 4, Time: at(-12 * time.Second)}},
		{"second no_keep past", rota.PlanSpec{Type: "second", Value: 1, Repeat: 3, Time: at(-20 * time.Second), NoKeep: true}},
		{"minute", rota.PlanSpec{Type: "minute", Value: 2, Repeat: 3}},
		{"minute no_keep", rota.PlanSpec{Type: "minute", Value: 1, Repeat: 3, Time: at(-30 * time.Minute), NoKeep: true}},
		{"hour", rota.PlanSpec{Type: "hour", Value: 1, Repeat: 3, Time: at(-30 * time.Minute)}},
		{"day", rota.PlanSpec{Type: "day", Value: 1, Repeat: 3}},
		{"week", rota.PlanSpec{Type: "week", Value: 1, Repeat: 3, Time: at(9 * time.Hour)}},
		{"month", rota.PlanSpec{Type: "month", Value: -1, Repeat: 3, Time: at(6 * time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			s := e.add(planSchedule(tc.p))
			want, err := firetime.NextFires(&rota.Schedule{Plan: s.Plan, Timezone: "UTC"}, base, 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Time
			for range 60 {
				e.pass()
				if runs := e.runs(s.ID); len(runs) > len(got) {
					got = append(got, runs[len(runs)-1].FireTime)
					e.finish("w1", e.claim("w1", "job"), true) // at the instant it starts
				}
				switch cur := e.get(s.ID); {
				case cur.Ended:
				case cur.NextFire.After(e.clk.Now()):
					e.clk.Set(cur.NextFire)
					continue
				case cur.NextFire.IsZero():
					e.clk.Advance(schedule.DefaultPollInterval) // the engine sees the end at its next poll
					continue
				default:
					continue
				}
				break
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("engine fired\n %v\npreview listed\n %v", got, want)
			}
		})
	}
}

// BACKOFF: after a failure, fires are skipped (reason backoff) until
// backoff × 2^(n−1) has passed since the failed run ended; a success
// resets it.
func TestFailureBackoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) {
		s.CronExpr, s.FailureAction = "* * * * * *", rota.FailureBackoff
		s.BackoffSeconds, s.BackoffMaxSeconds = 2, 3
	})
	e.step(sec(1)) // +1s
	e.finish("w1", e.claim("w1", "job"), false)
	e.step(sec(1)) // +2s: 1 failure → wait 2 s from +1s
	got := e.get(s.ID)
	if got.ConsecutiveFailures != 1 || !got.NextAllowedAt.Equal(base.Add(sec(3))) {
		t.Fatalf("after 1 failure: failures %d next allowed %v", got.ConsecutiveFailures, got.NextAllowedAt.Sub(base))
	}
	e.step(sec(1)) // +3s runs
	e.finish("w1", e.claim("w1", "job"), false)
	for range 4 { // +4s … +7s: 2 failures → wait min(4, 3) = 3 s from +3s
		e.step(sec(1))
	}
	e.finish("w1", e.claim("w1", "job"), true)
	e.step(sec(1)) // +8s: success resets
	e.wantRuns(s.ID, "+1s:FAILED#1", "+2s:SKIPPED(backoff)", "+3s:FAILED#1", "+4s:SKIPPED(backoff)",
		"+5s:SKIPPED(backoff)", "+6s:SUCCESS#1", "+7s:SKIPPED(concurrency)", "+8s:SCHEDULED#1")
	if got := e.get(s.ID); got.ConsecutiveFailures != 0 || !got.NextAllowedAt.IsZero() {
		t.Fatalf("after a success: failures %d next allowed %v", got.ConsecutiveFailures, got.NextAllowedAt)
	}
}

// HALF_OPEN: after failure_threshold failures in a row the circuit opens
// and fires are skipped (circuit_open) for cooldown_seconds; the next fire
// is a trial: a failure opens the circuit again, a success closes it.
func TestFailureHalfOpen(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) {
		s.CronExpr, s.FailureAction = "* * * * * *", rota.FailureHalfOpen
		s.FailureThreshold, s.CooldownSeconds = 2, 3
	})
	want := func(failures int, circuit rota.Circuit, allowed time.Duration) {
		t.Helper()
		got := e.get(s.ID)
		var at time.Duration
		if !got.NextAllowedAt.IsZero() {
			at = got.NextAllowedAt.Sub(base)
		}
		if got.ConsecutiveFailures != failures || got.Circuit != circuit || at != allowed {
			t.Fatalf("at %v: failures %d circuit %q next allowed %v; want %d %q %v", e.clk.Now().Sub(base),
				got.ConsecutiveFailures, got.Circuit, at, failures, circuit, allowed)
		}
	}
	fail := func(ok bool) { e.finish("w1", e.claim("w1", "job"), ok) }
	e.step(sec(1))
	fail(false)
	e.step(sec(1)) // +2s: 1 failure, runs
	want(1, "", 0)
	fail(false)
	e.step(sec(1)) // +3s: 2 failures: open until +2s+3s
	want(2, rota.CircuitOpen, sec(5))
	e.step(sec(1)) // +4s skipped
	e.step(sec(1)) // +5s: trial
	want(2, rota.CircuitHalfOpen, sec(5))
	e.step(sec(1)) // +6s: trial unfinished: skipped
	fail(false)    // the trial fails at +6s: open until +9s
	e.step(sec(1)) // +7s
	want(3, rota.CircuitOpen, sec(9))
	e.step(sec(1)) // +8s
	e.step(sec(1)) // +9s: trial
	fail(true)
	e.step(sec(1)) // +10s: closed
	want(0, rota.CircuitClosed, 0)
	e.wantRuns(s.ID, "+1s:FAILED#1", "+2s:FAILED#1", "+3s:SKIPPED(circuit_open)", "+4s:SKIPPED(circuit_open)",
		"+5s:FAILED#1", "+6s:SKIPPED(circuit_open)", "+7s:SKIPPED(circuit_open)", "+8s:SKIPPED(circuit_open)",
		"+9s:SUCCESS#1", "+10s:SCHEDULED#1")
}

// A schedule whose next time cannot be computed goes to the error state:
// it fires nothing and says why; resuming after the cause is fixed puts
// it back.
func TestErrorState(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.CronExpr = "0 0 0 1 1 * 2020-2021" })
	e.step(sec(1))
	got := e.get(s.ID)
	if got.State() != rota.StateError || got.ErrorMessage == "" || !got.NextFire.IsZero() {
		t.Fatalf("state %q message %q next %v", got.State(), got.ErrorMessage, got.NextFire)
	}
	e.wantRuns(s.ID)
	e.edit(s.ID, func(s *rota.Schedule) { s.CronExpr, s.ErrorMessage = "* * * * * *", "" })
	e.step(sec(1))
	if got := e.get(s.ID); got.State() != rota.StateActive {
		t.Fatalf("after the fix: state %q (%s)", got.State(), got.ErrorMessage)
	}
	e.wantRuns(s.ID, "+2s:SCHEDULED#1")
}

// Jitter delays each run by its deterministic offset: the recorded fire
// time stays the nominal one, the run is claimable from fire + jitter.
func TestJitterDelaysRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.CronExpr, s.JitterSeconds = "0 * * * * *", 30 })
	fire := base.Add(time.Minute)
	j := firetime.Jitter(s.ID, fire, 30)
	e.step(time.Minute)
	runs := e.wantRuns(s.ID, "+1m0s:SCHEDULED#1")
	if !runs[0].FireTime.Equal(fire) {
		t.Fatalf("fire time %v, want the nominal %v", runs[0].FireTime, fire)
	}
	if j >= time.Millisecond {
		e.clk.Set(fire.Add(j - time.Millisecond))
		e.claimNone("w1", "job")
	}
	e.clk.Set(fire.Add(j))
	if c := e.claim("w1", "job"); !c.FireTime.Equal(fire) {
		t.Fatalf("claimed fire time %v", c.FireTime)
	}
}

// H picks the same minute for the same name on every node.
func TestCronHashInSchedules(t *testing.T) {
	t.Parallel()
	s := rota.Schedule{Name: "nightly", CronExpr: "0 H H(0-5) * * *", Timezone: "UTC"}
	a, err := firetime.NextFires(&s, base, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := firetime.NextFires(&s, base, 3)
	if fmt.Sprint(a) != fmt.Sprint(b) || a[0].Hour() > 5 || a[1].Sub(a[0]) != 24*time.Hour {
		t.Fatalf("fires %v / %v", a, b)
	}
}
