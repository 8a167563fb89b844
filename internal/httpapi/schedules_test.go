package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
)

// setupSchedules is setup (the API serves the schedule routes).
func setupSchedules(t *testing.T, opts ...func(*setupOptions)) *testEnv {
	t.Helper()
	return setup(t, opts...)
}

func (e *testEnv) createSchedule(body map[string]any) string {
	e.t.Helper()
	var out scheduleIDResponse
	r := e.do("POST", "/api/schedules", body)
	if r.Status != http.StatusCreated || r.Code != 0 {
		e.t.Fatalf("create schedule: want 201, got %v", r)
	}
	if err := json.Unmarshal(r.Data, &out); err != nil {
		e.t.Fatal(err)
	}
	if !rota.ValidID(out.ScheduleID) {
		e.t.Fatalf("schedule_id %q", out.ScheduleID)
	}
	return out.ScheduleID
}

func TestScheduleCreateGetList(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	id := e.createSchedule(map[string]any{
		"name": "nightly-report", "kind": "report", "task": map[string]any{"day": "today"}, "priority": "high",
		"cron_expr": "0 30 2 * * *", "timezone": "Europe/Paris", "max_concurrency": 2, "concurrency_policy": "queue",
		"overlap_action": "CANCEL_PREV", "failure_action": "RETRY", "misfire_policy": "CATCH_UP_LIMITED",
		"catchup_limit": 3, "timeout_seconds": 0,
		"target": map[string]any{"url": "https://hooks.example/run", "headers": map[string]string{"X-Key": "k"}},
	})
	var got scheduleJSON
	e.ok("GET", "/api/schedules/"+id, nil, &got)
	if got.Name != "nightly-report" || got.Kind != "report" || got.Priority != "high" || got.TimeoutSeconds != 10 ||
		got.ConcurrencyPolicy != "QUEUE" || got.OverlapAction != "CANCEL_PREV" || !got.Enabled || got.Version != 1 ||
		got.Target == nil || got.Target.Method != "POST" || got.NextFireTime == 0 {
		t.Fatalf("schedule: %+v", got)
	}
	if next := time.Unix(got.NextFireTime, 0).In(mustZone(t, "Europe/Paris")); next.Hour() != 2 || next.Minute() != 30 {
		t.Fatalf("next fire %v", next)
	}
	// By name too.
	var byName scheduleJSON
	e.ok("GET", "/api/schedules/nightly-report", nil, &byName)
	if byName.ScheduleID != id {
		t.Fatalf("by name: %s", byName.ScheduleID)
	}
	e.createSchedule(map[string]any{"name": "b", "kind": "k", "task": 1, "cron_expr": "@every 90s"})
	var list scheduleListResponse
	e.ok("GET", "/api/schedules?limit=1", nil, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != "b" || list.NextCursor == "" {
		t.Fatalf("page 1: %+v", list)
	}
	e.ok("GET", "/api/schedules?limit=1&cursor="+list.NextCursor, nil, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].ScheduleID != id || list.NextCursor != "" {
		t.Fatalf("page 2: %+v", list)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestScheduleValidation(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	base := func() map[string]any {
		return map[string]any{"name": "x", "kind": "k", "task": 1, "cron_expr": "*/5 * * * * *"}
	}
	with := func(k string, v any) map[string]any {
		b := base()
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	tests := []struct {
		body  map[string]any
		code  rota.Code
		field string
	}{
		{with("cron_expr", "61 * * * * *"), rota.CodeInvalid, "cron_expr"},
		{with("cron_expr", "0 0 0 30 2 *"), rota.CodeInvalid, "cron_expr"},
		{with("timezone", "Mars/Olympus"), rota.CodeInvalid, "timezone"},
		{with("cron_expr", nil), rota.CodeInvalid, "cron_expr"},
		{with("name", nil), rota.CodeInvalid, "name"},
		{with("kind", "bad kind"), rota.CodeInvalid, "kind"},
		{with("task", nil), rota.CodeInvalid, "task"},
		{with("overlap_action", "MAYBE"), rota.CodeInvalid, "overlap_action"},
		{with("misfire_policy", "CATCH_UP_LIMITED"), rota.CodeInvalid, "catchup_limit"},
		{with("max_concurrency", 0), rota.CodeInvalid, "max_concurrency"},
		{with("target", map[string]any{"url": "ftp://x"}), rota.CodeInvalid, "target.url"},
		{with("target", map[string]any{"url": "http://x", "method": "TRACE"}), rota.CodeInvalid, "target.method"},
		{with("bogus", 1), rota.CodeUnknownField, "bogus"},
		{func() map[string]any {
			b := with("cron_expr", nil)
			b["plan"] = map[string]any{"plan_type": "week", "plan_value": 9, "plan_repet": -1}
			return b
		}(), rota.CodeInvalid, "plan.plan_value"},
		{with("failure_action", "SOMETIMES"), rota.CodeInvalid, "failure_action"},
		{with("backoff_seconds", -1), rota.CodeInvalid, "backoff_seconds"},
		{func() map[string]any {
			b := with("backoff_seconds", 60)
			b["backoff_max_seconds"] = 30
			return b
		}(), rota.CodeInvalid, "backoff_max_seconds"},
		{func() map[string]any {
			b := base()
			b["plan"] = map[string]any{"plan_type": "none"}
			return b
		}(), rota.CodeInvalid, "cron_expr"},
	}
	for i, tc := range tests {
		r := e.do("POST", "/api/schedules", tc.body)
		wantErr(t, r, tc.code)
		if r.field() != tc.field {
			t.Errorf("case %d: field %q, want %q (%s)", i, r.field(), tc.field, r.Message)
		}
	}
	e.createSchedule(base())
	wantErr(t, e.do("POST", "/api/schedules", base()), rota.CodeConflict)
	wantErr(t, e.do("GET", "/api/schedules/nope", nil), rota.CodeNotFound)
	wantErr(t, e.do("GET", "/api/schedules/"+e.disp.NewID(), nil), rota.CodeNotFound)
	wantErr(t, e.do("PATCH", "/api/schedules/nope", map[string]any{"enabled": false}), rota.CodeNotFound)
}

func TestSchedulePatchPauseResumeDelete(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	id := e.createSchedule(map[string]any{"name": "a", "kind": "k", "task": 1, "cron_expr": "*/5 * * * * *"})
	e.createSchedule(map[string]any{"name": "b", "kind": "k", "task": 1, "cron_expr": "*/5 * * * * *"})
	var got scheduleJSON
	e.ok("PATCH", "/api/schedules/"+id, map[string]any{"cron_expr": "0 0 * * * *", "task": map[string]int{"v": 2}}, &got)
	if got.CronExpr != "0 0 * * * *" || string(got.Task) != `{"v":2}` || got.Version != 2 {
		t.Fatalf("after patch: %+v", got)
	}
	if got.HighWater < time.Now().Add(-time.Minute).Unix() {
		t.Fatalf("an edit must move the high-water mark to the edit time: %d", got.HighWater)
	}
	r := e.do("PATCH", "/api/schedules/"+id, map[string]any{"name": "b"})
	wantErr(t, r, rota.CodeConflict)
	r = e.do("PATCH", "/api/schedules/"+id, map[string]any{"plan": map[string]any{"plan_type": "week", "plan_value": 7}})
	wantErr(t, r, rota.CodeInvalid)
	e.ok("POST", "/api/schedules/a/pause", nil, &got)
	if got.Enabled || got.NextFireTime != 0 {
		t.Fatalf("paused: %+v", got)
	}
	e.ok("POST", "/api/schedules/a/resume", nil, &got)
	if !got.Enabled || got.NextFireTime == 0 {
		t.Fatalf("resumed: %+v", got)
	}
	// Switch to a plan.
	e.ok("PATCH", "/api/schedules/a", map[string]any{"plan": map[string]any{"plan_type": "minute", "plan_value": 5, "plan_repet": 3}}, &got)
	if got.CronExpr != "" || got.Plan == nil || got.Plan.Seq != 1 || got.Plan.Remaining != 3 {
		t.Fatalf("plan: %+v %+v", got, got.Plan)
	}
	var del scheduleIDResponse
	e.ok("DELETE", "/api/schedules/a", nil, &del)
	if del.ScheduleID != id {
		t.Fatalf("deleted %s", del.ScheduleID)
	}
	wantErr(t, e.do("GET", "/api/schedules/"+id, nil), rota.CodeNotFound)
}

// TestScheduleChangesReachTheEngine checks that every change through the
// API tells this node's engine which schedule changed (so that it reloads
// it at once), and that reads and refused changes do not.
func TestScheduleChangesReachTheEngine(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var told []string
	e := setupSchedules(t, func(o *setupOptions) {
		o.scheduleChanged = func(id string) { mu.Lock(); told = append(told, id); mu.Unlock() }
	})
	id := e.createSchedule(map[string]any{"name": "a", "kind": "k", "task": 1, "cron_expr": "*/5 * * * * *"})
	e.ok("PATCH", "/api/schedules/"+id, map[string]any{"cron_expr": "0 0 * * * *"}, nil)
	e.ok("POST", "/api/schedules/a/pause", nil, nil)
	e.ok("POST", "/api/schedules/a/resume", nil, nil)
	e.ok("POST", "/api/schedules/a/trigger", nil, nil)
	e.ok("GET", "/api/schedules/a", nil, nil)
	wantErr(t, e.do("PATCH", "/api/schedules/a", map[string]any{"cron_expr": "nope"}), rota.CodeInvalid)
	e.ok("DELETE", "/api/schedules/a", nil, nil)
	mu.Lock()
	defer mu.Unlock()
	want := []string{id, id, id, id, id, id} // create, patch, pause, resume, trigger, delete
	if !slices.Equal(told, want) {
		t.Fatalf("engine told %v, want %v", told, want)
	}
}

func TestScheduleTriggerRunsNext(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	id := e.createSchedule(map[string]any{"name": "a", "kind": "trig", "task": 1, "cron_expr": "0 0 0 1 1 *"})
	var tr triggerResponse
	e.ok("POST", "/api/schedules/"+id+"/trigger", nil, &tr)
	cl, err := e.disp.Claim(t.Context(), dispatch.ClaimRequest{WorkerID: "w1", Kinds: []string{"trig"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != tr.TaskID {
		t.Fatalf("claim: %+v %v; want the triggered run %s", cl.Runs, err, tr.TaskID)
	}
	e.ok("POST", "/api/schedules/a/trigger", map[string]any{"force": true}, &tr) // a run is unfinished: force
	var runs scheduleRunsResponse
	e.ok("GET", "/api/schedules/a/runs?limit=1", nil, &runs)
	if len(runs.Runs) != 1 || runs.NextCursor == "" || !runs.Runs[0].Triggered {
		t.Fatalf("runs page 1: %+v", runs)
	}
	e.ok("GET", "/api/schedules/a/runs?limit=1&cursor="+url.QueryEscape(runs.NextCursor), nil, &runs)
	if len(runs.Runs) != 1 || runs.NextCursor != "" || runs.Runs[0].Status != rota.StatusRunning {
		t.Fatalf("runs page 2: %+v", runs)
	}
	e.ok("GET", "/api/schedules/a/runs?status=scheduled", nil, &runs)
	if len(runs.Runs) != 1 {
		t.Fatalf("SCHEDULED runs: %+v", runs)
	}
	wantErr(t, e.do("GET", "/api/schedules/a/runs?status=NOPE", nil), rota.CodeInvalid)

	var ft fireTimesResponse
	from := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC).Unix()
	e.ok("GET", fmt.Sprintf("/api/schedules/a/next?n=3&from=%d", from), nil, &ft)
	if len(ft.FireTimes) != 3 || ft.FireTimes[0] != time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC).Unix() {
		t.Fatalf("next: %v", ft.FireTimes)
	}
	wantErr(t, e.do("GET", "/api/schedules/a/next?n=1001", nil), rota.CodeInvalid)
}

func TestSchedulePreview(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	from := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC).Unix()
	var ft fireTimesResponse
	e.ok("POST", "/api/schedules/preview", map[string]any{"cron_expr": "0 30 2 * * *", "timezone": "America/New_York", "n": 2, "from": from}, &ft)
	// 2026-03-08 is the spring-forward day in New York: 02:30 fires at 03:00 EDT.
	if len(ft.FireTimes) != 2 || ft.FireTimes[0] != time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC).Unix() {
		t.Fatalf("preview: %v", ft.FireTimes)
	}
	e.ok("POST", "/api/schedules/preview", map[string]any{"plan": map[string]any{"plan_type": "hour", "plan_value": 2, "plan_repet": 2}, "from": from, "n": 10}, &ft)
	if len(ft.FireTimes) != 2 || ft.FireTimes[1]-ft.FireTimes[0] != 7200 {
		t.Fatalf("plan preview: %v", ft.FireTimes)
	}
	r := e.do("POST", "/api/schedules/preview", map[string]any{"cron_expr": "* * *"})
	wantErr(t, r, rota.CodeInvalid)
	if r.field() != "cron_expr" {
		t.Fatalf("field %q", r.field())
	}
	var list scheduleListResponse
	e.ok("GET", "/api/schedules", nil, &list)
	if len(list.Schedules) != 0 {
		t.Fatal("preview saved something")
	}
}
