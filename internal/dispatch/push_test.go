package dispatch

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// fakePushWorker is a push worker over HTTP: it answers health checks
// while healthy and each delivery as answer says, recording them.
type fakePushWorker struct {
	srv     *httptest.Server
	healthy atomic.Bool
	checks  atomic.Int64 // health checks received
	answer  atomic.Value // func(rotaapi.PushDelivery) (status int, body string)

	mu  sync.Mutex
	got []rotaapi.PushDelivery
}

func newFakePushWorker(t *testing.T) *fakePushWorker {
	t.Helper()
	w := &fakePushWorker{}
	w.healthy.Store(true)
	w.answer.Store(func(rotaapi.PushDelivery) (int, string) { return http.StatusAccepted, "" })
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hook/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		w.checks.Add(1)
		if !w.healthy.Load() {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("POST /hook", func(rw http.ResponseWriter, r *http.Request) {
		var d rotaapi.PushDelivery
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &d); err != nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.got = append(w.got, d)
		w.mu.Unlock()
		status, body := w.answer.Load().(func(rotaapi.PushDelivery) (int, string))(d)
		rw.WriteHeader(status)
		_, _ = io.WriteString(rw, body)
	})
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

func (w *fakePushWorker) address() string { return w.srv.URL + "/hook" }

// deliveries returns the task ids delivered so far.
func (w *fakePushWorker) deliveries() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(w.got))
	for i, d := range w.got {
		out[i] = d.TaskID
	}
	return out
}

// pushSetup is a dispatcher fixture with a push dispatcher (health checks
// every 10 s of the fake clock, lost after 2 failures) and a push kind "p".
func pushSetup(t *testing.T) (*fixture, *Push) {
	t.Helper()
	f := setup(t, nil)
	p, err := NewPush(PushConfig{Dispatcher: f.d, Client: &http.Client{Timeout: 5 * time.Second},
		HealthInterval: 10 * time.Second, HealthTimeout: 2 * time.Second, HealthFailures: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if _, err := f.d.KindUpsert(context.Background(), store.KindUpsertParams{Name: "p", Dispatch: new(rota.DispatchPush)}); err != nil {
		t.Fatal(err)
	}
	return f, p
}

func (f *fixture) register(id string, w *fakePushWorker, capacity int, kinds ...string) {
	f.t.Helper()
	if _, err := f.d.RegisterWorker(context.Background(), store.WorkerRegisterParams{
		WorkerID: id, Kinds: kinds, Address: w.address(), Capacity: capacity,
	}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) submitWith(kind string, mod func(*store.TaskInsertParams)) *rota.Task {
	f.t.Helper()
	now := f.clock.Now()
	p := store.TaskInsertParams{ID: f.ids.New(now), Kind: kind, Priority: rota.PriorityMid, Payload: json.RawMessage(`{"n":1}`),
		RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now}
	mod(&p)
	res, err := f.d.Submit(context.Background(), []store.TaskInsertParams{p})
	if err != nil {
		f.t.Fatal(err)
	}
	return res[0].Task
}

// round runs one push round and waits for its deliveries to be answered.
func round(p *Push) {
	p.RunOnce(context.Background())
	p.deliveries.Wait()
}

func (f *fixture) task(id string) *rota.Task {
	f.t.Helper()
	task, err := f.st.TaskGet(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return task
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

func TestPushDeliversOnePerFreeSlotByPriority(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	w := newFakePushWorker(t)
	f.register("w1", w, 2, "p")
	low := f.submitWith("p", func(p *store.TaskInsertParams) { p.Priority = rota.PriorityLow })
	high := f.submitWith("p", func(p *store.TaskInsertParams) { p.Priority = rota.PriorityHigh })
	mid := f.submit("p", f.clock.Now())
	pull := f.submit("other", f.clock.Now()) // a pull kind: never pushed
	round(p)
	wantIDs(t, "first round", sorted(w.deliveries()), sorted([]string{high.ID, mid.ID})...)
	d := w.got[0]
	if d.TaskID == mid.ID {
		d = w.got[1]
	}
	if d.WorkerID != "w1" || d.Kind != "p" || d.RunID == "" || string(d.Task) != `{"n":1}` || d.HeartbeatTimeoutSeconds != 30 ||
		d.ServerTimeMs != f.clock.Now().UnixMilli() || d.Attempt != 1 {
		t.Fatalf("delivery = %+v", d)
	}
	round(p)
	wantIDs(t, "a round with no free slot", sorted(w.deliveries()), sorted([]string{high.ID, mid.ID})...)
	if _, err := f.d.Complete(context.Background(), store.RunCompleteParams{RunID: d.RunID, WorkerID: "w1", Success: true}); err != nil {
		t.Fatal(err)
	}
	round(p)
	wantIDs(t, "after a report", w.deliveries()[2:], low.ID)
	if s := f.task(pull.ID).Status; s != rota.StatusScheduled {
		t.Fatalf("pull task: %s, want SCHEDULED", s)
	}
}

func TestPushAnswerWithOutcome(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	w := newFakePushWorker(t)
	w.answer.Store(func(d rotaapi.PushDelivery) (int, string) {
		if string(d.Task) == `{}` {
			return http.StatusOK, `{"outcome":"succeed","message":"fine","result":{"x":1}}`
		}
		return http.StatusOK, `{"outcome":"fail","message":"bad","retry":false}`
	})
	f.register("w1", w, 2, "p")
	ok := f.submit("p", f.clock.Now())
	bad := f.submitWith("p", func(p *store.TaskInsertParams) { p.Payload = json.RawMessage(`{"n":2}`) })
	round(p)
	got := f.task(ok.ID)
	if got.Status != rota.StatusSuccess || string(got.Result) != `{"x":1}` || got.Message != "fine" {
		t.Fatalf("task answered succeed: %s %s %q", got.Status, got.Result, got.Message)
	}
	if got := f.task(bad.ID); got.Status != rota.StatusFailed || got.Message != "bad" {
		t.Fatalf("task answered fail without retry: %s %q", got.Status, got.Message)
	}
}

func TestPushBusyReleases(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	w := newFakePushWorker(t)
	w.answer.Store(func(rotaapi.PushDelivery) (int, string) { return http.StatusServiceUnavailable, "" })
	f.register("w1", w, 1, "p")
	task := f.submit("p", f.clock.Now())
	round(p)
	got := f.task(task.ID)
	if got.Status != rota.StatusScheduled || len(got.Runs) != 1 || got.Runs[0].Status != rota.StatusCanceled {
		t.Fatalf("after a busy answer: %s, runs %+v; want SCHEDULED with one CANCELED run", got.Status, got.Runs)
	}
	if !p.Healthy("w1") {
		t.Fatal("a busy worker left the pool")
	}
	round(p) // busy until its next check: no loop of refusals
	if n := len(w.deliveries()); n != 1 {
		t.Fatalf("deliveries to a busy worker before its next check: %d, want 1", n)
	}
	f.clock.Advance(10 * time.Second)
	round(p)
	if n := len(w.deliveries()); n != 2 {
		t.Fatalf("deliveries once its check answered: %d, want 2", n)
	}
}

func TestPushHonoursPinning(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	a, b := newFakePushWorker(t), newFakePushWorker(t)
	f.register("a", a, 5, "p")
	f.register("b", b, 5, "p")
	pinned := f.submitWith("p", func(p *store.TaskInsertParams) { p.WorkerIDs = []string{"b"} })
	round(p)
	wantIDs(t, "a's deliveries", a.deliveries())
	wantIDs(t, "b's deliveries", b.deliveries(), pinned.ID)
}

func TestPushLostWorkerRedispatched(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	a, b := newFakePushWorker(t), newFakePushWorker(t)
	f.register("a", a, 1, "p")
	task := f.submit("p", f.clock.Now())
	round(p)
	wantIDs(t, "a's deliveries", a.deliveries(), task.ID)
	f.register("b", b, 1, "p")
	a.healthy.Store(false)
	f.clock.Advance(10 * time.Second)
	round(p) // a's first failed check: still in the pool
	wantIDs(t, "b's deliveries after one failed check of a", b.deliveries())
	if !p.Healthy("b") || p.Healthy("a") {
		t.Fatalf("healthy: a %v, b %v; want a out, b in", p.Healthy("a"), p.Healthy("b"))
	}
	f.clock.Advance(10 * time.Second)
	round(p) // a's second: lost, its run ended and the task pushed to b
	wantIDs(t, "b's deliveries once a is lost", b.deliveries(), task.ID)
	got := f.task(task.ID)
	if len(got.Runs) != 2 || got.Runs[0].Status != rota.StatusFailed || got.Runs[1].WorkerID != "b" || got.Status != rota.StatusRunning {
		t.Fatalf("task after a was lost: %s, runs %s", got.Status, runsOf(got))
	}
	if b.got[0].Attempt != 2 {
		t.Fatalf("re-dispatched attempt = %d, want 2", b.got[0].Attempt)
	}
	a.healthy.Store(true)
	f.clock.Advance(10 * time.Second)
	round(p)
	if !p.Healthy("a") {
		t.Fatal("a recovered but is not back in the pool")
	}
	again := f.submit("p", f.clock.Now())
	round(p)
	wantIDs(t, "a's deliveries once back", a.deliveries(), task.ID, again.ID)
}

func TestPushHealthyWorkerListsActive(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	w := newFakePushWorker(t)
	f.register("w1", w, 1, "p")
	f.clock.Advance(store.WorkerLiveness + time.Minute)
	round(p)
	ws, err := f.st.WorkerList(context.Background(), f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Status != rota.WorkerActive {
		t.Fatalf("workers = %+v, want w1 active", ws)
	}
}

func TestPushOnlyLeaderDelivers(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	w := newFakePushWorker(t)
	f.register("w1", w, 1, "p")
	f.submit("p", f.clock.Now())
	f.d.SetLeader(false)
	round(p)
	wantIDs(t, "a follower's deliveries", w.deliveries())
}

func TestPushLoopWakesOnSubmit(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	w := newFakePushWorker(t)
	f.register("w1", w, 1, "p")
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The fake clock never moves: only the submit's wake-up can deliver.
	deadline := time.Now().Add(10 * time.Second)
	for f.d.Waiting("p") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the push loop never waited for kind p")
		}
		time.Sleep(time.Millisecond)
	}
	task := f.submit("p", f.clock.Now())
	for len(w.deliveries()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the submit did not wake the push loop")
		}
		time.Sleep(time.Millisecond)
	}
	wantIDs(t, "deliveries", w.deliveries(), task.ID)
}

func sorted(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}

func TestPushStoppedWorkerGetsNothing(t *testing.T) {
	t.Parallel()
	f, p := pushSetup(t)
	w := newFakePushWorker(t)
	f.register("w1", w, 1, "p")
	round(p)
	if _, err := f.st.WorkerDeregister(context.Background(), "w1", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.submit("p", f.clock.Now())
	f.clock.Advance(10 * time.Second)
	round(p)
	wantIDs(t, "deliveries to a deregistered worker", w.deliveries())
	if n := w.checks.Load(); n != 1 {
		t.Fatalf("health checks = %d, want 1 (none once it deregistered)", n)
	}
	f.register("w1", w, 1, "p") // back
	round(p)
	if n := len(w.deliveries()); n != 1 || w.checks.Load() != 2 {
		t.Fatalf("after registering again: %d deliveries, %d checks; want 1, 2", n, w.checks.Load())
	}
}

func runsOf(t *rota.Task) string {
	s := ""
	for _, r := range t.Runs {
		s += string(r.Status) + "@" + r.WorkerID + " "
	}
	return s
}
