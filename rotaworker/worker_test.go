package rotaworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/server"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// bundle is what a test needs: a real in-process server and a client.
type bundle struct {
	url    string
	client *rotaclient.Client
	ctx    context.Context
}

func setup(t *testing.T) *bundle { return setupWith(t, nil) }

// setupWith is setup with a server config changed by mod.
func setupWith(t *testing.T, mod func(*server.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	cfg := server.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Relaxed: true,
		RetryBackoff: 20 * time.Millisecond, ReapInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	url := "http://" + srv.Addr()
	c, err := rotaclient.New(rotaclient.Config{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	return &bundle{url: url, client: c, ctx: tctx}
}

// config is a worker config for tests: fast polls, logs in the test output.
func (b *bundle) config(t *testing.T, id string) rotaworker.Config {
	return rotaworker.Config{
		Server: b.url, ID: id, PollWait: 5 * time.Second, CancelWait: time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// run starts w.Run in the background and returns a channel that yields
// Run's error (to one reader); the cleanup stops the worker hard.
func run(t *testing.T, w *rotaworker.Worker) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		done <- w.Run(context.Background())
		close(returned)
	}()
	t.Cleanup(func() {
		w.StopAndCancel(context.Background())
		<-returned
	})
	return done
}

func (b *bundle) submit(t *testing.T, p rotaclient.TaskParams) string {
	t.Helper()
	res, err := b.client.Submit(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return res.TaskID
}

// waitTask polls the task until it is terminal.
func (b *bundle) waitTask(t *testing.T, id string) *rota.Task {
	t.Helper()
	for {
		task, err := b.client.GetTask(b.ctx, id)
		if err != nil {
			t.Fatalf("get task %s: %v", id, err)
		}
		if task.Status.Terminal() {
			return task
		}
		select {
		case <-b.ctx.Done():
			t.Fatalf("task %s still %s: %+v", id, task.Status, task)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func within(t *testing.T, what string, ch <-chan struct{}, d time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

func TestSucceedWithTypedPayloadAndResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-typed"))
	var got atomic.Pointer[rotaworker.Task[Email]]
	rotaworker.Handle(w, "email", func(ctx context.Context, task *rotaworker.Task[Email]) error {
		got.Store(task)
		task.SetMessage("sent to " + task.Payload.To)
		return task.SetResult(map[string]int{"bytes": 42})
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "email", Priority: rota.PriorityHigh, Payload: Email{To: "a@b", Subject: "hi"}, TimeoutSeconds: 60})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusSuccess || task.Message != "sent to a@b" || string(task.Result) != `{"bytes":42}` {
		t.Errorf("task = %s %q %s", task.Status, task.Message, task.Result)
	}
	tk := got.Load()
	if tk.Payload != (Email{To: "a@b", Subject: "hi"}) || tk.ID != id || tk.Kind != "email" || tk.Priority != rota.PriorityHigh ||
		tk.Attempt != 1 || tk.Timeout != time.Minute || tk.HeartbeatTimeout != 30*time.Second || tk.RunID != task.Runs[0].ID ||
		string(tk.Raw) != `{"to":"a@b","subject":"hi"}` {
		t.Errorf("handler saw %+v", tk)
	}
	if task.Runs[0].WorkerID != "w-typed" {
		t.Errorf("run by %q", task.Runs[0].WorkerID)
	}
}

func TestRawHandlerAndUndecodablePayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-raw"))
	w.Register("raw", rotaworker.HandlerFunc(func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		return task.SetResult(task.Payload)
	}))
	var calls atomic.Int32
	rotaworker.Handle(w, "typed", func(ctx context.Context, task *rotaworker.Task[Email]) error {
		calls.Add(1)
		return nil
	})
	run(t, w)
	raw := b.submit(t, rotaclient.TaskParams{Kind: "raw", Payload: json.RawMessage(`[1,"two"]`)})
	bad := b.submit(t, rotaclient.TaskParams{Kind: "typed", Payload: "not an object", MaxRetries: new(5)})
	if task := b.waitTask(t, raw); task.Status != rota.StatusSuccess || string(task.Result) != `[1,"two"]` {
		t.Errorf("raw task = %s %s", task.Status, task.Result)
	}
	task := b.waitTask(t, bad)
	if task.Status != rota.StatusFailed || len(task.Runs) != 1 || !strings.Contains(task.Message, "decode the payload") || calls.Load() != 0 {
		t.Errorf("undecodable task = %s after %d runs: %q (handler called %d times)", task.Status, len(task.Runs), task.Message, calls.Load())
	}
}

func TestFailureIsRetriedThenFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-fail"))
	var attempts []int
	var mu sync.Mutex
	rotaworker.Handle(w, "flaky", func(ctx context.Context, task *rotaworker.Task[int]) error {
		mu.Lock()
		attempts = append(attempts, task.Attempt)
		mu.Unlock()
		return fmt.Errorf("attempt %d failed", task.Attempt)
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "flaky", Payload: 1, MaxRetries: new(2)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusFailed || len(task.Runs) != 3 || task.Message != "attempt 3 failed" {
		t.Errorf("task = %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Errorf("attempts = %v", attempts)
	}
}

func TestNoRetryFailsAfterOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-noretry"))
	rotaworker.Handle(w, "once", func(ctx context.Context, task *rotaworker.Task[int]) error {
		return rotaworker.NoRetry(errors.New("bad input"))
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "once", Payload: 1, MaxRetries: new(5)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusFailed || len(task.Runs) != 1 || task.Message != "bad input" {
		t.Errorf("task = %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
}

func TestPanicIsReportedWithStack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-panic"))
	rotaworker.Handle(w, "panicky", func(ctx context.Context, task *rotaworker.Task[int]) error {
		panic("kaboom")
	})
	done := run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "panicky", Payload: 1, MaxRetries: new(0)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusFailed || !strings.HasPrefix(task.Message, "panic: kaboom") ||
		!strings.Contains(task.Message, "TestPanicIsReportedWithStack") || !strings.Contains(task.Message, "goroutine ") {
		t.Errorf("task = %s: %q", task.Status, task.Message)
	}
	// The worker is still up and takes the next task.
	id = b.submit(t, rotaclient.TaskParams{Kind: "panicky", Payload: 2, MaxRetries: new(0)})
	if task := b.waitTask(t, id); task.Status != rota.StatusFailed {
		t.Errorf("second task = %s", task.Status)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v", err)
	default:
	}
}

func TestTimeoutCancelsHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-timeout"))
	cause := make(chan error, 1)
	var start atomic.Int64
	rotaworker.Handle(w, "slow", func(ctx context.Context, task *rotaworker.Task[int]) error {
		start.Store(time.Now().UnixNano())
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "slow", Payload: 1, TimeoutSeconds: 1, MaxRetries: new(0)})
	select {
	case err := <-cause:
		if !errors.Is(err, rotaworker.ErrTimeout) {
			t.Errorf("cause = %v", err)
		}
		if d := time.Since(time.Unix(0, start.Load())); d > 1500*time.Millisecond {
			t.Errorf("cancelled %v after the start, want about 1s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler not cancelled")
	}
	task := b.waitTask(t, id)
	if task.Status != rota.StatusTimeout || task.Runs[0].Status != rota.StatusTimeout {
		t.Errorf("task %s, run %s", task.Status, task.Runs[0].Status)
	}
}

func TestRemoteTaskStopCancelsHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-stop"))
	started := make(chan struct{})
	type seen struct {
		cause, progress error
	}
	out := make(chan seen, 1)
	rotaworker.Handle(w, "long", func(ctx context.Context, task *rotaworker.Task[int]) error {
		if err := task.Progress(ctx, "starting"); err != nil {
			return err
		}
		close(started)
		<-ctx.Done()
		out <- seen{context.Cause(ctx), task.Progress(context.Background(), "still here?")}
		return ctx.Err()
	})
	run(t, w)
	// heartbeat timeout 3 s: heartbeats every second.
	id := b.submit(t, rotaclient.TaskParams{Kind: "long", Payload: 1, HeartbeatTimeoutSeconds: 3})
	within(t, "handler start", started, 10*time.Second)
	stopAt := time.Now()
	if _, err := b.client.StopTask(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-out:
		if d := time.Since(stopAt); d > 1800*time.Millisecond {
			t.Errorf("cancelled %v after the stop, want within one heartbeat interval (1s)", d)
		}
		if !errors.Is(s.cause, rotaworker.ErrTaskStopped) || !errors.Is(s.progress, rotaworker.ErrTaskStopped) {
			t.Errorf("cause %v, progress %v", s.cause, s.progress)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler not cancelled")
	}
	task := b.waitTask(t, id)
	if task.Status != rota.StatusCanceled || task.Runs[0].Status != rota.StatusCanceled {
		t.Errorf("task %s, run %s", task.Status, task.Runs[0].Status)
	}
}

// gatedTransport holds heartbeats while its gate is closed.
type gatedTransport struct {
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (g *gatedTransport) close() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedTransport) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gatedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil && strings.HasSuffix(r.URL.Path, "/heartbeat") {
		select {
		case <-gate:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestLostLeaseCancelsHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gt := &gatedTransport{}
	c, err := rotaclient.New(rotaclient.Config{BaseURL: b.url, HTTPClient: &http.Client{Transport: gt}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t, "w-lease")
	cfg.Client = c
	w := rotaworker.New(cfg)
	type seen struct {
		attempt int
		at      time.Time
		cause   error
	}
	out := make(chan seen, 2)
	var claimedAt atomic.Int64
	rotaworker.Handle(w, "leased", func(ctx context.Context, task *rotaworker.Task[int]) error {
		if task.Attempt > 1 {
			out <- seen{attempt: task.Attempt}
			return nil
		}
		claimedAt.Store(time.Now().UnixNano())
		<-ctx.Done()
		out <- seen{task.Attempt, time.Now(), context.Cause(ctx)}
		gt.open()
		return ctx.Err()
	})
	gt.close() // heartbeats hang: the lease (1 s) lapses
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "leased", Payload: 1, HeartbeatTimeoutSeconds: 1, MaxRetries: new(2)})
	select {
	case s := <-out:
		if !errors.Is(s.cause, rota.ErrLeaseLost) {
			t.Errorf("cause = %v, want lease lost", s.cause)
		}
		// The lease ends 1 s after the claim; one heartbeat interval is 1/3 s.
		if d := s.at.Sub(time.Unix(0, claimedAt.Load())); d > 1400*time.Millisecond {
			t.Errorf("cancelled %v after the claim, want within a heartbeat interval of the lease's end (1s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler not cancelled")
	}
	// The server expires the run and the task runs again.
	task := b.waitTask(t, id)
	if task.Status != rota.StatusSuccess || len(task.Runs) != 2 || task.Runs[0].Status != rota.StatusTimeout {
		t.Errorf("task %s, runs %+v", task.Status, task.Runs)
	}
}

func TestPerKindConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-conc")
	cfg.Concurrency = 2 // the default, for "b"
	w := rotaworker.New(cfg)
	type gauge struct{ cur, peak atomic.Int32 }
	var ga, gb gauge
	body := func(g *gauge) func(context.Context, *rotaworker.Task[int]) error {
		return func(ctx context.Context, task *rotaworker.Task[int]) error {
			n := g.cur.Add(1)
			defer g.cur.Add(-1)
			for {
				p := g.peak.Load()
				if n <= p || g.peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(60 * time.Millisecond)
			return nil
		}
	}
	rotaworker.Handle(w, "a", body(&ga), rotaworker.HandlerOptions{Concurrency: 3})
	rotaworker.Handle(w, "b", body(&gb))
	run(t, w)
	var batch []rotaclient.TaskParams
	for i := range 12 {
		batch = append(batch, rotaclient.TaskParams{Kind: "a", Payload: i}, rotaclient.TaskParams{Kind: "b", Payload: i})
	}
	res, err := b.client.SubmitBatch(b.ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if task := b.waitTask(t, r.TaskID); task.Status != rota.StatusSuccess {
			t.Errorf("task %s %s", r.TaskID, task.Status)
		}
	}
	if p := ga.peak.Load(); p != 3 {
		t.Errorf("kind a: peak %d handlers at once, want 3", p)
	}
	if p := gb.peak.Load(); p != 2 {
		t.Errorf("kind b: peak %d handlers at once, want 2", p)
	}
}

func TestGracefulStopFinishesRunningHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-grace"))
	started := make(chan struct{})
	rotaworker.Handle(w, "job", func(ctx context.Context, task *rotaworker.Task[int]) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		return ctx.Err()
	})
	done := run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "job", Payload: 1})
	within(t, "handler start", started, 10*time.Second)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if task := b.waitTask(t, id); task.Status != rota.StatusSuccess {
		t.Errorf("task %s: %s", task.Status, task.Message)
	}
}

func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startedA := make(chan struct{})
	startedB := make(chan struct{})
	causeA := make(chan error, 1)
	handler := func(ctx context.Context, task *rotaworker.Task[int]) error {
		if task.Attempt == 1 {
			close(startedA)
			<-ctx.Done()
			causeA <- context.Cause(ctx)
			return ctx.Err()
		}
		close(startedB)
		return nil
	}
	a := rotaworker.New(b.config(t, "w-a"))
	rotaworker.Handle(a, "handover", handler)
	doneA := run(t, a)
	// The lease is 30 s: only the hand-over can make the task run again soon.
	id := b.submit(t, rotaclient.TaskParams{Kind: "handover", Payload: 1, HeartbeatTimeoutSeconds: 30})
	within(t, "first run", startedA, 10*time.Second)
	bw := rotaworker.New(b.config(t, "w-b"))
	rotaworker.Handle(bw, "handover", handler)
	run(t, bw)

	t0 := time.Now()
	ctx, cancel := context.WithTimeout(b.ctx, 200*time.Millisecond) // the grace period
	defer cancel()
	if err := a.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want the grace's deadline", err)
	}
	if err := <-doneA; err != nil {
		t.Errorf("Run = %v", err)
	}
	if err := <-causeA; !errors.Is(err, rotaworker.ErrWorkerStopping) {
		t.Errorf("cause = %v", err)
	}
	within(t, "second worker start", startedB, 2*time.Second)
	if d := time.Since(t0); d > 1500*time.Millisecond {
		t.Errorf("second worker started %v after Stop, want about 1 s at most", d)
	}
	task := b.waitTask(t, id)
	if task.Status != rota.StatusSuccess || len(task.Runs) != 2 || task.Runs[0].WorkerID != "w-a" || task.Runs[1].WorkerID != "w-b" ||
		!strings.Contains(task.Runs[0].Message, "stopped before the run finished") {
		t.Errorf("task %s, runs %+v", task.Status, task.Runs)
	}
}

func TestStopAndCancelReleasesRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-hard"))
	started := make(chan struct{})
	cause := make(chan error, 1)
	rotaworker.Handle(w, "job", func(ctx context.Context, task *rotaworker.Task[int]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	done := run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "job", Payload: 1, Delay: 0})
	within(t, "handler start", started, 10*time.Second)
	t0 := time.Now()
	if err := w.StopAndCancel(b.ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("StopAndCancel took %v", d)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := <-cause; !errors.Is(err, rotaworker.ErrWorkerStopping) {
		t.Errorf("cause = %v", err)
	}
	task, err := b.client.GetTask(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// Released, not failed: the task is claimable at once and no retry is spent.
	if task.Status != rota.StatusScheduled || len(task.Runs) != 1 || task.Runs[0].Status != rota.StatusCanceled {
		t.Errorf("task %s, runs %+v", task.Status, task.Runs)
	}
}

func TestRemoteWorkerStopDrains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-drain")
	cfg.Grace = 10 * time.Second
	w := rotaworker.New(cfg)
	started := make(chan struct{})
	release := make(chan struct{})
	rotaworker.Handle(w, "job", func(ctx context.Context, task *rotaworker.Task[int]) error {
		close(started)
		<-release
		return ctx.Err()
	})
	done := run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "job", Payload: 1, HeartbeatTimeoutSeconds: 3})
	within(t, "handler start", started, 10*time.Second)
	if _, err := b.client.StopWorker(b.ctx, "w-drain"); err != nil {
		t.Fatal(err)
	}
	// The next heartbeat (every second) says drain; the handler may finish.
	time.Sleep(1500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Run returned %v before its handler finished", err)
	default:
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after a remote stop")
	}
	if task := b.waitTask(t, id); task.Status != rota.StatusSuccess {
		t.Errorf("task %s: %s", task.Status, task.Message)
	}
	ws, err := b.client.ListWorkers(b.ctx)
	if err != nil || len(ws) != 1 || ws[0].Status != rota.WorkerStopped {
		t.Errorf("workers = %+v, %v", ws, err)
	}
}

func TestRemoteStopOfIdleWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-idle"))
	rotaworker.Handle(w, "job", func(ctx context.Context, task *rotaworker.Task[int]) error { return nil })
	done := run(t, w)
	// Wait for the worker to be known (its first claim).
	for {
		ws, _ := b.client.ListWorkers(b.ctx)
		if len(ws) == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := b.client.StopWorker(b.ctx, "w-idle"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("an idle worker did not stop on a remote stop")
	}
}

func TestRunContextCancelIsGraceful(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-ctx"))
	started := make(chan struct{})
	rotaworker.Handle(w, "job", func(ctx context.Context, task *rotaworker.Task[int]) error {
		close(started)
		time.Sleep(200 * time.Millisecond)
		return ctx.Err() // nil: the handler's ctx is not Run's
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	id := b.submit(t, rotaclient.TaskParams{Kind: "job", Payload: 1})
	within(t, "handler start", started, 10*time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if task := b.waitTask(t, id); task.Status != rota.StatusSuccess {
		t.Errorf("task %s: %s", task.Status, task.Message)
	}
}

func TestHandlerIgnoringCancellation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-stubborn")
	cfg.CancelWait = 100 * time.Millisecond
	w := rotaworker.New(cfg)
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	rotaworker.Handle(w, "job", func(ctx context.Context, task *rotaworker.Task[int]) error {
		close(started)
		<-release // ignores ctx
		return nil
	})
	done := run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "job", Payload: 1})
	within(t, "handler start", started, 10*time.Second)
	if err := w.StopAndCancel(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	task, _ := b.client.GetTask(b.ctx, id)
	if len(task.Runs) != 1 || task.Runs[0].Status != rota.StatusCanceled || !strings.Contains(task.Runs[0].Message, "did not return") {
		t.Errorf("runs %+v", task.Runs)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	if err := rotaworker.New(rotaworker.Config{}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no handler") {
		t.Errorf("Run without handlers = %v", err)
	}
	w := rotaworker.New(rotaworker.Config{Server: "not a url"})
	rotaworker.Handle(w, "k", func(context.Context, *rotaworker.Task[int]) error { return nil })
	if err := w.Run(context.Background()); err == nil {
		t.Error("Run with a bad server URL: no error")
	}
	w = rotaworker.New(rotaworker.Config{})
	rotaworker.Handle(w, "k", func(context.Context, *rotaworker.Task[int]) error { return nil })
	if err := w.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Run = %v", err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Errorf("Run after Stop = %v", err)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Error("second Run: no error")
	}
}

func TestRegisterPanicsOnMisuse(t *testing.T) {
	t.Parallel()
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	w := rotaworker.New(rotaworker.Config{})
	h := func(context.Context, *rotaworker.Task[int]) error { return nil }
	rotaworker.Handle(w, "k", h)
	mustPanic("duplicate kind", func() { rotaworker.Handle(w, "k", h) })
	mustPanic("bad kind", func() { rotaworker.Handle(w, "bad kind", h) })
	mustPanic("nil handler", func() { w.Register("k2", nil) })
}

func TestDefaultID(t *testing.T) {
	t.Parallel()
	a, b := rotaworker.DefaultID(), rotaworker.DefaultID()
	if a == b || !regexp.MustCompile(`^.+-\d+-[0-9a-f]{6}$`).MatchString(a) {
		t.Errorf("DefaultID = %q, %q", a, b)
	}
	if w := rotaworker.New(rotaworker.Config{}); w.ID() == "" {
		t.Error("no default id")
	}
}

func TestNoRetry(t *testing.T) {
	t.Parallel()
	base := errors.New("x")
	err := fmt.Errorf("wrapped: %w", rotaworker.NoRetry(base))
	if !rotaworker.IsNoRetry(err) || !errors.Is(err, base) || rotaworker.IsNoRetry(base) || rotaworker.NoRetry(nil) != nil {
		t.Error("NoRetry does not wrap as documented")
	}
}
