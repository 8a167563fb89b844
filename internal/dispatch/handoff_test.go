package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// startingStore is the embedded store with a hand-off made of its own
// insert and claim (not one statement, as pgstore's, but the same
// outcome), so that the dispatcher's side of the hand-off runs on a real
// store. refuse: it inserts the task waiting, as pgstore does when
// something stands in the claim's way. gate, when set, holds each call
// until it is closed.
type startingStore struct {
	store.Store
	calls  atomic.Int32
	refuse bool
	gate   chan struct{}
}

func (s *startingStore) TaskInsertStarted(ctx context.Context, p store.TaskInsertParams, sp store.StartFor) (store.TaskInsertResult, *rota.ClaimedRun, error) {
	s.calls.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	res, err := s.Store.TaskInsertMany(ctx, []store.TaskInsertParams{p})
	if err != nil || s.refuse {
		if err != nil {
			return store.TaskInsertResult{}, nil, err
		}
		return res[0], nil, nil
	}
	c, err := s.Store.TaskClaim(ctx, store.TaskClaimParams{WorkerID: sp.WorkerID, WorkerAddress: sp.WorkerAddress,
		Kinds: []string{p.Kind}, Max: 1, Now: sp.Now, NewRunID: func() string { return sp.RunID }})
	if err != nil {
		return store.TaskInsertResult{}, nil, err
	}
	if len(c.Runs) != 1 || c.Runs[0].TaskID != p.ID {
		return store.TaskInsertResult{}, nil, errors.New("startingStore: the claim did not take the new task")
	}
	return res[0], &c.Runs[0], nil
}

// setupStarting is setup with a startingStore, recording the events.
func setupStarting(t *testing.T, refuse bool, gate chan struct{}) (*fixture, *startingStore, func() []rota.Event) {
	t.Helper()
	var (
		mu     sync.Mutex
		events []rota.Event
	)
	var ss *startingStore
	f := setup(t, func(c *Config) {
		ss = &startingStore{Store: c.Store, refuse: refuse, gate: gate}
		c.Store = ss
		c.Events = func(ev rota.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	})
	return f, ss, func() []rota.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]rota.Event(nil), events...)
	}
}

// parkedCount reports how many claims of kind sleep (a submit may take them).
func (ws *waiters) parkedCount(kind string) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, w := range ws.byKind[kind] {
		if w.parked {
			n++
		}
	}
	return n
}

// claimParked is claimAsyncReq for worker's claim of kind, returned once
// the claim sleeps.
func (f *fixture) claimParked(ctx context.Context, worker, kind string) <-chan store.TaskClaimResult {
	f.t.Helper()
	out := make(chan store.TaskClaimResult, 1)
	go func() {
		res, err := f.d.Claim(ctx, ClaimRequest{WorkerID: worker, Address: "10.0.0.7:9000", Kinds: []string{kind}, Max: 4, Wait: time.Minute})
		if err != nil {
			f.t.Error(err)
		}
		out <- res
	}()
	f.eventually("claim asleep", func() bool { return f.d.waiters.parkedCount(kind) == 1 })
	return out
}

// TestSubmitHandsTaskToSleepingClaim: a lone task submitted while a claim
// of its kind sleeps goes to that claim through the store's hand-off: one
// store call, no claim of its own, the task RUNNING for the claim's worker,
// its events in order (the task's, then the run's and the task's RUNNING).
func TestSubmitHandsTaskToSleepingClaim(t *testing.T) {
	t.Parallel()
	f, ss, events := setupStarting(t, false, nil)
	got := f.claimParked(t.Context(), "w1", "k")
	task := f.submit("k", time.Time{})
	if task.Status != rota.StatusScheduled {
		t.Errorf("submit answered %s, want the task as submitted (SCHEDULED)", task.Status)
	}
	res := receive(t, got)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("claim = %+v, want task %s handed", res, task.ID)
	}
	if n := ss.calls.Load(); n != 1 {
		t.Errorf("TaskInsertStarted called %d times, want 1", n)
	}
	stored, err := f.st.TaskGet(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != rota.StatusRunning || len(stored.Runs) != 1 || stored.Runs[0].ID != res.Runs[0].RunID ||
		stored.Runs[0].WorkerID != "w1" {
		t.Fatalf("stored: %s with runs %+v, want RUNNING with w1's run %s", stored.Status, stored.Runs, res.Runs[0].RunID)
	}
	var seq []string
	for _, ev := range events() {
		seq = append(seq, string(ev.Type)+":"+string(ev.Status))
	}
	want := []string{"task:SCHEDULED", "run:RUNNING", "task:RUNNING"}
	if len(seq) != len(want) {
		t.Fatalf("events %v, want %v", seq, want)
	}
	for i := range want {
		if seq[i] != want[i] {
			t.Fatalf("events %v, want %v", seq, want)
		}
	}
	if f.d.Waiting("k") != 0 {
		t.Errorf("%d claims still waiting, want none", f.d.Waiting("k"))
	}
}

// TestRefusedHandOffClaimsAsUsual: when the store inserts the task
// waiting, the claim that was taken looks at the store and claims it.
func TestRefusedHandOffClaimsAsUsual(t *testing.T) {
	t.Parallel()
	f, ss, _ := setupStarting(t, true, nil)
	got := f.claimParked(t.Context(), "w1", "k")
	task := f.submit("k", time.Time{})
	res := receive(t, got)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("claim = %+v, want task %s claimed", res, task.ID)
	}
	if n := ss.calls.Load(); n != 1 {
		t.Errorf("TaskInsertStarted called %d times, want 1", n)
	}
}

// TestHandOffToAbandonedClaimIsReleased: a claim whose caller leaves while
// a submit hands it a task waits for that hand-off and gives the run back
// (CANCELED, no attempt spent), so the task is claimable at once.
func TestHandOffToAbandonedClaimIsReleased(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	f, _, _ := setupStarting(t, false, gate)
	ctx, cancel := context.WithCancel(t.Context())
	got := f.claimParked(ctx, "gone", "k")
	submitted := make(chan *rota.Task, 1)
	go func() { submitted <- f.submit("k", time.Time{}) }()
	// The submit took the claim and is held in the store.
	f.eventually("claim taken", func() bool { return f.d.waiters.parkedCount("k") == 0 })
	cancel()
	noResult(t, "a claim whose hand-off is in flight", got)
	close(gate)
	task := <-submitted
	if res := receive(t, got); len(res.Runs) != 0 {
		t.Fatalf("abandoned claim answered %+v, want nothing", res)
	}
	stored, err := f.st.TaskGet(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != rota.StatusScheduled || len(stored.Runs) != 1 || stored.Runs[0].Status != rota.StatusCanceled {
		t.Fatalf("after the abandoned claim: %s with runs %+v, want SCHEDULED with one CANCELED run", stored.Status, stored.Runs)
	}
	again, err := f.d.Claim(t.Context(), ClaimRequest{WorkerID: "w2", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(again.Runs) != 1 || again.Runs[0].TaskID != task.ID || again.Runs[0].Attempt != 2 {
		t.Fatalf("next claim = %+v, %v; want the task again", again, err)
	}
}

// TestHandOffSkipsPinnedOnlyClaims: only a sleeping claim that may take
// unpinned tasks is taken; a PinnedOnly claim is left alone and the submit
// goes the usual way.
func TestHandOffSkipsPinnedOnlyClaims(t *testing.T) {
	t.Parallel()
	f, ss, _ := setupStarting(t, false, nil)
	got := f.claimAsyncReq(ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1, Wait: time.Minute, PinnedOnly: true})
	f.eventually("claim asleep", func() bool { return f.d.waiters.parkedCount("k") == 1 })
	f.submit("k", time.Time{})
	if n := ss.calls.Load(); n != 0 {
		t.Errorf("TaskInsertStarted called %d times for a PinnedOnly claim, want 0", n)
	}
	noResult(t, "a PinnedOnly claim after an unpinned submit", got)
}
