package rotaclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotatest"
)

// startServer runs a real Rota server in-process (package rotatest) and
// returns a client for it.
func startServer(t *testing.T) *rotaclient.Client {
	t.Helper()
	return rotatest.NewServer(t).Client
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNewRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "::"} {
		if _, err := rotaclient.New(rotaclient.Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
	c, err := rotaclient.New(rotaclient.Config{BaseURL: "https://host:9/rota/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BaseURL(); got != "https://host:9/rota" {
		t.Errorf("BaseURL = %q", got)
	}
}

// fake serves fixed responses and records the requests.
type fake struct {
	status int
	body   string
	got    []*http.Request
	bodies [][]byte // of got, in order
}

func newFake(t *testing.T, status int, body string) (*fake, *rotaclient.Client) {
	f := &fake{status: status, body: body}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.got = append(f.got, r)
		b, _ := io.ReadAll(r.Body)
		f.bodies = append(f.bodies, b)
		w.WriteHeader(f.status)
		w.Write([]byte(f.body))
	}))
	t.Cleanup(hs.Close)
	c, err := rotaclient.New(rotaclient.Config{BaseURL: hs.URL + "/prefix", Header: http.Header{"X-Test": {"1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func TestEnvelopeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		body      string
		want      *rota.Error
		sentinels []error
	}{
		{"invalid with field", 400, `{"code":40001,"message":"field \"priority\": bad","data":{"field":"priority"}}`,
			&rota.Error{Code: rota.CodeInvalid, Message: `field "priority": bad`, Field: "priority"}, []error{rota.ErrInvalid}},
		{"not found", 404, `{"code":40400,"message":"task x not found","data":null}`,
			&rota.Error{Code: rota.CodeNotFound, Message: "task x not found"}, []error{rota.ErrNotFound}},
		{"conflict", 409, `{"code":40900,"message":"finished","data":null}`,
			&rota.Error{Code: rota.CodeConflict, Message: "finished"}, []error{rota.ErrConflict}},
		{"lease lost", 409, `{"code":40901,"message":"lease lost","data":null}`,
			&rota.Error{Code: rota.CodeLeaseLost, Message: "lease lost"}, []error{rota.ErrLeaseLost}},
		{"unknown code", 418, `{"code":41800,"message":"slow down","data":null}`,
			&rota.Error{Code: rota.CodeInternal, Message: "slow down"}, nil},
		{"proxy page", 502, `<html>bad gateway</html>`,
			&rota.Error{Code: rota.CodeUnavailable, Message: "unexpected response: HTTP 502: <html>bad gateway</html>"}, []error{rota.ErrUnavailable}},
		{"empty 404", 404, ``,
			&rota.Error{Code: rota.CodeNotFound, Message: "unexpected response: HTTP 404"}, []error{rota.ErrNotFound}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, c := newFake(t, tt.status, tt.body)
			_, err := c.GetTask(context.Background(), "x")
			var re *rota.Error
			if !errors.As(err, &re) {
				t.Fatalf("err = %v (%T), want *rota.Error", err, err)
			}
			if diff := cmp.Diff(tt.want, re); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			for _, s := range tt.sentinels {
				if !errors.Is(err, s) {
					t.Errorf("errors.Is(err, %v) = false", s)
				}
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	f, c := newFake(t, 200, `{"code":0,"message":"ok","data":{"tasks":[],"next_cursor":""}}`)
	_, err := c.ListTasks(context.Background(), rotaclient.ListParams{Kind: "a b", Status: rota.StatusFailed, Limit: 5, Cursor: "c"})
	if err != nil {
		t.Fatal(err)
	}
	r := f.got[0]
	if r.URL.Path != "/prefix/api/tasks" || r.Method != "GET" {
		t.Errorf("request %s %s", r.Method, r.URL.Path)
	}
	if got, want := r.URL.RawQuery, "cursor=c&kind=a+b&limit=5&status=FAILED"; got != want {
		t.Errorf("query %q, want %q", got, want)
	}
	if r.Header.Get("X-Test") != "1" || r.Header.Get("User-Agent") != "rotaclient" {
		t.Errorf("headers %v", r.Header)
	}
}

func TestDecodesTimesAndNulls(t *testing.T) {
	t.Parallel()
	_, c := newFake(t, 200, `{"code":0,"message":"ok","data":{"task_id":"t","kind":"k","priority":"low","task":{"a":1},
		"status":"SUCCESS","created_at":1700000000,"run_at":1700000001.5,"start_time":0,"end_time":null,"result":null,
		"runs":[{"run_id":"r","worker_id":"w","attempt":1,"status":"SUCCESS","start_time":1700000002,"end_time":1700000003}]}}`)
	task, err := c.GetTask(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	want := &rota.Task{
		ID: "t", Kind: "k", Priority: rota.PriorityLow, Payload: json.RawMessage(`{"a":1}`), Status: rota.StatusSuccess,
		CreatedAt: time.Unix(1700000000, 0).UTC(), RunAt: time.Unix(1700000001, 5e8).UTC(),
		Runs: []rota.Run{{ID: "r", TaskID: "t", WorkerID: "w", Attempt: 1, Status: rota.StatusSuccess,
			StartTime: time.Unix(1700000002, 0).UTC(), EndTime: time.Unix(1700000003, 0).UTC()}},
	}
	if diff := cmp.Diff(want, task); diff != "" {
		t.Errorf("task (-want +got):\n%s", diff)
	}
}

func TestTransportError(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close()
	c, _ := rotaclient.New(rotaclient.Config{BaseURL: url})
	err := c.Health(context.Background())
	var re *rota.Error
	if err == nil || errors.As(err, &re) {
		t.Fatalf("err = %v, want a transport error", err)
	}
}

func TestTasksEndToEnd(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	ctx := ctxT(t)

	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(ctx, rotaclient.TaskParams{
		Kind: "email", Priority: rota.PriorityHigh, Payload: map[string]string{"to": "a"},
		Key: "k1", MaxRetries: new(0), TimeoutSeconds: 9, HeartbeatTimeoutSeconds: 7, WorkerIDs: []string{"w1", "w2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rota.ValidID(res.TaskID) || res.Existing {
		t.Fatalf("submit = %+v", res)
	}
	again, err := c.Submit(ctx, rotaclient.TaskParams{Kind: "email", Payload: json.RawMessage(`1`), Key: "k1"})
	if err != nil || again != (rotaclient.SubmitResult{TaskID: res.TaskID, Existing: true}) {
		t.Fatalf("keyed resubmit = %+v, %v", again, err)
	}
	task, err := c.GetTask(ctx, res.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Kind != "email" || task.Priority != rota.PriorityHigh || string(task.Payload) != `{"to":"a"}` ||
		task.Status != rota.StatusScheduled || task.MaxRetries != 0 || task.TimeoutSeconds != 9 ||
		task.HeartbeatTimeoutSeconds != 7 || !slices.Equal(task.WorkerIDs, []string{"w1", "w2"}) ||
		task.CreatedAt.IsZero() || task.Key != "k1" {
		t.Errorf("task = %+v", task)
	}

	// Invalid input names the field.
	_, err = c.Submit(ctx, rotaclient.TaskParams{Kind: "email", Priority: "urgent"})
	var re *rota.Error
	if !errors.As(err, &re) || !errors.Is(err, rota.ErrInvalid) || re.Field != "priority" {
		t.Errorf("bad priority: %v (%+v)", err, re)
	}
	_, err = c.SubmitBatch(ctx, []rotaclient.TaskParams{{Kind: "email"}, {Kind: "bad kind!"}})
	if !errors.As(err, &re) || re.Field != "tasks[1].kind" {
		t.Errorf("bad batch: %v (%+v)", err, re)
	}
	_, err = c.SubmitBatch(ctx, []rotaclient.TaskParams{{Kind: "email", Payload: func() {}}})
	if !errors.As(err, &re) || re.Field != "tasks[0].task" {
		t.Errorf("unencodable batch payload: %v (%+v)", err, re)
	}

	// Not found and conflict.
	if _, err := c.GetTask(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, rota.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	stopped, err := c.StopTask(ctx, res.TaskID)
	if err != nil || stopped.Status != rota.StatusCanceled {
		t.Fatalf("stop = %+v, %v", stopped, err)
	}
	if _, err := c.StopTask(ctx, res.TaskID); !errors.Is(err, rota.ErrConflict) {
		t.Errorf("stop finished: %v", err)
	}
	if _, err := c.UpdateTask(ctx, res.TaskID, rotaclient.UpdateParams{MaxRetries: new(2)}); !errors.Is(err, rota.ErrConflict) {
		t.Errorf("update finished: %v", err)
	}
	newID, err := c.RunAgain(ctx, res.TaskID)
	if err != nil || newID == res.TaskID || !rota.ValidID(newID) {
		t.Fatalf("run again = %q, %v", newID, err)
	}
	low := rota.PriorityLow
	up, err := c.UpdateTask(ctx, newID, rotaclient.UpdateParams{Priority: &low, WorkerIDs: &[]string{}, MaxRetries: new(5)})
	if err != nil || up.Priority != low || len(up.WorkerIDs) != 0 || up.MaxRetries != 5 {
		t.Fatalf("update = %+v, %v", up, err)
	}

	// Batch, then list by pages and with the iterator.
	batch := make([]rotaclient.TaskParams, 5)
	for i := range batch {
		batch[i] = rotaclient.TaskParams{Kind: "report", Payload: i, Delay: time.Hour}
	}
	results, err := c.SubmitBatch(ctx, batch)
	if err != nil || len(results) != 5 {
		t.Fatalf("batch = %v, %v", results, err)
	}
	var want []string
	for i := len(results) - 1; i >= 0; i-- {
		want = append(want, results[i].TaskID) // newest first
	}
	page, err := c.ListTasks(ctx, rotaclient.ListParams{Kind: "report", Limit: 2})
	if err != nil || len(page.Tasks) != 2 || page.NextCursor == "" {
		t.Fatalf("page = %+v, %v", page, err)
	}
	if got := page.Tasks[0]; got.RunAt.Before(time.Now().Add(59*time.Minute)) || got.Status != rota.StatusScheduled {
		t.Errorf("delayed task = %+v", got)
	}
	var got []string
	for task, err := range c.AllTasks(ctx, rotaclient.ListParams{Kind: "report", Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, task.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AllTasks (-want +got):\n%s", diff)
	}
	n := 0
	for range c.AllTasks(ctx, rotaclient.ListParams{Limit: 1}) {
		n++
		if n == 3 {
			break
		}
	}
	// Filters past kind and status, and the counts of a filter.
	page, err = c.ListTasks(ctx, rotaclient.ListParams{Kind: "report", Statuses: []rota.Status{rota.StatusRunning, rota.StatusScheduled},
		Priority: rota.PriorityMid, Search: want[0]})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != want[0] {
		t.Errorf("filtered page = %+v, %v; want only %s", page, err, want[0])
	}
	counts, err := c.CountTasks(ctx, rotaclient.ListParams{Kind: "report", Status: rota.StatusSuccess})
	if err != nil || counts.Total != len(want) || counts.Counts[rota.StatusScheduled] != len(want) || counts.Counts[rota.StatusSuccess] != 0 {
		t.Errorf("counts = %+v, %v; want %d scheduled", counts, err, len(want))
	}
	for _, err := range c.AllTasks(ctx, rotaclient.ListParams{Status: "nope"}) {
		if !errors.Is(err, rota.ErrInvalid) {
			t.Errorf("bad status filter: %v", err)
		}
	}
}

func TestKindsWorkersStatsEndToEnd(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	ctx := ctxT(t)

	if _, err := c.GetKind(ctx, "nope"); !errors.Is(err, rota.ErrNotFound) {
		t.Errorf("get unknown kind: %v", err)
	}
	k, err := c.SetKind(ctx, "email", rotaclient.KindSettings{PriorityFactor: new(3), MaxRunning: new(4), Rate: new(2.5)})
	if err != nil {
		t.Fatal(err)
	}
	want := &rota.Kind{Name: "email", PriorityFactor: 3, MaxRunning: 4, Rate: 2.5, Dispatch: rota.DispatchPull}
	if diff := cmp.Diff(want, k); diff != "" {
		t.Errorf("SetKind (-want +got):\n%s", diff)
	}
	if k, err := c.PauseKind(ctx, "email"); err != nil || !k.Paused {
		t.Errorf("pause = %+v, %v", k, err)
	}
	if k, err := c.GetKind(ctx, "email"); err != nil || !k.Paused || k.PriorityFactor != 3 {
		t.Errorf("get = %+v, %v", k, err)
	}
	if k, err := c.ResumeKind(ctx, "email"); err != nil || k.Paused {
		t.Errorf("resume = %+v, %v", k, err)
	}
	var re *rota.Error
	if _, err := c.SetKind(ctx, "email", rotaclient.KindSettings{PriorityFactor: new(0)}); !errors.As(err, &re) || re.Field != "priority_factor" {
		t.Errorf("bad factor: %v", err)
	}
	kinds, err := c.ListKinds(ctx)
	if err != nil || len(kinds) != 1 || kinds[0].Name != "email" {
		t.Errorf("kinds = %+v, %v", kinds, err)
	}

	if _, err := c.Submit(ctx, rotaclient.TaskParams{Kind: "email", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Kinds) != 1 || st.Kinds[0].Kind != "email" || st.Kinds[0].Counts[rota.StatusScheduled] != 1 || st.Totals[rota.StatusScheduled] != 1 {
		t.Errorf("stats = %+v", st)
	}

	// A claim registers the worker; stopping it makes its next claim drain.
	cl, err := c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"email"}, Max: 5, Address: "10.0.0.1:99"})
	if err != nil || len(cl.Runs) != 1 || cl.Drain {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	ws, err := c.ListWorkers(ctx)
	if err != nil || len(ws) != 1 || ws[0].ID != "w1" || ws[0].Address != "10.0.0.1:99" || ws[0].Running != 1 || ws[0].Status != rota.WorkerActive {
		t.Errorf("workers = %+v, %v", ws, err)
	}
	w, err := c.StopWorker(ctx, "w1")
	if err != nil || !w.StopRequested {
		t.Errorf("stop worker = %+v, %v", w, err)
	}
	if _, err := c.StopWorker(ctx, "nobody"); !errors.Is(err, rota.ErrNotFound) {
		t.Errorf("stop unknown worker: %v", err)
	}
	cl, err = c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"email"}, Max: 1, Wait: time.Second})
	if err != nil || !cl.Drain || len(cl.Runs) != 0 {
		t.Errorf("claim after stop = %+v, %v", cl, err)
	}
}

func TestWorkerProtocolEndToEnd(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	ctx := ctxT(t)

	sub, err := c.Submit(ctx, rotaclient.TaskParams{Kind: "job", Priority: rota.PriorityLow, Payload: map[string]int{"n": 1}, MaxRetries: new(1)})
	if err != nil {
		t.Fatal(err)
	}
	// A long-poll claim is woken by a submit.
	start := time.Now()
	cl, err := c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w", Kinds: []string{"job"}, Max: 2, Wait: 5 * time.Second})
	if err != nil || len(cl.Runs) != 1 {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	r := cl.Runs[0]
	if r.TaskID != sub.TaskID || r.Kind != "job" || r.Priority != rota.PriorityLow || string(r.Payload) != `{"n":1}` ||
		r.Attempt != 1 || r.HeartbeatTimeoutSeconds != 30 || r.LeaseExpiresAt.IsZero() {
		t.Errorf("claimed = %+v", r)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("claim of a ready task took %v", time.Since(start))
	}
	hb, err := c.Heartbeat(ctx, r.RunID, "w", "")
	if err != nil || hb.Stop || hb.Drain || hb.LeaseExpiresAt.Before(time.Now().Add(28*time.Second)) {
		t.Errorf("heartbeat = %+v, %v", hb, err)
	}
	if _, err := c.Heartbeat(ctx, r.RunID, "intruder", ""); !errors.Is(err, rota.ErrLeaseLost) {
		t.Errorf("heartbeat by another worker: %v", err)
	}
	if err := c.Fail(ctx, r.RunID, rotaclient.FailParams{WorkerID: "w", Message: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Fail(ctx, r.RunID, rotaclient.FailParams{WorkerID: "w", Message: "again"}); !errors.Is(err, rota.ErrLeaseLost) {
		t.Errorf("second report: %v", err)
	}
	// Retried after the backoff: the waiting claim is woken by the due timer.
	cl, err = c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w", Kinds: []string{"job"}, Max: 1, Wait: 5 * time.Second})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].Attempt != 2 {
		t.Fatalf("retry claim = %+v, %v", cl, err)
	}
	if err := c.Succeed(ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w", Message: "done", Result: map[string]int{"sent": 3}}); err != nil {
		t.Fatal(err)
	}
	task, err := c.GetTask(ctx, sub.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != rota.StatusSuccess || !task.IsSucceed || task.Message != "done" || string(task.Result) != `{"sent":3}` || len(task.Runs) != 2 {
		t.Errorf("task = %+v", task)
	}
	if task.Runs[0].Status != rota.StatusFailed || task.Runs[0].Message != "boom" || task.Runs[1].Status != rota.StatusSuccess {
		t.Errorf("runs = %+v", task.Runs)
	}

	// A claim with nothing to do returns empty after its wait.
	cl, err = c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w", Kinds: []string{"job"}, Max: 1})
	if err != nil || len(cl.Runs) != 0 {
		t.Errorf("empty claim = %+v, %v", cl, err)
	}
	// NoRetry fails at once.
	sub, _ = c.Submit(ctx, rotaclient.TaskParams{Kind: "job", Payload: 1})
	cl, _ = c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w", Kinds: []string{"job"}, Max: 1, Wait: 5 * time.Second})
	if len(cl.Runs) != 1 {
		t.Fatalf("claim = %+v", cl)
	}
	if err := c.Fail(ctx, cl.Runs[0].RunID, rotaclient.FailParams{WorkerID: "w", Message: "fatal", NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	if task, _ := c.GetTask(ctx, sub.TaskID); task.Status != rota.StatusFailed {
		t.Errorf("no-retry task = %s", task.Status)
	}
}
