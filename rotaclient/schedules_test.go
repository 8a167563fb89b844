package rotaclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

func TestSchedulesEndToEnd(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	ctx := ctxT(t)

	// A cron schedule with every option; fires only in 2099 (Tokyo has no
	// daylight saving: 02:00 there is 17:00 UTC the day before).
	id, err := c.CreateSchedule(ctx, rotaclient.ScheduleParams{
		Name: "nightly", Kind: "report", Priority: rota.PriorityHigh, Payload: map[string]int{"n": 1},
		CronExpr: "0 0 2 * * * 2099", Timezone: "Asia/Tokyo", MaxConcurrency: 2,
		ConcurrencyPolicy: rota.ConcurrencyQueue, OverlapAction: rota.OverlapSkip, FailureAction: rota.FailureRetry,
		MisfirePolicy: rota.MisfireCatchUpLimited, CatchupLimit: 3, TimeoutSeconds: 60,
	})
	if err != nil || !rota.ValidID(id) {
		t.Fatalf("create = %q, %v", id, err)
	}
	s, err := c.GetSchedule(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != id || s.Name != "nightly" || s.Kind != "report" || s.Priority != rota.PriorityHigh || string(s.Payload) != `{"n":1}` ||
		s.CronExpr != "0 0 2 * * * 2099" || s.Timezone != "Asia/Tokyo" || s.Plan != nil || !s.Enabled || s.MaxConcurrency != 2 ||
		s.ConcurrencyPolicy != rota.ConcurrencyQueue || s.OverlapAction != rota.OverlapSkip || s.FailureAction != rota.FailureRetry ||
		s.MisfirePolicy != rota.MisfireCatchUpLimited || s.CatchupLimit != 3 || s.TimeoutSeconds != 60 || s.Target != nil ||
		s.Version < 1 || s.CreatedAt.IsZero() || s.HighWater.IsZero() ||
		!s.NextFire.Equal(time.Date(2098, 12, 31, 17, 0, 0, 0, time.UTC)) {
		t.Errorf("schedule = %+v", s)
	}

	// A paused week plan with an HTTP target, fetched by name.
	planID, err := c.CreateSchedule(ctx, rotaclient.ScheduleParams{
		Name: "weekly", Kind: "email", Plan: &rota.PlanSpec{Type: "week", Value: 1, Repeat: -1, Time: 9 * 3600}, Paused: true,
		Target: &rota.Target{URL: "https://example.com/hook", Headers: map[string]string{"X-A": "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.GetSchedule(ctx, "weekly")
	if err != nil {
		t.Fatal(err)
	}
	wantTarget := &rota.Target{URL: "https://example.com/hook", Method: http.MethodPost, Headers: map[string]string{"X-A": "***"}} // values are never shown
	if p.ID != planID || p.Enabled || !p.NextFire.IsZero() || string(p.Payload) != `{}` || p.Timezone != "UTC" ||
		*p.Plan != (rota.PlanSpec{Type: "week", Value: 1, Repeat: -1, Time: 9 * 3600}) || p.PlanSeq != 1 || p.PlanAt.IsZero() ||
		!cmp.Equal(p.Target, wantTarget) {
		t.Errorf("plan schedule = %+v (plan %+v, target %+v)", p, p.Plan, p.Target)
	}

	// Invalid input names the field; a taken name is a conflict.
	var re *rota.Error
	for _, tc := range []struct {
		p     rotaclient.ScheduleParams
		field string
	}{
		{rotaclient.ScheduleParams{Name: "x", Kind: "k", CronExpr: "0 2 * *"}, "cron_expr"},
		{rotaclient.ScheduleParams{Name: "x", Kind: "k"}, "cron_expr"},
		{rotaclient.ScheduleParams{Kind: "k", CronExpr: "@daily"}, "name"},
		{rotaclient.ScheduleParams{Name: "x", Kind: "k", Plan: &rota.PlanSpec{Type: "week", Value: 9, Repeat: -1}}, "plan.plan_value"},
		{rotaclient.ScheduleParams{Name: "x", Kind: "k", CronExpr: "@daily", Timezone: "Mars/Base"}, "timezone"},
		{rotaclient.ScheduleParams{Name: "x", Kind: "k", CronExpr: "@daily", Target: &rota.Target{URL: "ftp://h"}}, "target.url"},
		{rotaclient.ScheduleParams{Name: "x", Kind: "k", CronExpr: "@daily", Payload: func() {}}, "task"},
	} {
		_, err := c.CreateSchedule(ctx, tc.p)
		if !errors.As(err, &re) || !errors.Is(err, rota.ErrInvalid) || re.Field != tc.field {
			t.Errorf("create %+v: %v (%+v), want field %q", tc.p, err, re, tc.field)
		}
	}
	if _, err := c.CreateSchedule(ctx, rotaclient.ScheduleParams{Name: "nightly", Kind: "k", CronExpr: "@daily"}); !errors.Is(err, rota.ErrConflict) {
		t.Errorf("taken name: %v", err)
	}

	// Next fire times and a preview, from a fixed instant.
	from := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	want := []time.Time{time.Date(2099, 1, 1, 17, 0, 0, 0, time.UTC), time.Date(2099, 1, 2, 17, 0, 0, 0, time.UTC)}
	got, err := c.NextFireTimes(ctx, "nightly", 2, from)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NextFireTimes (-want +got):\n%s", diff)
	}
	if got, err := c.NextFireTimes(ctx, id, 0, time.Time{}); err != nil || len(got) != 10 {
		t.Errorf("NextFireTimes defaults: %d, %v", len(got), err)
	}
	got, err = c.PreviewSchedule(ctx, rotaclient.ScheduleParams{CronExpr: "0 2 * * *", Timezone: "Asia/Tokyo"}, 2, from)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreviewSchedule (-want +got):\n%s", diff)
	}
	if _, err := c.PreviewSchedule(ctx, rotaclient.ScheduleParams{CronExpr: "nope"}, 1, from); !errors.As(err, &re) || re.Field != "cron_expr" {
		t.Errorf("preview of a bad cron: %v", err)
	}
	if _, err := c.NextFireTimes(ctx, id, 1001, from); !errors.As(err, &re) || re.Field != "n" {
		t.Errorf("NextFireTimes n 1001: %v", err)
	}

	// Update: only the fields given change; the target goes.
	low := rota.PriorityLow
	up, err := c.UpdateSchedule(ctx, "weekly", rotaclient.ScheduleUpdate{
		Priority: &low, Payload: json.RawMessage(`[1]`), CronExpr: new("@yearly"), RemoveTarget: true, MaxConcurrency: new(4),
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != planID || up.Priority != low || string(up.Payload) != `[1]` || up.CronExpr != "@yearly" || up.Plan != nil ||
		up.Target != nil || up.MaxConcurrency != 4 || up.Kind != "email" || up.Enabled || up.Version <= p.Version {
		t.Errorf("updated = %+v", up)
	}
	up, err = c.UpdateSchedule(ctx, planID, rotaclient.ScheduleUpdate{Target: &rota.Target{URL: "http://h/x", Method: "PUT"}})
	if err != nil || up.Target == nil || up.Target.Method != "PUT" || up.Priority != low {
		t.Errorf("set target = %+v, %v", up, err)
	}
	if _, err := c.UpdateSchedule(ctx, planID, rotaclient.ScheduleUpdate{Target: &rota.Target{URL: "http://h"}, RemoveTarget: true}); !errors.Is(err, rota.ErrInvalid) {
		t.Errorf("target and remove: %v", err)
	}
	if _, err := c.UpdateSchedule(ctx, planID, rotaclient.ScheduleUpdate{Name: new("nightly")}); !errors.Is(err, rota.ErrConflict) {
		t.Errorf("rename to a taken name: %v", err)
	}

	// Pause and resume.
	paused, err := c.PauseSchedule(ctx, id)
	if err != nil || paused.Enabled || !paused.NextFire.IsZero() {
		t.Errorf("pause = %+v, %v", paused, err)
	}
	resumed, err := c.ResumeSchedule(ctx, "nightly")
	if err != nil || !resumed.Enabled || resumed.NextFire.IsZero() {
		t.Errorf("resume = %+v, %v", resumed, err)
	}

	// List by pages and with the iterator, newest first.
	page, err := c.ListSchedules(ctx, rotaclient.ScheduleListParams{Limit: 1})
	if err != nil || len(page.Schedules) != 1 || page.Schedules[0].ID != planID || page.NextCursor == "" {
		t.Fatalf("page = %+v, %v", page, err)
	}
	var ids []string
	for s, err := range c.AllSchedules(ctx, rotaclient.ScheduleListParams{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if diff := cmp.Diff([]string{planID, id}, ids); diff != "" {
		t.Errorf("AllSchedules (-want +got):\n%s", diff)
	}
	for _, err := range c.AllSchedules(ctx, rotaclient.ScheduleListParams{Cursor: "bad"}) {
		if !errors.Is(err, rota.ErrInvalid) {
			t.Errorf("bad cursor: %v", err)
		}
	}

	// Trigger twice; a worker runs the first.
	first, err := c.TriggerSchedule(ctx, "nightly")
	if err != nil || !rota.ValidID(first.TaskID) || time.Since(first.FireTime) > time.Minute {
		t.Fatalf("trigger = %+v, %v", first, err)
	}
	task, err := c.GetTask(ctx, first.TaskID)
	if err != nil || task.ScheduleID != id || !task.FireTime.Equal(first.FireTime) || string(task.Payload) != `{"n":1}` {
		t.Fatalf("triggered task = %+v, %v", task, err)
	}
	cl, err := c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"report"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != first.TaskID {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	if err := c.Succeed(ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1", Message: "ok"}); err != nil {
		t.Fatal(err)
	}
	second, err := c.TriggerSchedule(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := c.ListScheduleRuns(ctx, "nightly", rotaclient.ScheduleRunsParams{})
	if err != nil || len(runs.Runs) != 2 || runs.NextCursor != "" {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	r0, r1 := runs.Runs[0], runs.Runs[1]
	if r0.TaskID != second.TaskID || r0.Status != rota.StatusScheduled || !r0.Triggered || r0.Attempt != 1 || !r0.StartTime.IsZero() ||
		r1.TaskID != first.TaskID || r1.Status != rota.StatusSuccess || r1.Message != "ok" || r1.StartTime.IsZero() || r1.EndTime.IsZero() ||
		!r1.FireTime.Equal(first.FireTime) || r1.CreatedAt.IsZero() {
		t.Errorf("runs = %+v", runs.Runs)
	}
	done, err := c.ListScheduleRuns(ctx, id, rotaclient.ScheduleRunsParams{Status: rota.StatusSuccess})
	if err != nil || len(done.Runs) != 1 || done.Runs[0].TaskID != first.TaskID {
		t.Errorf("runs SUCCESS = %+v, %v", done, err)
	}
	var all []string
	for r, err := range c.AllScheduleRuns(ctx, id, rotaclient.ScheduleRunsParams{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r.TaskID)
	}
	if diff := cmp.Diff([]string{second.TaskID, first.TaskID}, all); diff != "" {
		t.Errorf("AllScheduleRuns (-want +got):\n%s", diff)
	}
	if _, err := c.ListScheduleRuns(ctx, id, rotaclient.ScheduleRunsParams{Status: "DONE"}); !errors.As(err, &re) || re.Field != "status" {
		t.Errorf("runs with a bad status: %v", err)
	}

	// Delete by name; then it is not found anywhere.
	deleted, err := c.DeleteSchedule(ctx, "nightly")
	if err != nil || deleted != id {
		t.Fatalf("delete = %q, %v", deleted, err)
	}
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := c.GetSchedule(ctx, id); return err },
		"delete": func() error { _, err := c.DeleteSchedule(ctx, id); return err },
		"update": func() error {
			_, err := c.UpdateSchedule(ctx, id, rotaclient.ScheduleUpdate{Enabled: new(true)})
			return err
		},
		"pause":   func() error { _, err := c.PauseSchedule(ctx, id); return err },
		"resume":  func() error { _, err := c.ResumeSchedule(ctx, id); return err },
		"trigger": func() error { _, err := c.TriggerSchedule(ctx, "nightly"); return err },
		"runs":    func() error { _, err := c.ListScheduleRuns(ctx, id, rotaclient.ScheduleRunsParams{}); return err },
		"next":    func() error { _, err := c.NextFireTimes(ctx, id, 1, time.Time{}); return err },
	} {
		if err := call(); !errors.Is(err, rota.ErrNotFound) {
			t.Errorf("%s after delete: %v", name, err)
		}
	}
	if task, err := c.GetTask(ctx, second.TaskID); err != nil || task.Status != rota.StatusScheduled {
		t.Errorf("a run outlives its schedule: %+v, %v", task, err)
	}
}

// recorder serves one fixed response and keeps each request's method,
// path with query, and body.
type recorder struct {
	reqs []recorded
}

type recorded struct {
	method, uri string
	body        map[string]any
}

func newRecorder(t *testing.T, data string) (*recorder, *rotaclient.Client) {
	t.Helper()
	rec := &recorder{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if len(b) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				t.Errorf("body %q: %v", b, err)
			}
		}
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.RequestURI(), body})
		w.Write([]byte(`{"code":0,"message":"ok","data":` + data + `}`))
	}))
	t.Cleanup(hs.Close)
	c, err := rotaclient.New(rotaclient.Config{BaseURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	return rec, c
}

func TestScheduleRequestShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, c := newRecorder(t, `{"schedule_id":"s","fire_times":[4102444800]}`)
	if _, err := c.CreateSchedule(ctx, rotaclient.ScheduleParams{
		Name: "n", Kind: "k", Plan: &rota.PlanSpec{Type: "none"}, Paused: true,
	}); err != nil {
		t.Fatal(err)
	}
	from := time.Unix(4102444000, 0)
	ts, err := c.PreviewSchedule(ctx, rotaclient.ScheduleParams{CronExpr: "@daily"}, 3, from)
	if err != nil || len(ts) != 1 || !ts[0].Equal(time.Unix(4102444800, 0)) || ts[0].Location() != time.UTC {
		t.Errorf("preview = %v, %v", ts, err)
	}
	if _, err := c.NextFireTimes(ctx, "a b", 5, from); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListScheduleRuns(ctx, "a/b", rotaclient.ScheduleRunsParams{Status: rota.StatusFailed, Limit: 2, Cursor: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateSchedule(ctx, "s", rotaclient.ScheduleUpdate{RemoveTarget: true, Plan: &rota.PlanSpec{Type: "day", Value: 1, Repeat: 0}}); err != nil {
		t.Fatal(err)
	}
	want := []recorded{
		{"POST", "/api/schedules", map[string]any{
			"name": "n", "kind": "k", "task": map[string]any{}, "enabled": false,
			"plan": map[string]any{"plan_type": "none", "plan_value": 0.0, "plan_repet": 0.0, "plan_time": 0.0, "no_keep": false},
		}},
		{"POST", "/api/schedules/preview", map[string]any{"task": map[string]any{}, "cron_expr": "@daily", "n": 3.0, "from": 4102444000.0}},
		{"GET", "/api/schedules/a%20b/next?from=4102444000&n=5", nil},
		{"GET", "/api/schedules/a%2Fb/runs?cursor=c&limit=2&status=FAILED", nil},
		{"PATCH", "/api/schedules/s", map[string]any{
			"target": nil, "plan": map[string]any{"plan_type": "day", "plan_value": 1.0, "plan_repet": 0.0, "plan_time": 0.0, "no_keep": false},
		}},
	}
	if diff := cmp.Diff(want, rec.reqs, cmp.AllowUnexported(recorded{})); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestDecodesSchedule(t *testing.T) {
	t.Parallel()
	_, c := newRecorder(t, `{"schedule_id":"s","name":"n","kind":"k","priority":"low","task":null,"cron_expr":"",
		"timezone":"Asia/Tokyo","plan":{"plan_type":"minute","plan_value":5,"plan_repet":3,"plan_time":1700000000,"no_keep":true,
		"seq":2,"plan_at":1700000600,"real_repet":1,"remaining":2},"enabled":false,"max_concurrency":1,"concurrency_policy":"SKIP",
		"overlap_action":"ALLOW","failure_action":"RUN_NEW","misfire_policy":"SKIP","catchup_limit":0,"timeout_seconds":10,
		"target":{"url":"http://h","method":"GET","headers":{}},"version":7,"created_at":1700000000,"updated_at":1700000001,
		"next_fire_time":0,"high_water":1700000300,"last_run_id":"r","misfire_dropped":4,"ended":true,"ended_at":1700000900}`)
	s, err := c.GetSchedule(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	at := func(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
	want := &rota.Schedule{
		ID: "s", Name: "n", Kind: "k", Priority: rota.PriorityLow, Timezone: "Asia/Tokyo",
		Plan:           &rota.PlanSpec{Type: "minute", Value: 5, Repeat: 3, Time: 1700000000, NoKeep: true},
		MaxConcurrency: 1, ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapAllow,
		FailureAction: rota.FailureRunNew, MisfirePolicy: rota.MisfireSkip, TimeoutSeconds: 10,
		Target:  &rota.Target{URL: "http://h", Method: "GET", Headers: map[string]string{}},
		Version: 7, CreatedAt: at(1700000000), UpdatedAt: at(1700000001),
		ScheduleState: rota.ScheduleState{
			HighWater: at(1700000300), LastRunID: "r", PlanSeq: 2, PlanAt: at(1700000600), RealRepet: 1,
			Ended: true, EndedAt: at(1700000900), MisfireDropped: 4,
		},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("schedule (-want +got):\n%s", diff)
	}
}
