package schedule_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/netguard"
	"github.com/rotahq/rota/internal/schedule/httpexec"
	"github.com/rotahq/rota/internal/store"
)

// executor returns an HTTP executor whose guard allows the test servers'
// 127.0.0.1 (the default guard refuses loopback).
func (e *env) executor() *httpexec.Executor {
	e.t.Helper()
	return e.executorAllowing("127.0.0.1")
}

// executorAllowing returns an HTTP executor whose guard allows allow.
func (e *env) executorAllowing(allow ...string) *httpexec.Executor {
	e.t.Helper()
	g, err := netguard.New(netguard.Config{Allow: allow})
	if err != nil {
		e.t.Fatal(err)
	}
	x, err := httpexec.New(httpexec.Config{
		Schedules: e.st, Tasks: e.st, Dispatcher: e.disp, Clock: e.clk, Metrics: e.m,
		Logger: slog.New(slog.DiscardHandler), Guard: g,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(x.Stop)
	return x
}

// fireTarget creates a target schedule for url, fires it once and claims
// the run as the HTTP executor does (PinnedOnly).
func (e *env) fireTarget(url, method string, timeout int) (*rota.Schedule, rota.ClaimedRun) {
	e.t.Helper()
	s := e.add(func(s *rota.Schedule) {
		s.Kind, s.TimeoutSeconds = "hook", timeout
		s.Payload = []byte(`{"report":"daily"}`)
		s.Target = &rota.Target{URL: url, Method: method, Headers: map[string]string{"Authorization": "Bearer t"}}
	})
	e.step(sec(5))
	e.claimNone("some-worker", "hook") // pinned to the executor
	res, err := e.disp.Claim(e.ctx, dispatch.ClaimRequest{WorkerID: rota.HTTPWorkerID, Kinds: []string{"hook"}, Max: 1, PinnedOnly: true})
	if err != nil || len(res.Runs) != 1 {
		e.t.Fatalf("executor claim: %d runs, %v", len(res.Runs), err)
	}
	return s, res.Runs[0]
}

func TestHTTPExecutorSuccess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, body = r.Clone(context.Background()), string(b)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s, c := e.fireTarget(srv.URL+"/hook", "PUT", 10)
	x := e.executor()
	if st := x.Execute(e.ctx, c); st != rota.StatusSuccess {
		t.Fatalf("status %s", st)
	}
	if got.Method != "PUT" || got.URL.Path != "/hook" || body != `{"report":"daily"}` {
		t.Fatalf("request %s %s %q", got.Method, got.URL.Path, body)
	}
	for h, want := range map[string]string{"Rota-Run-Id": c.RunID, "Rota-Task-Id": c.TaskID, "Rota-Schedule-Id": s.ID,
		"Authorization": "Bearer t", "Rota-Fire-Time": "1767225605"} {
		if v := got.Header.Get(h); v != want {
			t.Fatalf("header %s = %q, want %q", h, v, want)
		}
	}
	e.wantRuns(s.ID, "+5s:SUCCESS#1")
	if n := e.counter(e.m.RunsTotal.WithLabelValues("SUCCESS")); n != 1 {
		t.Fatalf("rota_runs_total{SUCCESS} = %v", n)
	}
}

func TestHTTPExecutorFailure(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database down "+strings.Repeat("x", 5000), http.StatusInternalServerError)
	}))
	defer srv.Close()
	s, c := e.fireTarget(srv.URL, "", 10)
	if st := e.executor().Execute(e.ctx, c); st != rota.StatusFailed {
		t.Fatalf("status %s", st)
	}
	runs := e.wantRuns(s.ID, "+5s:FAILED#1")
	task := e.task(runs[0].TaskID)
	if !strings.HasPrefix(task.Message, "HTTP 500: database down xxx") || len(task.Message) > httpexec.DefaultHTTPMessageBytes+40 {
		t.Fatalf("message %q (%d bytes)", task.Message[:min(len(task.Message), 60)], len(task.Message))
	}
}

func TestHTTPExecutorTimeout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	arrived, aborted := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // (the server notices a client gone only once the body is read)
		close(arrived)
		<-r.Context().Done() // never answers
		close(aborted)
	}))
	defer srv.Close()
	s, c := e.fireTarget(srv.URL, "", 8)
	done := make(chan rota.Status, 1)
	go func() { done <- e.executor().Execute(e.ctx, c) }()
	<-arrived
	e.clk.Advance(sec(9)) // the run's 8 s pass
	if st := <-done; st != rota.StatusTimeout {
		t.Fatalf("status %s, want TIMEOUT", st)
	}
	<-aborted // the request was canceled, not left hanging
	e.wantRuns(s.ID, "+5s:TIMEOUT#1")
	if n := e.counter(e.m.Timeout); n != 1 {
		t.Fatalf("rota_task_timeout_total = %v", n)
	}
}

func TestHTTPExecutorStopCancelsRequest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	arrived, aborted := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(arrived)
		<-r.Context().Done()
		close(aborted)
	}))
	defer srv.Close()
	s, c := e.fireTarget(srv.URL, "", 600)
	done := make(chan rota.Status, 1)
	go func() { done <- e.executor().Execute(e.ctx, c) }()
	<-arrived
	if _, err := e.disp.StopTask(e.ctx, c.TaskID, "stop it"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(sec(10)) // the next heartbeat answers stop
	if st := <-done; st != rota.StatusCanceled {
		t.Fatalf("status %s, want CANCELED", st)
	}
	<-aborted
	e.wantRuns(s.ID, "+5s:CANCELED#1")
}

// A task of a target kind that is not a target run but was pinned to the
// executor by hand (the API does not reserve its worker id) is claimed by
// it and failed with a message saying why, not run.
func TestHTTPExecutorRefusesOtherTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, _ = e.fireTarget("http://127.0.0.1:1/", "", 10)
	res, err := e.st.TaskInsert(e.ctx, store.TaskInsertParams{ID: e.ids.New(e.clk.Now()), Kind: "hook", Priority: rota.PriorityMid,
		Payload: []byte(`1`), Workers: 1, HeartbeatTimeoutSeconds: 30, Now: e.clk.Now(), RunAt: e.clk.Now(),
		WorkerIDs: []string{rota.HTTPWorkerID}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := e.disp.Claim(e.ctx, dispatch.ClaimRequest{WorkerID: rota.HTTPWorkerID, Kinds: []string{"hook"}, Max: 1, PinnedOnly: true})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != res.Task.ID {
		t.Fatalf("claim: %+v %v", cl.Runs, err)
	}
	if st := e.executor().Execute(e.ctx, cl.Runs[0]); st != rota.StatusFailed {
		t.Fatalf("status %s", st)
	}
	if msg := e.task(res.Task.ID).Message; !strings.Contains(msg, "no schedule with an HTTP target") {
		t.Fatalf("message %q", msg)
	}
}

// A task submitted by hand to the kind of a target schedule, unpinned, is
// not the executor's: it claims only the runs pinned to it, so the task
// stays SCHEDULED (no request is sent for it) until an ordinary worker of
// the kind claims it.
func TestHTTPExecutorLeavesHandSubmittedTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	hits := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Header.Get("Rota-Task-Id")
	}))
	defer srv.Close()
	s := e.add(func(s *rota.Schedule) { s.Kind, s.Target = "hook", &rota.Target{URL: srv.URL} })
	// The hand-submitted task is older than the schedule's run, and of a
	// higher priority: neither makes it the executor's.
	now := e.clk.Now()
	sub, err := e.disp.Submit(e.ctx, []store.TaskInsertParams{{ID: e.ids.New(now), Kind: "hook", Priority: rota.PriorityHigh,
		Payload: []byte(`{"by":"hand"}`), Workers: 1, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Now: now, RunAt: now}})
	if err != nil {
		t.Fatal(err)
	}
	hand := sub[0].Task
	e.step(sec(5))
	x := e.executor()
	if n, err := x.ClaimOnce(e.ctx, 0); err != nil || n != 1 {
		t.Fatalf("ClaimOnce: %d, %v; want the schedule's run only", n, err)
	}
	runs := e.runs(s.ID)
	if got := <-hits; got != runs[0].TaskID {
		t.Fatalf("request for task %s, want the schedule's run %s", got, runs[0].TaskID)
	}
	deadline := time.Now().Add(60 * time.Second)
	for e.runs(s.ID)[0].Status != rota.StatusSuccess {
		if time.Now().After(deadline) {
			t.Fatalf("run not reported: %v", summary(e.runs(s.ID)))
		}
		time.Sleep(time.Millisecond)
	}
	if n, err := x.ClaimOnce(e.ctx, 0); err != nil || n != 0 {
		t.Fatalf("second ClaimOnce: %d, %v; want nothing", n, err)
	}
	if task := e.task(hand.ID); task.Status != rota.StatusScheduled || len(task.Runs) != 0 {
		t.Fatalf("hand-submitted task: %s with %d runs, want SCHEDULED, untouched", task.Status, len(task.Runs))
	}
	if c := e.claim("some-worker", "hook"); c.TaskID != hand.ID {
		t.Fatalf("ordinary worker claimed %s, want the hand-submitted %s", c.TaskID, hand.ID)
	}
	select {
	case id := <-hits:
		t.Fatalf("a request was sent for task %s", id)
	default:
	}
}

// ClaimOnce claims through the dispatcher and runs in the background.
func TestHTTPExecutorClaimOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	hit := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit <- struct{}{} }))
	defer srv.Close()
	s := e.add(func(s *rota.Schedule) { s.Kind, s.Target = "hook", &rota.Target{URL: srv.URL} })
	e.step(sec(5))
	x := e.executor()
	n, err := x.ClaimOnce(e.ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("ClaimOnce: %d, %v", n, err)
	}
	<-hit
	deadline := time.Now().Add(60 * time.Second)
	for e.runs(s.ID)[0].Status != rota.StatusSuccess {
		if time.Now().After(deadline) {
			t.Fatalf("run not reported: %v", summary(e.runs(s.ID)))
		}
		time.Sleep(time.Millisecond)
	}
}
