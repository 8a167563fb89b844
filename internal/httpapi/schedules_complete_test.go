package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// A past time plan without no_keep is accepted (201) and ends at
// once, never having run: real_repet 0, state ended, the reason in the
// schedule and in the create response's message.
func TestSchedulePastTimePlanEnds(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	r := e.do("POST", "/api/schedules", map[string]any{"name": "late", "kind": "k", "task": 1,
		"plan": map[string]any{"plan_type": "time", "plan_time": time.Now().Add(-time.Hour).Unix()}})
	if r.Status != http.StatusCreated || !strings.Contains(string(r.Data), "real_repet 0") {
		t.Fatalf("create: %v", r)
	}
	var got scheduleJSON
	e.ok("GET", "/api/schedules/late", nil, &got)
	if got.State != "ended" || !got.Ended || got.Enabled || got.Plan.RealRepet != 0 || got.EndReason == "" || got.NextFireTime != 0 {
		t.Fatalf("schedule: %+v", got)
	}
}

// An omitted timeout_seconds takes the kind's default (none, as for any
// task); an explicit one ≤ 0 means 10 s. The schedule shows the
// effective timeout.
func TestScheduleEffectiveTimeout(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	for _, tc := range []struct {
		name      string
		timeout   any
		want, eff int
	}{{"omitted", nil, 0, 0}, {"zero", 0, 10, 10}, {"negative", -5, 10, 10}, {"given", 600, 600, 600}} {
		body := map[string]any{"name": tc.name, "kind": "k", "task": 1, "cron_expr": "@hourly"}
		if tc.timeout != nil {
			body["timeout_seconds"] = tc.timeout
		}
		e.createSchedule(body)
		var got scheduleJSON
		e.ok("GET", "/api/schedules/"+tc.name, nil, &got)
		if got.TimeoutSeconds != tc.want || got.EffectiveTimeoutSeconds != tc.eff {
			t.Errorf("%s: timeout_seconds %d effective %d; want %d %d", tc.name, got.TimeoutSeconds, got.EffectiveTimeoutSeconds, tc.want, tc.eff)
		}
	}
}

// A trigger honours overlap_action unless {"force": true}.
func TestScheduleTriggerPolicies(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	e.createSchedule(map[string]any{"name": "t", "kind": "k", "task": 1, "cron_expr": "0 0 0 1 1 *", "overlap_action": "SKIP"})
	var tr triggerResponse
	e.ok("POST", "/api/schedules/t/trigger", nil, &tr)
	if tr.Status != rota.StatusScheduled {
		t.Fatalf("first trigger: %+v", tr)
	}
	e.ok("POST", "/api/schedules/t/trigger", map[string]any{}, &tr)
	if tr.Status != rota.StatusSkipped || tr.Reason != "overlap" {
		t.Fatalf("second trigger: %+v; want SKIPPED overlap", tr)
	}
	e.ok("POST", "/api/schedules/t/trigger", map[string]any{"force": true}, &tr)
	if tr.Status != rota.StatusScheduled {
		t.Fatalf("forced trigger: %+v", tr)
	}
	wantErr(t, e.do("POST", "/api/schedules/t/trigger", map[string]any{"force": "yes"}), rota.CodeInvalid)
}

func TestScheduleBackfill(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	e.createSchedule(map[string]any{"name": "bf", "kind": "k", "task": 1, "cron_expr": "0 * * * *", "max_concurrency": 3})
	to := time.Now().Truncate(time.Hour).Add(-time.Hour)
	body := map[string]any{"from": to.Add(-5 * time.Hour).Unix(), "to": to.Unix()}
	var res backfillResponse
	e.ok("POST", "/api/schedules/bf/backfill", body, &res)
	if len(res.Queued) != 3 || len(res.Skipped) != 2 || res.Skipped[0].Reason != "concurrency" {
		t.Fatalf("backfill: %+v", res)
	}
	e.ok("POST", "/api/schedules/bf/backfill", body, &res)
	if len(res.Queued) != 0 || len(res.Skipped) != 5 || res.Skipped[0].Reason != "duplicate" {
		t.Fatalf("repeated backfill: %+v", res)
	}
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"from": to.Unix()}, "to"},
		{map[string]any{"to": to.Unix()}, "from"},
		{map[string]any{"from": to.Add(-1001 * time.Hour).Unix(), "to": to.Unix()}, "to"},
		{map[string]any{"from": to.Unix(), "to": to.Add(-time.Hour).Unix()}, "to"},
	} {
		r := e.do("POST", "/api/schedules/bf/backfill", tc.body)
		wantErr(t, r, rota.CodeInvalid)
		if f := r.field(); f != tc.field {
			t.Errorf("backfill %v: field %q, want %q", tc.body, f, tc.field)
		}
	}
	wantErr(t, e.do("POST", "/api/schedules/nope/backfill", body), rota.CodeNotFound)
}

// A schedule in state error is listed by state=error, shows its message
// and goes back to active on resume.
func TestScheduleErrorStateAndResume(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	id := e.createSchedule(map[string]any{"name": "er", "kind": "k", "task": 1, "cron_expr": "@hourly", "failure_action": "HALF_OPEN"})
	e.createSchedule(map[string]any{"name": "fine", "kind": "k", "task": 1, "cron_expr": "@hourly"})
	ctx := context.Background()
	s, err := e.store.ScheduleGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s.ErrorMessage = "the target was refused"
	if _, err := e.store.ScheduleUpdate(ctx, store.ScheduleUpdateParams{Schedule: *s, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var list scheduleListResponse
	e.ok("GET", "/api/schedules?state=error", nil, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].State != "error" || list.Schedules[0].ErrorMessage != "the target was refused" {
		t.Fatalf("state=error: %+v", list.Schedules)
	}
	if c := list.Schedules[0]; c.Circuit != "closed" || c.ConsecutiveFailures != 0 || c.NextAllowedAt != 0 {
		t.Fatalf("circuit: %q %d %d", c.Circuit, c.ConsecutiveFailures, c.NextAllowedAt)
	}
	e.ok("GET", "/api/schedules?state=active", nil, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != "fine" {
		t.Fatalf("state=active: %+v", list.Schedules)
	}
	wantErr(t, e.do("GET", "/api/schedules?state=broken", nil), rota.CodeInvalid)
	var got scheduleJSON
	e.ok("POST", "/api/schedules/er/resume", nil, &got)
	if got.State != "active" || got.ErrorMessage != "" || got.NextFireTime == 0 {
		t.Fatalf("after resume: %+v", got)
	}
	e.ok("GET", "/api/schedules?state=error", nil, &list)
	if len(list.Schedules) != 0 {
		t.Fatalf("state=error after resume: %s", fmt.Sprint(list.Schedules))
	}
}

// The preview of a schedule with jitter_seconds shows the jittered
// instants (run_times, unix ms) next to the nominal fire times.
func TestScheduleNextShowsJitter(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	e.createSchedule(map[string]any{"name": "j", "kind": "k", "task": 1, "cron_expr": "0 * * * *", "jitter_seconds": 600})
	var ft fireTimesResponse
	e.ok("GET", "/api/schedules/j/next?n=5", nil, &ft)
	if len(ft.FireTimes) != 5 || len(ft.RunTimes) != 5 {
		t.Fatalf("next: %+v", ft)
	}
	moved := 0
	for i, f := range ft.FireTimes {
		d := ft.RunTimes[i] - f*1000
		if d < 0 || d >= 600_000 {
			t.Fatalf("run time %d is %d ms after fire time %d", ft.RunTimes[i], d, f)
		}
		if d > 0 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no fire time was jittered")
	}
	var got scheduleJSON
	e.ok("GET", "/api/schedules/j", nil, &got)
	if got.JitterSeconds != 600 {
		t.Fatalf("jitter_seconds %d", got.JitterSeconds)
	}
	wantErr(t, e.do("POST", "/api/schedules", map[string]any{"name": "j2", "kind": "k", "task": 1, "cron_expr": "@hourly", "jitter_seconds": -1}), rota.CodeInvalid)
	e.createSchedule(map[string]any{"name": "h", "kind": "k", "task": 1, "cron_expr": "H H(0-5) * * *"})
	r := e.do("POST", "/api/schedules", map[string]any{"name": "h2", "kind": "k", "task": 1, "cron_expr": "H(9-1) * * * *"})
	wantErr(t, r, rota.CodeInvalid)
	if r.field() != "cron_expr" {
		t.Fatalf("field %q", r.field())
	}
}
