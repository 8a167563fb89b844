package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

type fixture struct {
	t     *testing.T
	clock *clock.Fake
	st    store.Store
	d     *Dispatcher
	ids   rota.IDGenerator
}

func setup(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fc := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg := Config{Store: st, Clock: fc, Jitter: func() float64 { return 0 }, SafetyPoll: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return &fixture{t: t, clock: fc, st: st, d: d}
}

func (f *fixture) submit(kind string, runAt time.Time) *rota.Task {
	f.t.Helper()
	now := f.clock.Now()
	res, err := f.d.Submit(context.Background(), []store.TaskInsertParams{{
		ID: f.ids.New(now), Kind: kind, Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
		RunAt: runAt, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now,
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	return res[0].Task
}

// claimAsync starts a long-poll claim and returns its result channel once
// it is waiting on the dispatcher.
func (f *fixture) claimAsync(worker, kind string, wait time.Duration) <-chan store.TaskClaimResult {
	f.t.Helper()
	return f.claimAsyncReq(ClaimRequest{WorkerID: worker, Kinds: []string{kind}, Max: 1, Wait: wait})
}

// claimAsyncReq is claimAsync for any request of one kind.
func (f *fixture) claimAsyncReq(r ClaimRequest) <-chan store.TaskClaimResult {
	f.t.Helper()
	kind := r.Kinds[0]
	before := f.d.Waiting(kind)
	out := make(chan store.TaskClaimResult, 1)
	go func() {
		res, err := f.d.Claim(context.Background(), r)
		if err != nil {
			f.t.Error(err)
		}
		out <- res
	}()
	f.eventually("claim waiting", func() bool { return f.d.Waiting(kind) > before })
	return out
}

// submitPinned submits a task of kind, due now, pinned to workers.
func (f *fixture) submitPinned(kind string, workers ...string) *rota.Task {
	f.t.Helper()
	now := f.clock.Now()
	res, err := f.d.Submit(context.Background(), []store.TaskInsertParams{{
		ID: f.ids.New(now), Kind: kind, Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
		RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now, WorkerIDs: workers,
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	return res[0].Task
}

// noResult fails the test if ch yields within a short while.
func noResult(t *testing.T, what string, ch <-chan store.TaskClaimResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned: %+v", what, r)
	case <-time.After(100 * time.Millisecond):
	}
}

func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("timed out waiting for %s", what)
}

func receive(t *testing.T, ch <-chan store.TaskClaimResult) store.TaskClaimResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("claim did not return")
	}
	return store.TaskClaimResult{}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	d, err := New(Config{Store: nopStore{}, BackoffBase: time.Second, BackoffMax: 10 * time.Second, Jitter: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 30: 10 * time.Second} {
		if got := d.Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want)
		}
	}
	d.cfg.Jitter = func() float64 { return 0.999 }
	if got := d.Backoff(1); got <= time.Second || got > 1200*time.Millisecond {
		t.Errorf("Backoff(1) with max jitter = %v, want in (1s, 1.2s]", got)
	}
}

// nopStore satisfies store.Store for tests that never touch it.
type nopStore struct{ store.Store }

func TestSubmitWakesWaitingClaim(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	got := f.claimAsync("w1", "k", 30*time.Second)
	task := f.submit("k", time.Time{})
	// The fake clock never moves: only the submit's wake-up can return it.
	res := receive(t, got)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("claim = %+v, want task %s", res, task.ID)
	}
}

func TestSubmitWakesOnlyAsManyAsTasks(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	a := f.claimAsync("w1", "k", 30*time.Second)
	b := f.claimAsync("w2", "k", 30*time.Second)
	f.submit("k", time.Time{})
	first := receive(t, a)
	if len(first.Runs) != 1 {
		t.Fatalf("the first waiter got %+v", first)
	}
	select {
	case r := <-b:
		t.Fatalf("a second waiter was woken for one task: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if n := f.d.Waiting("k"); n != 1 {
		t.Fatalf("%d waiting, want the second still waiting", n)
	}
}

func TestDelayedTaskWakesWaiterAtDueTime(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	if err := f.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := f.claimAsync("w1", "k", time.Minute)
	due := f.clock.Now().Add(5 * time.Second)
	task := f.submit("k", due)
	// Before the due time nothing is handed out.
	f.clock.Advance(4 * time.Second)
	select {
	case r := <-got:
		t.Fatalf("claim returned before the due time: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	f.clock.Set(due)
	res := receive(t, got)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("claim at the due time = %+v, want %s", res, task.ID)
	}
}

func TestReapOnceTakesOverSilentWorker(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.ReapInterval = time.Second })
	task := f.submit("k", time.Time{})
	res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "silent", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	// Within the lease the reaper does nothing and sleeps until the lease
	// ends, at most ReapInterval.
	if sleep := f.d.ReapOnce(context.Background()); sleep != time.Second {
		t.Fatalf("reaper sleep = %v, want the 1s cap", sleep)
	}
	waiter := f.claimAsync("w2", "k", time.Minute)
	f.clock.Advance(31 * time.Second)
	f.d.ReapOnce(context.Background())
	got := receive(t, waiter)
	if len(got.Runs) != 1 || got.Runs[0].TaskID != task.ID || got.Runs[0].Attempt != 2 {
		t.Fatalf("take-over claim = %+v, want %s attempt 2", got, task.ID)
	}
	if _, err := f.d.Heartbeat(context.Background(), res.Runs[0].RunID, "silent", ""); !errors.Is(err, rota.ErrLeaseLost) {
		t.Fatalf("silent worker's heartbeat: %v, want lease lost", err)
	}
}

func TestRateLimitedClaimWaitsForToken(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	rate := 1.0
	if _, err := f.d.KindUpsert(context.Background(), store.KindUpsertParams{Name: "k", Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	f.submit("k", time.Time{})
	f.submit("k", time.Time{})
	if res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "w", Kinds: []string{"k"}, Max: 5}); err != nil || len(res.Runs) != 1 {
		t.Fatalf("first claim: %+v, %v; want the single token", res, err)
	}
	got := f.claimAsync("w", "k", time.Minute)
	f.eventually("a timer for the next token", func() bool { return f.clock.Timers() > 0 })
	f.clock.Advance(time.Second + 5*time.Millisecond)
	if res := receive(t, got); len(res.Runs) != 1 {
		t.Fatalf("claim after a token came due: %+v", res)
	}
}

func TestStopReleasesWaitingClaims(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	got := f.claimAsync("w1", "k", time.Minute)
	f.d.Stop()
	if res := receive(t, got); len(res.Runs) != 0 {
		t.Fatalf("claim during stop got %+v", res)
	}
	// After Stop no lease is granted.
	f.submit("k", time.Time{})
	res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "w1", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 0 {
		t.Fatalf("claim after Stop: %+v, %v; want nothing", res, err)
	}
}

// A PinnedOnly claim (the HTTP executor's) is not woken by the submit of an
// unpinned task, and does not use up its wake-up: the worker waiting after
// it gets the task at once.
func TestPinnedOnlyClaimLeavesUnpinnedWakeUps(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	pinnedOnly := f.claimAsyncReq(ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1, Wait: 30 * time.Second, PinnedOnly: true})
	worker := f.claimAsync("w1", "k", 30*time.Second)
	task := f.submit("k", time.Time{})
	// The fake clock never moves: only the submit's wake-up can return it.
	if res := receive(t, worker); len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("worker's claim = %+v, want task %s", res, task.ID)
	}
	noResult(t, "the PinnedOnly claim", pinnedOnly)

	// A task pinned to it wakes it.
	pinned := f.submitPinned("k", "exec")
	if res := receive(t, pinnedOnly); len(res.Runs) != 1 || res.Runs[0].TaskID != pinned.ID {
		t.Fatalf("PinnedOnly claim = %+v, want task %s", res, pinned.ID)
	}
}

// A PinnedOnly claim never gets an unpinned task, even when it is the only
// waiter and woken for all.
func TestPinnedOnlyClaimSkipsUnpinned(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	task := f.submit("k", time.Time{})
	pinnedOnly := f.claimAsyncReq(ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1, Wait: 30 * time.Second, PinnedOnly: true})
	f.d.Notify("k", -1)
	noResult(t, "the PinnedOnly claim", pinnedOnly)
	res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("ordinary claim by the same worker = %+v, %v; want task %s", res, err, task.ID)
	}
}

// A notification from another node may be about a pinned task: it wakes
// the PinnedOnly claims of the kind as well as some ordinary ones.
func TestRemoteNotificationWakesPinnedOnlyClaim(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	// More ordinary waiters than a notification wakes, ahead of it.
	var workers []<-chan store.TaskClaimResult
	for i := range remoteWake + 1 {
		workers = append(workers, f.claimAsync(fmt.Sprintf("w%d", i), "k", 30*time.Second))
	}
	pinnedOnly := f.claimAsyncReq(ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1, Wait: 30 * time.Second, PinnedOnly: true})
	// Written by "another node": straight into the store, no local wake-up.
	now := f.clock.Now()
	res, err := f.st.TaskInsert(context.Background(), store.TaskInsertParams{
		ID: f.ids.New(now), Kind: "k", Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
		RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now, WorkerIDs: []string{"exec"},
	})
	if err != nil {
		t.Fatal(err)
	}
	noResult(t, "the PinnedOnly claim before the notification", pinnedOnly)
	f.d.remote(store.Notification{Kind: "k"})
	if got := receive(t, pinnedOnly); len(got.Runs) != 1 || got.Runs[0].TaskID != res.Task.ID {
		t.Fatalf("PinnedOnly claim = %+v, want task %s", got, res.Task.ID)
	}
	for _, w := range workers {
		noResult(t, "a worker's claim", w)
	}
}

// cancelOnClaim is a store whose claims end the caller's context once
// they have committed: the caller "hangs up" while its claim is granted.
type cancelOnClaim struct {
	store.Store
	cancel context.CancelFunc
}

func (c *cancelOnClaim) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	res, err := c.Store.TaskClaim(ctx, p)
	c.cancel()
	return res, err
}

func TestAbandonedClaimIsReleased(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	task := f.submit("k", time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := New(Config{Store: &cancelOnClaim{Store: f.st, cancel: cancel}, Clock: f.clock, SafetyPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	res, err := d.Claim(ctx, ClaimRequest{WorkerID: "gone", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 0 {
		t.Fatalf("abandoned claim = %+v, %v; want nothing handed out", res, err)
	}
	got, err := f.st.TaskGet(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != rota.StatusScheduled || len(got.Runs) != 1 || got.Runs[0].Status != rota.StatusCanceled {
		t.Fatalf("after the abandoned claim: task %s with runs %+v, want SCHEDULED with one CANCELED run", got.Status, got.Runs)
	}
	again, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "w2", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(again.Runs) != 1 || again.Runs[0].TaskID != task.ID || again.Runs[0].Attempt != 2 {
		t.Fatalf("next claim = %+v, %v; want the task again", again, err)
	}
}

// inFlight is a store that counts the RunComplete calls in flight.
type inFlight struct {
	store.Store
	mu       sync.Mutex
	now, max int
}

func (s *inFlight) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	s.mu.Lock()
	s.now++
	s.max = max(s.max, s.now)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	return s.Store.RunComplete(ctx, p)
}

// TestCompleteMany reports more runs than CompleteMany runs at once, with
// failures among them: each answer is at the index of its report, each
// failure its own, and the reports went to the store concurrently.
func TestCompleteMany(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	var (
		evMu   sync.Mutex
		events = map[string]rota.Status{} // run → status of its last run event
	)
	counting := &inFlight{Store: f.st}
	d, err := New(Config{Store: counting, Clock: f.clock, SafetyPoll: time.Hour, Events: func(ev rota.Event) {
		if ev.Type == rota.EventRun {
			evMu.Lock()
			events[ev.RunID] = ev.Status
			evMu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	const n = completeManyConcurrency + 88
	now := f.clock.Now()
	ins := make([]store.TaskInsertParams, n)
	for i := range ins {
		ins[i] = store.TaskInsertParams{ID: f.ids.New(now), Kind: "many", Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
			RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now}
	}
	if _, err := d.Submit(context.Background(), ins); err != nil {
		t.Fatal(err)
	}
	claimed, err := d.Claim(context.Background(), ClaimRequest{WorkerID: "w1", Kinds: []string{"many"}, Max: n})
	if err != nil || len(claimed.Runs) != n {
		t.Fatalf("claim: %d runs, %v; want %d", len(claimed.Runs), err, n)
	}

	// Reports in reverse claim order: every 10th names an unknown run, the
	// 7th comes from another worker, the others succeed, fail or release.
	ps := make([]store.RunCompleteParams, n)
	want := make([]error, n)
	wantStatus := make([]rota.Status, n)
	for i := range ps {
		run := claimed.Runs[n-1-i]
		p := store.RunCompleteParams{RunID: run.RunID, WorkerID: "w1"}
		switch {
		case i%10 == 0:
			p.RunID = fmt.Sprintf("%032x", i+1)
			want[i] = rota.ErrNotFound
		case i == 7:
			p.WorkerID = "w2"
			want[i] = rota.ErrLeaseLost
		case i%3 == 0:
			p.Success = true
			wantStatus[i] = rota.StatusSuccess
		case i%3 == 1:
			p.Retry = false
			wantStatus[i] = rota.StatusFailed
		default:
			p.Release = true
			wantStatus[i] = rota.StatusCanceled
		}
		ps[i] = p
	}
	tasks, errs := d.CompleteMany(context.Background(), ps)
	if len(tasks) != n || len(errs) != n {
		t.Fatalf("%d tasks and %d errors for %d reports", len(tasks), len(errs), n)
	}
	for i, p := range ps {
		if want[i] != nil {
			if !errors.Is(errs[i], want[i]) || tasks[i] != nil {
				t.Errorf("report %d: %v, %v; want %v", i, tasks[i], errs[i], want[i])
			}
			continue
		}
		if errs[i] != nil || tasks[i] == nil || tasks[i].ID != claimed.Runs[n-1-i].TaskID {
			t.Fatalf("report %d: task %v, err %v; want task %s", i, tasks[i], errs[i], claimed.Runs[n-1-i].TaskID)
		}
		var got rota.Status
		for _, r := range tasks[i].Runs {
			if r.ID == p.RunID {
				got = r.Status
			}
		}
		evMu.Lock()
		ev := events[p.RunID]
		evMu.Unlock()
		if got != wantStatus[i] || ev != wantStatus[i] {
			t.Errorf("report %d: run %s, event %s; want %s", i, got, ev, wantStatus[i])
		}
	}
	// The other worker's report changed nothing.
	if got, err := f.st.TaskGet(context.Background(), claimed.Runs[n-1-7].TaskID); err != nil || got.Status != rota.StatusRunning {
		t.Errorf("the refused report's task: %v, %v; want RUNNING", got, err)
	}
	t.Logf("max in flight: %d", counting.max)
	if counting.max < 2 {
		t.Errorf("at most %d reports in flight: CompleteMany did not run them concurrently", counting.max)
	}
	if counting.max > completeManyConcurrency {
		t.Errorf("%d reports in flight, over the bound of %d", counting.max, completeManyConcurrency)
	}

	if tasks, errs := d.CompleteMany(context.Background(), nil); len(tasks) != 0 || len(errs) != 0 {
		t.Errorf("CompleteMany(nil) = %v, %v", tasks, errs)
	}
}
