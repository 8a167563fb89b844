package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// reportsResult is one result of POST /api/runs/reports, decoded strictly.
type reportsResult struct {
	RunID     string      `json:"run_id"`
	TaskID    string      `json:"task_id"`
	Status    rota.Status `json:"status"`
	RunStatus rota.Status `json:"run_status"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// reports sends POST /api/runs/reports, which must answer 200, and returns
// its results, checking that each has exactly the fields of its kind.
func (e *testEnv) reports(worker string, items []map[string]any) []reportsResult {
	e.t.Helper()
	r := e.do("POST", "/api/runs/reports", map[string]any{"worker_id": worker, "reports": items})
	if r.Status != http.StatusOK || r.Code != 0 {
		e.t.Fatalf("reports: want success, got %v", r)
	}
	var raw struct {
		Results []map[string]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(r.Data, &raw); err != nil {
		e.t.Fatalf("reports: decode %s: %v", r.Data, err)
	}
	if len(raw.Results) != len(items) {
		e.t.Fatalf("reports: %d results for %d reports", len(raw.Results), len(items))
	}
	out := make([]reportsResult, len(raw.Results))
	for i, m := range raw.Results {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		want := []string{"run_id", "run_status", "status", "task_id"}
		if _, failed := m["error"]; failed {
			want = []string{"error", "run_id"}
		}
		if !slices.Equal(keys, want) {
			e.t.Errorf("result %d has fields %v, want %v", i, keys, want)
		}
		data, _ := json.Marshal(m)
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			e.t.Fatalf("result %d: %s: %v", i, data, err)
		}
	}
	return out
}

// wantReportErr asserts that a result is an error of code.
func wantReportErr(t *testing.T, r reportsResult, runID string, code rota.Code) {
	t.Helper()
	if r.RunID != runID || r.Error == nil || r.Error.Code != code.Number() || r.Error.Message == "" || r.TaskID != "" {
		t.Fatalf("want %s for run %s, got %+v (error %+v)", code, runID, r, r.Error)
	}
}

// TestReports reports a mixed batch: each report is applied as its single
// endpoint would, and the failures (another worker's run, an unknown run,
// a run already reported) are that report's only.
func TestReports(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		events []rota.Event
	)
	e := setup(t, func(o *setupOptions) {
		o.dispatch.Events = func(ev rota.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
		}
	})
	ids := map[string]string{}
	for _, k := range []string{"ok", "retry", "fatal", "release", "other"} {
		ids[k] = e.submit(map[string]any{"kind": "rep-" + k, "task": k, "heartbeat_timeout_seconds": 600})
	}
	ok := e.claimOne("w1", "rep-ok", 0)
	retry := e.claimOne("w1", "rep-retry", 0)
	fatal := e.claimOne("w1", "rep-fatal", 0)
	release := e.claimOne("w1", "rep-release", 0)
	other := e.claimOne("w2", "rep-other", 0)
	unknown := strings.Repeat("0", 31) + "1"

	res := e.reports("w1", []map[string]any{
		{"run_id": ok.RunID, "outcome": "succeed", "message": "sent", "result": map[string]any{"n": 1}},
		{"run_id": retry.RunID, "outcome": "fail", "message": "boom"},
		{"run_id": other.RunID, "outcome": "succeed"},
		{"run_id": fatal.RunID, "outcome": "fail", "message": "bad input", "retry": false},
		{"run_id": unknown, "outcome": "fail"},
		{"run_id": release.RunID, "outcome": "release", "message": "stopping"},
	})
	want := []reportsResult{
		{RunID: ok.RunID, TaskID: ids["ok"], Status: rota.StatusSuccess, RunStatus: rota.StatusSuccess},
		{RunID: retry.RunID, TaskID: ids["retry"], Status: rota.StatusScheduled, RunStatus: rota.StatusFailed},
		{}, // lease lost
		{RunID: fatal.RunID, TaskID: ids["fatal"], Status: rota.StatusFailed, RunStatus: rota.StatusFailed},
		{}, // not found
		{RunID: release.RunID, TaskID: ids["release"], Status: rota.StatusScheduled, RunStatus: rota.StatusCanceled},
	}
	for i, w := range want {
		if w.RunID != "" && res[i] != w {
			t.Errorf("result %d = %+v (error %+v), want %+v", i, res[i], res[i].Error, w)
		}
	}
	wantReportErr(t, res[2], other.RunID, rota.CodeLeaseLost)
	wantReportErr(t, res[4], unknown, rota.CodeNotFound)

	// The tasks and runs are as the single endpoints leave them.
	if got := e.task(ids["ok"]); got.Status != rota.StatusSuccess || !got.IsSucceed || got.Message != "sent" ||
		string(got.Result) != `{"n":1}` || got.Runs[0].Status != rota.StatusSuccess {
		t.Errorf("succeeded task: %+v runs %+v", got.taskJSON, got.Runs)
	}
	if got := e.task(ids["retry"]); got.Status != rota.StatusScheduled || len(got.Runs) != 1 ||
		got.Runs[0].Status != rota.StatusFailed || got.Runs[0].Message != "boom" {
		t.Errorf("retried task: %+v runs %+v", got.taskJSON, got.Runs)
	}
	if got := e.task(ids["fatal"]); got.Status != rota.StatusFailed || got.IsSucceed || got.Message != "bad input" {
		t.Errorf("failed task: %+v runs %+v", got.taskJSON, got.Runs)
	}
	if got := e.task(ids["release"]); got.Status != rota.StatusScheduled || got.Runs[0].Status != rota.StatusCanceled {
		t.Errorf("released task: %+v runs %+v", got.taskJSON, got.Runs)
	}
	if got := e.task(ids["other"]); got.Status != rota.StatusRunning || got.Runs[0].Status != rota.StatusRunning ||
		got.Runs[0].WorkerID != "w2" {
		t.Errorf("another worker's task changed: %+v runs %+v", got.taskJSON, got.Runs)
	}
	// A released task is claimable again at once.
	if c := e.claimOne("w3", "rep-release", 0); c.TaskID != ids["release"] {
		t.Errorf("claimed %s after the release, want %s", c.TaskID, ids["release"])
	}

	// Each applied report emitted its run's event, as the single endpoints do.
	mu.Lock()
	ended := map[string]rota.Status{}
	for _, ev := range events {
		if ev.Type == rota.EventRun && ev.Status.Terminal() {
			ended[ev.RunID] = ev.Status
		}
	}
	mu.Unlock()
	wantEnded := map[string]rota.Status{ok.RunID: rota.StatusSuccess, retry.RunID: rota.StatusFailed,
		fatal.RunID: rota.StatusFailed, release.RunID: rota.StatusCanceled}
	for run, st := range wantEnded {
		if ended[run] != st {
			t.Errorf("run %s: event status %q, want %s", run, ended[run], st)
		}
	}
	if _, ok := ended[other.RunID]; ok {
		t.Errorf("an event for the refused report")
	}

	// A second request: a run already reported is lease lost; the other
	// worker reports its own run.
	res = e.reports("w1", []map[string]any{{"run_id": ok.RunID, "outcome": "succeed"}})
	wantReportErr(t, res[0], ok.RunID, rota.CodeLeaseLost)
	res = e.reports("w2", []map[string]any{{"run_id": other.RunID, "outcome": "fail", "retry": true}})
	if w := (reportsResult{RunID: other.RunID, TaskID: ids["other"], Status: rota.StatusScheduled, RunStatus: rota.StatusFailed}); res[0] != w {
		t.Errorf("other worker's report = %+v, want %+v", res[0], w)
	}
}

// TestReportsMax reports 1000 runs in one request.
func TestReportsMax(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tasks := make([]map[string]any, maxReports)
	for i := range tasks {
		tasks[i] = map[string]any{"kind": "many", "task": i, "heartbeat_timeout_seconds": 600}
	}
	e.ok("POST", "/api/tasks/batch", map[string]any{"tasks": tasks}, nil)
	c := e.claim("w1", []string{"many"}, maxReports, 0)
	if len(c.Tasks) != maxReports {
		t.Fatalf("claimed %d tasks, want %d", len(c.Tasks), maxReports)
	}
	items := make([]map[string]any, len(c.Tasks))
	for i, ct := range c.Tasks {
		items[i] = map[string]any{"run_id": ct.RunID, "outcome": "succeed", "result": i}
	}
	res := e.reports("w1", items)
	for i, r := range res {
		if r.Error != nil || r.RunID != c.Tasks[i].RunID || r.TaskID != c.Tasks[i].TaskID || r.Status != rota.StatusSuccess {
			t.Fatalf("result %d = %+v (error %+v)", i, r, r.Error)
		}
	}
	var l listResponse
	e.ok("GET", "/api/tasks?kind=many&status=SUCCESS&limit=1000", nil, &l)
	if len(l.Tasks) != maxReports {
		t.Fatalf("%d tasks succeeded, want %d", len(l.Tasks), maxReports)
	}
}

// TestBadReportsChangeNothing: one invalid report refuses the request and
// applies none of the others.
func TestBadReportsChangeNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "c", "task": 1, "heartbeat_timeout_seconds": 600})
	run := e.claimOne("w1", "c", 0)
	r := e.do("POST", "/api/runs/reports", map[string]any{"worker_id": "w1", "reports": []map[string]any{
		{"run_id": run.RunID, "outcome": "succeed"},
		{"run_id": strings.Repeat("0", 31) + "1", "outcome": "done"},
	}})
	wantErr(t, r, rota.CodeInvalid)
	if r.field() != "reports[1].outcome" {
		t.Fatalf("field = %q, want reports[1].outcome", r.field())
	}
	if got := e.task(id); got.Status != rota.StatusRunning || got.Runs[0].Status != rota.StatusRunning {
		t.Fatalf("after a refused request: task %s, runs %+v", got.Status, got.Runs)
	}
}

// completeFaults fails RunComplete for some runs.
type completeFaults struct {
	store.Store
	errs map[string]error // by run id; set before the store is used
}

func (f *completeFaults) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	if err := f.errs[p.RunID]; err != nil {
		return nil, err
	}
	return f.Store.RunComplete(ctx, p)
}

// TestReportsStoreFailure: a store failure is the error of the reports it
// hit, as the single endpoint would answer it (503 unavailable as is, an
// internal fault hidden and logged), and the request still answers 200.
func TestReportsStoreFailure(t *testing.T) {
	t.Parallel()
	fs := &completeFaults{errs: map[string]error{}}
	e := setup(t, func(o *setupOptions) {
		o.wrapStore = func(s store.Store) store.Store { fs.Store = s; return fs }
	})
	var runs []claimedJSON
	for i := range 3 {
		e.submit(map[string]any{"kind": "sf", "task": i, "heartbeat_timeout_seconds": 600})
		runs = append(runs, e.claimOne("w1", "sf", 0))
	}
	fs.errs[runs[0].RunID] = fmt.Errorf("pgstore: complete run: %w: %w",
		rota.Errorf(rota.CodeUnavailable, "the database is unreachable"), errors.New("dial tcp: secret-host"))
	fs.errs[runs[2].RunID] = fmt.Errorf("sqlitestore: complete run: %w", errors.New("SQLITE_IOERR: secret-driver-detail"))
	res := e.reports("w1", []map[string]any{
		{"run_id": runs[0].RunID, "outcome": "succeed"},
		{"run_id": runs[1].RunID, "outcome": "succeed"},
		{"run_id": runs[2].RunID, "outcome": "succeed"},
	})
	wantReportErr(t, res[0], runs[0].RunID, rota.CodeUnavailable)
	if res[0].Error.Message != "the database is unreachable" {
		t.Errorf("unavailable message %q", res[0].Error.Message)
	}
	if res[1].Error != nil || res[1].Status != rota.StatusSuccess {
		t.Errorf("the report the store did not fail: %+v (error %+v)", res[1], res[1].Error)
	}
	wantReportErr(t, res[2], runs[2].RunID, rota.CodeInternal)
	if res[2].Error.Message != internalMessage {
		t.Errorf("internal message %q leaks details", res[2].Error.Message)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "secret-driver-detail") || !strings.Contains(logs, "level=ERROR") {
		t.Errorf("internal fault not logged:\n%s", logs)
	}
}
