package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// bulk starts a bulk job and waits until it is done.
func (e *testEnv) bulk(t *testing.T, body map[string]any) rotaapi.BulkJob {
	t.Helper()
	r := e.do("POST", "/api/tasks/bulk", body)
	var job rotaapi.BulkJob
	if r.Status != 202 || json.Unmarshal(r.Data, &job) != nil || job.ID == "" {
		t.Fatalf("POST /api/tasks/bulk %v: %v", body, r)
	}
	waitFor(t, 30*time.Second, "bulk job done", func() bool {
		e.ok("GET", "/api/tasks/bulk/"+job.ID, nil, &job)
		return job.Status == "done"
	})
	return job
}

// TestBulkStopByFilter: a stop by filter cancels every matching task in
// batches (1200 tasks: three batches), skips none of them, leaves the
// others alone, and is audited once with the count.
func TestBulkStopByFilter(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		evs []rota.Event
	)
	e := setup(t, func(o *setupOptions) {
		o.auth = &AuthConfig{BootstrapToken: "boot"}
		o.events = func(ev rota.Event) {
			mu.Lock()
			evs = append(evs, ev)
			mu.Unlock()
		}
	})
	items := make([]map[string]any, 600)
	for i := range items {
		items[i] = map[string]any{"kind": "mass", "task": i}
	}
	for range 2 {
		if r := doAs(t, e.url, "boot", "POST", "/api/tasks/batch", map[string]any{"tasks": items}); r.Status != 200 {
			t.Fatalf("batch: %v", r)
		}
	}
	other := submitAs(t, e, "boot", map[string]any{"kind": "keep", "task": 1})
	op, _ := mustToken(t, e, "boot", "ops", rota.RoleOperator)
	viewer, _ := mustToken(t, e, "boot", "eve", rota.RoleReader)
	body := map[string]any{"action": "stop", "filter": map[string]string{"kind": "mass", "status": "SCHEDULED"}, "message": "incident 7"}
	if r := doAs(t, e.url, viewer, "POST", "/api/tasks/bulk", body); r.Status != 403 {
		t.Fatalf("viewer's bulk: %v", r)
	}
	r := doAs(t, e.url, op, "POST", "/api/tasks/bulk", body)
	var job rotaapi.BulkJob
	if r.Status != 202 || json.Unmarshal(r.Data, &job) != nil || job.Total != 1200 || job.Action != "stop" {
		t.Fatalf("bulk stop: %v", r)
	}
	waitFor(t, 60*time.Second, "bulk stop done", func() bool {
		r := doAs(t, e.url, viewer, "GET", "/api/tasks/bulk/"+job.ID, nil)
		if err := json.Unmarshal(r.Data, &job); err != nil {
			t.Fatalf("bulk job: %v", r)
		}
		return job.Status == "done"
	})
	if job.Done != 1200 || job.Skipped != 0 || job.Failed != 0 || job.FinishedAt == 0 {
		t.Fatalf("job: %+v", job)
	}
	var counts rotaapi.TaskCounts
	r2 := doAs(t, e.url, op, "GET", "/api/tasks/counts?kind=mass", nil)
	if err := json.Unmarshal(r2.Data, &counts); err != nil || counts.Counts[rota.StatusCanceled] != 1200 || counts.Total != 1200 {
		t.Fatalf("counts after the stop: %v", r2)
	}
	var kept rotaapi.TaskDetail
	if err := json.Unmarshal(doAs(t, e.url, op, "GET", "/api/tasks/"+other, nil).Data, &kept); err != nil || kept.Status != rota.StatusScheduled {
		t.Fatalf("a task outside the filter: %+v", kept)
	}
	var audit rotaapi.AuditList
	if err := json.Unmarshal(doAs(t, e.url, "boot", "GET", "/api/audit?action=task.bulk", nil).Data, &audit); err != nil || len(audit.Records) != 1 {
		t.Fatalf("audit of the job: %+v", audit)
	}
	if rec := audit.Records[0]; rec.Actor != "ops" || rec.Target != job.ID || !strings.Contains(string(rec.After), `"total":1200`) {
		t.Fatalf("audit record: %+v after %s", rec, rec.After)
	}
	// Its progress went to the event log: a batch, a batch, the end.
	mu.Lock()
	var got []string
	for _, ev := range evs {
		var st rotaapi.BulkJob
		if err := json.Unmarshal(ev.Result, &st); err != nil || st.ID != job.ID {
			t.Fatalf("bulk event %+v: %v", ev, err)
		}
		got = append(got, fmt.Sprintf("%s %d/%d", ev.Name(), st.Done, st.Total))
	}
	mu.Unlock()
	if want := "[bulk.progress 500/1200 bulk.progress 1000/1200 bulk.done 1200/1200]"; fmt.Sprint(got) != want {
		t.Fatalf("bulk events %v, want %s", got, want)
	}
	// A second stop of the same tasks skips them all (already finished).
	again := e.bulkAs(t, op, map[string]any{"action": "stop", "filter": map[string]string{"kind": "mass"}})
	if again.Total != 1200 || again.Skipped != 1200 || again.Done != 0 {
		t.Fatalf("second stop: %+v", again)
	}
}

// bulkAs is bulk with a token.
func (e *testEnv) bulkAs(t *testing.T, token string, body map[string]any) rotaapi.BulkJob {
	t.Helper()
	r := doAs(t, e.url, token, "POST", "/api/tasks/bulk", body)
	var job rotaapi.BulkJob
	if r.Status != 202 || json.Unmarshal(r.Data, &job) != nil {
		t.Fatalf("bulk: %v", r)
	}
	waitFor(t, 30*time.Second, "bulk job done", func() bool {
		if err := json.Unmarshal(doAs(t, e.url, token, "GET", "/api/tasks/bulk/"+job.ID, nil).Data, &job); err != nil {
			t.Fatal(err)
		}
		return job.Status == "done"
	})
	return job
}

func submitAs(t *testing.T, e *testEnv, token string, body map[string]any) string {
	t.Helper()
	r := doAs(t, e.url, token, "POST", "/api/tasks", body)
	var res rotaapi.SubmitResponse
	if r.Status != 200 || json.Unmarshal(r.Data, &res) != nil {
		t.Fatalf("submit: %v", r)
	}
	return res.TaskID
}

// TestBulkRunAgainAndDelete: run again by ids copies each task; delete
// deletes the finished ones and skips the rest.
func TestBulkRunAgainAndDelete(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.submit(map[string]any{"kind": "b", "task": "a"})
	b := e.submit(map[string]any{"kind": "b", "task": "b"})
	c := e.claimOne("w", "b", 0)
	e.succeed(c.RunID, "w")
	job := e.bulk(t, map[string]any{"action": "run_again", "task_ids": []string{a, b, a}})
	if job.Total != 2 || job.Done != 2 {
		t.Fatalf("run again: %+v", job)
	}
	var l listResponse
	e.ok("GET", "/api/tasks?kind=b", nil, &l)
	if len(l.Tasks) != 4 {
		t.Fatalf("after run again: %d tasks, want 4", len(l.Tasks))
	}
	job = e.bulk(t, map[string]any{"action": "delete", "filter": map[string]string{"kind": "b"}})
	if job.Total != 4 || job.Done != 1 || job.Skipped != 3 {
		t.Fatalf("delete: %+v", job)
	}
	wantErr(t, e.do("GET", "/api/tasks/"+c.TaskID, nil), rota.CodeNotFound)
	e.ok("GET", "/api/tasks?kind=b", nil, &l)
	if len(l.Tasks) != 3 {
		t.Fatalf("after delete: %d tasks, want 3", len(l.Tasks))
	}
}

// TestBulkValidation: every bad request is a 400 naming its field.
func TestBulkValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	many := make([]string, 10_001)
	for i := range many {
		many[i] = fmt.Sprintf("%032x", i+1)
	}
	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{"action": "explode", "task_ids": []string{many[0]}}, "action"},
		{map[string]any{"action": "stop"}, "task_ids"},
		{map[string]any{"action": "stop", "task_ids": []string{}}, "task_ids"},
		{map[string]any{"action": "stop", "task_ids": many}, "task_ids"},
		{map[string]any{"action": "stop", "task_ids": []string{"nope"}}, "task_ids[0]"},
		{map[string]any{"action": "stop", "task_ids": []string{many[0]}, "filter": map[string]string{}}, "task_ids"},
		{map[string]any{"action": "stop", "filter": map[string]string{"status": "LOST"}}, "filter.status"},
		{map[string]any{"action": "stop", "filter": map[string]string{"colour": "red"}}, "filter.colour"},
		{map[string]any{"action": "stop", "filter": map[string]string{"created_after": "yesterday"}}, "filter.created_after"},
		{map[string]any{"action": "delete", "task_ids": []string{many[0]}, "message": "x"}, "message"},
		{map[string]any{"action": "stop", "task_ids": "all"}, "task_ids"},
	} {
		r := e.do("POST", "/api/tasks/bulk", tc.body)
		if r.Status != 400 || r.field() != tc.field {
			t.Errorf("%v: %v, want 400 naming %s", tc.body, r, tc.field)
		}
	}
	wantErr(t, e.do("GET", "/api/tasks/bulk/"+many[0], nil), rota.CodeNotFound)
	wantErr(t, e.do("GET", "/api/tasks/bulk/x", nil), rota.CodeInvalid)
	// An empty filter matches everything: with no task, a job of 0.
	if job := e.bulk(t, map[string]any{"action": "stop", "filter": map[string]string{}}); job.Total != 0 {
		t.Fatalf("empty: %+v", job)
	}
}

// TestTaskListSortAndRanges: sort by run_at both ways with exact cursors,
// the time ranges and the schedule filter, and their bad values.
func TestTaskListSortAndRanges(t *testing.T) {
	t.Parallel()
	e := setup(t)
	now := time.Now()
	var ids []string
	for _, d := range []int{300, 100, 200} {
		ids = append(ids, e.submit(map[string]any{"kind": "s", "task": d, "delay_seconds": d}))
	}
	list := func(q string) ([]string, string) {
		t.Helper()
		var l listResponse
		e.ok("GET", "/api/tasks?"+q, nil, &l)
		var out []string
		for _, task := range l.Tasks {
			out = append(out, task.TaskID)
		}
		return out, l.NextCursor
	}
	first, cur := list("sort=run_at&limit=2")
	rest, end := list("sort=run_at&limit=2&cursor=" + cur)
	if fmt.Sprint(append(first, rest...)) != fmt.Sprint([]string{ids[1], ids[2], ids[0]}) || end != "" {
		t.Fatalf("sort=run_at: %v then %v (cursor %q)", first, rest, cur)
	}
	if got, _ := list("sort=-run_at"); fmt.Sprint(got) != fmt.Sprint([]string{ids[0], ids[2], ids[1]}) {
		t.Fatalf("sort=-run_at: %v", got)
	}
	after := now.Add(150 * time.Second).UTC().Format(time.RFC3339)
	if got, _ := list("run_after=" + after); fmt.Sprint(got) != fmt.Sprint([]string{ids[2], ids[0]}) {
		t.Fatalf("run_after: %v", got)
	}
	if got, _ := list(fmt.Sprintf("run_before=%d", now.Add(150*time.Second).UnixMilli())); fmt.Sprint(got) != fmt.Sprint([]string{ids[1]}) {
		t.Fatalf("run_before: %v", got)
	}
	if got, _ := list("finished_after=0"); len(got) != 0 {
		t.Fatalf("finished_after: %v", got)
	}
	if got, _ := list("schedule_id=none&created_after=0"); len(got) != 0 {
		t.Fatalf("schedule_id: %v", got)
	}
	for q, field := range map[string]string{
		"sort=payload":                 "sort",
		"sort=run_at&cursor=" + ids[0]: "cursor",
		"cursor=1.abc":                 "cursor",
		"created_before=tomorrow":      "created_before",
		"finished_after=-5":            "finished_after",
	} {
		if r := e.do("GET", "/api/tasks?"+q, nil); r.Status != 400 || r.field() != field {
			t.Errorf("GET /api/tasks?%s: %v, want 400 naming %s", q, r, field)
		}
	}
}

// TestStatsHistory: the finished tasks of the window by bucket, from the
// store; bad hours and buckets are 400.
func TestStatsHistory(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for range 2 {
		e.submit(map[string]any{"kind": "h", "task": 1})
	}
	c := e.claimOne("w", "h", 0)
	e.succeed(c.RunID, "w")
	c = e.claimOne("w", "h", 0)
	e.ok("POST", "/api/runs/"+c.RunID+"/fail", map[string]any{"worker_id": "w", "message": "no", "retry": false}, nil)
	var h rotaapi.History
	e.ok("GET", "/api/stats/history?hours=2&bucket=30m", nil, &h)
	if h.BucketSeconds != 1800 || len(h.Buckets) != 4 {
		t.Fatalf("history shape: %d buckets of %ds", len(h.Buckets), h.BucketSeconds)
	}
	last := h.Buckets[3]
	if last.Succeeded != 1 || last.Failed != 1 || last.Started != 2 || time.Unix(last.Time, 0).After(time.Now()) {
		t.Fatalf("last bucket: %+v", last)
	}
	e.ok("GET", "/api/stats/history", nil, &h)
	if h.BucketSeconds != 900 || len(h.Buckets) != 96 {
		t.Fatalf("default history: %d buckets of %ds", len(h.Buckets), h.BucketSeconds)
	}
	for q, field := range map[string]string{"hours=0": "hours", "hours=x": "hours", "bucket=30s": "bucket",
		"bucket=90s": "bucket", "hours=168&bucket=1m": "bucket"} {
		if r := e.do("GET", "/api/stats/history?"+q, nil); r.Status != 400 || r.field() != field {
			t.Errorf("GET /api/stats/history?%s: %v, want 400 naming %s", q, r, field)
		}
	}
}
