package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// lookingStore counts the claims' looks at the store (TaskClaim), beside
// a startingStore's hand-offs; with lookGate set, each look waits for it.
type lookingStore struct {
	*startingStore
	looks    atomic.Int32
	lookGate chan struct{}
}

func (s *lookingStore) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	s.looks.Add(1)
	if s.lookGate != nil {
		<-s.lookGate
	}
	return s.startingStore.TaskClaim(ctx, p)
}

// setupBetween is setupStarting with the looks counted.
func setupBetween(t *testing.T, gate chan struct{}) (*fixture, *lookingStore) {
	t.Helper()
	var ls *lookingStore
	f := setup(t, func(c *Config) {
		ls = &lookingStore{startingStore: &startingStore{Store: c.Store, gate: gate}}
		c.Store = ls
	})
	return f, ls
}

// claimNow is worker's long-poll claim of up to max tasks of kind, which
// must answer at once.
func (f *fixture) claimNow(worker, kind string, max int) store.TaskClaimResult {
	f.t.Helper()
	res, err := f.d.Claim(f.t.Context(), ClaimRequest{WorkerID: worker, Address: "10.0.0.7:9000", Kinds: []string{kind}, Max: max, Wait: time.Minute, Follow: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// firstClaim submits a task and has worker's claim of up to max take it:
// from then on the dispatcher expects worker's next claim.
func (f *fixture) firstClaim(worker, kind string, max int) {
	f.t.Helper()
	task := f.submit(kind, time.Time{})
	if res := f.claimNow(worker, kind, max); len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		f.t.Fatalf("first claim = %+v, want task %s", res, task.ID)
	}
}

// TestSubmitHandsTaskToNextClaim: a lone task submitted after a worker's
// claim answered, before its next claim came (no claim asleep), starts
// with its insert for that worker, and the worker's next claim takes it
// without a look at the store.
func TestSubmitHandsTaskToNextClaim(t *testing.T) {
	t.Parallel()
	f, ls := setupBetween(t, nil)
	f.firstClaim("w1", "k", 4)
	looks := ls.looks.Load()
	task := f.submit("k", time.Time{})
	if n := ls.calls.Load(); n != 1 {
		t.Fatalf("TaskInsertStarted called %d times, want 1 (the hand-off to w1's next claim)", n)
	}
	stored, err := f.st.TaskGet(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != rota.StatusRunning || len(stored.Runs) != 1 || stored.Runs[0].WorkerID != "w1" {
		t.Fatalf("stored: %s with runs %+v, want RUNNING for w1", stored.Status, stored.Runs)
	}
	res := f.claimNow("w1", "k", 4)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID || res.Runs[0].RunID != stored.Runs[0].ID {
		t.Fatalf("next claim = %+v, want run %s of task %s", res, stored.Runs[0].ID, task.ID)
	}
	if n := ls.looks.Load() - looks; n != 0 {
		t.Errorf("the next claim looked at the store %d times, want 0", n)
	}
}

// TestNoBoxWithoutFollow: a claim that does not say its worker claims
// again at once (ClaimRequest.Follow unset: raw HTTP clients, other
// languages' workers) gets no box: a task submitted after it answered is
// inserted waiting, for any worker's claim.
func TestNoBoxWithoutFollow(t *testing.T) {
	t.Parallel()
	f, ls := setupBetween(t, nil)
	first := f.submit("k", time.Time{})
	res, err := f.d.Claim(t.Context(), ClaimRequest{WorkerID: "w1", Kinds: []string{"k"}, Max: 4, Wait: time.Minute})
	if err != nil || len(res.Runs) != 1 || res.Runs[0].TaskID != first.ID {
		t.Fatalf("w1's claim = %+v, %v; want task %s", res, err, first.ID)
	}
	task := f.submit("k", time.Time{})
	if n := ls.calls.Load(); n != 0 {
		t.Fatalf("TaskInsertStarted called %d times, want 0 (no box without Follow)", n)
	}
	stored, err := f.st.TaskGet(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != rota.StatusScheduled {
		t.Fatalf("stored: %s, want SCHEDULED", stored.Status)
	}
	if res := f.claimNow("w2", "k", 4); len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("w2's claim = %+v, want task %s", res, task.ID)
	}
}

// TestNextClaimOnlyForItsWorker: another worker's claim does not take the
// runs handed to w1's next claim.
func TestNextClaimOnlyForItsWorker(t *testing.T) {
	t.Parallel()
	f, _ := setupBetween(t, nil)
	f.firstClaim("w1", "k", 4)
	task := f.submit("k", time.Time{})
	res, err := f.d.Claim(t.Context(), ClaimRequest{WorkerID: "w2", Kinds: []string{"k"}, Max: 4})
	if err != nil || len(res.Runs) != 0 {
		t.Fatalf("w2's claim = %+v, %v; want nothing", res, err)
	}
	if res := f.claimNow("w1", "k", 4); len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("w1's next claim = %+v, want task %s", res, task.ID)
	}
}

// TestNextClaimRoom: the expectation takes no more runs than the claim
// that left it could still have taken (its Max less the runs it got).
func TestNextClaimRoom(t *testing.T) {
	t.Parallel()
	f, ls := setupBetween(t, nil)
	f.firstClaim("w1", "k", 2)
	f.submit("k", time.Time{})
	f.submit("k", time.Time{})
	if n := ls.calls.Load(); n != 1 {
		t.Fatalf("TaskInsertStarted called %d times, want 1 (room for one more run)", n)
	}
}

// TestNextClaimWindow: a submit after betweenWindow goes the usual way.
func TestNextClaimWindow(t *testing.T) {
	t.Parallel()
	f, ls := setupBetween(t, nil)
	f.firstClaim("w1", "k", 4)
	f.clock.Advance(betweenWindow + time.Millisecond)
	task := f.submit("k", time.Time{})
	if n := ls.calls.Load(); n != 0 {
		t.Fatalf("TaskInsertStarted called %d times after the window, want 0", n)
	}
	if res := f.claimNow("w2", "k", 4); len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("w2's claim = %+v, want task %s", res, task.ID)
	}
	f.d.waiters.mu.Lock()
	n := f.d.waiters.nextOf("w1", "k")
	f.d.waiters.mu.Unlock()
	if n != nil {
		t.Errorf("w1's expired expectation is kept: %+v", n)
	}
}

// TestNextClaimRunsReleased: runs handed to a next claim that does not
// come within betweenHold are released (CANCELED, no attempt spent), so
// another worker takes the task.
func TestNextClaimRunsReleased(t *testing.T) {
	t.Parallel()
	f, _ := setupBetween(t, nil)
	f.firstClaim("w1", "k", 4)
	timers := f.clock.Timers()
	task := f.submit("k", time.Time{})
	f.eventually("release timer", func() bool { return f.clock.Timers() > timers })
	f.clock.Advance(betweenHold)
	f.eventually("released", func() bool {
		got, err := f.st.TaskGet(t.Context(), task.ID)
		return err == nil && got.Status == rota.StatusScheduled
	})
	stored, err := f.st.TaskGet(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Runs) != 1 || stored.Runs[0].Status != rota.StatusCanceled {
		t.Fatalf("runs %+v, want one CANCELED", stored.Runs)
	}
	res := f.claimNow("w2", "k", 4)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID || res.Runs[0].Attempt != 2 {
		t.Fatalf("w2's claim = %+v, want task %s again", res, task.ID)
	}
	if res, err := f.d.Claim(t.Context(), ClaimRequest{WorkerID: "w1", Kinds: []string{"k"}, Max: 4}); err != nil || len(res.Runs) != 0 {
		t.Fatalf("w1's late claim = %+v, %v; want nothing", res, err)
	}
}

// TestNextClaimLooksWhenStale: a claim answered from handed runs looks at
// the store as well once the worker's last look is betweenLook old (its
// row's sighting), and takes what it finds with them.
func TestNextClaimLooksWhenStale(t *testing.T) {
	t.Parallel()
	f, ls := setupBetween(t, nil)
	f.firstClaim("w1", "k", 4)
	handed := f.submit("k", time.Time{})
	f.clock.Advance(betweenLook)
	waiting := f.submit("k", time.Time{}) // after the window: waiting
	looks := ls.looks.Load()
	res := f.claimNow("w1", "k", 4)
	if n := ls.looks.Load() - looks; n != 1 {
		t.Errorf("the next claim looked at the store %d times, want 1", n)
	}
	if len(res.Runs) != 2 || res.Runs[0].TaskID != handed.ID || res.Runs[1].TaskID != waiting.ID {
		t.Fatalf("next claim = %+v, want tasks %s then %s", res, handed.ID, waiting.ID)
	}
}

// TestNextClaimWaitsForHandOffInFlight: a next claim that finds no run
// handed yet but a hand-off in flight waits for it (a look would not find
// the task, inserted RUNNING for the worker); one that finds runs takes
// them and leaves the one in flight to the following claim.
func TestNextClaimWaitsForHandOffInFlight(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	f, ls := setupBetween(t, gate)
	f.firstClaim("w1", "k", 4)
	done := make(chan *rota.Task, 1)
	go func() { done <- f.submit("k", time.Time{}) }()
	f.eventually("hand-off in flight", func() bool { return ls.calls.Load() == 1 })
	got := make(chan store.TaskClaimResult, 1)
	go func() { got <- f.claimNow("w1", "k", 4) }()
	noResult(t, "a next claim with a hand-off in flight", got)
	gate <- struct{}{}
	first := <-done
	if res := receive(t, got); len(res.Runs) != 1 || res.Runs[0].TaskID != first.ID {
		t.Fatalf("next claim = %+v, want task %s", res, first.ID)
	}
	// One handed, one in flight: the claim takes the first at once.
	go func() { gate <- struct{}{} }()
	second := f.submit("k", time.Time{})
	go func() { done <- f.submit("k", time.Time{}) }()
	f.eventually("hand-off in flight", func() bool { return ls.calls.Load() == 3 })
	if res := f.claimNow("w1", "k", 4); len(res.Runs) != 1 || res.Runs[0].TaskID != second.ID {
		t.Fatalf("claim = %+v, want task %s", res, second.ID)
	}
	close(gate)
	third := <-done
	if res := f.claimNow("w1", "k", 4); len(res.Runs) != 1 || res.Runs[0].TaskID != third.ID {
		t.Fatalf("following claim = %+v, want task %s", res, third.ID)
	}
}

// TestSubmitHandsTaskToLookingClaim: a lone task submitted while a claim
// of its kind looks at the store (registered, not asleep) is handed to the
// claim's box, and the claim, whose look finds nothing, answers with it at
// once instead of sleeping.
func TestSubmitHandsTaskToLookingClaim(t *testing.T) {
	t.Parallel()
	f, ls := setupBetween(t, nil)
	ls.lookGate = make(chan struct{})
	got := make(chan store.TaskClaimResult, 1)
	go func() { got <- f.claimNow("w1", "k", 4) }()
	f.eventually("claim looking", func() bool { return ls.looks.Load() == 1 })
	task := f.submit("k", time.Time{})
	if n := ls.calls.Load(); n != 1 {
		t.Fatalf("TaskInsertStarted called %d times, want 1 (the hand-off to the looking claim)", n)
	}
	close(ls.lookGate)
	res := receive(t, got)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("claim = %+v, want task %s", res, task.ID)
	}
	if n := ls.looks.Load(); n != 1 {
		t.Errorf("the claim looked at the store %d times, want 1", n)
	}
}

// TestWaitingHint: the hint that tasks inserted waiting may still wait is
// cleared only by a look that started after every such insert and took
// fewer tasks than it could.
func TestWaitingHint(t *testing.T) {
	t.Parallel()
	ws := newWaiters()
	if ws.waiting("k") {
		t.Fatal("waiting before any insert")
	}
	ws.markWaiting("k")
	mark := ws.lookStart("k")
	ws.markWaiting("k") // inserted while the look ran: it may not have seen it
	ws.lookEnd("k", mark)
	if !ws.waiting("k") {
		t.Fatal("cleared by a look that started before the last insert")
	}
	ws.lookEnd("k", ws.lookStart("k"))
	if ws.waiting("k") {
		t.Fatal("still waiting after a look that saw every insert")
	}
	if ws.waiting("other") {
		t.Fatal("another kind waits")
	}
}

// TestHandedClaimLooksForWaitingTasks: a claim answered from handed runs
// looks at the store as well while tasks inserted waiting may wait (here
// one submitted when the box had no room left), so they do not wait for
// the box to run dry.
func TestHandedClaimLooksForWaitingTasks(t *testing.T) {
	t.Parallel()
	f, ls := setupBetween(t, nil)
	f.firstClaim("w1", "k", 3) // room for 2
	handed := f.submit("k", time.Time{})
	f.submit("k", time.Time{}) // handed too: no room left
	waiting := f.submit("k", time.Time{})
	if n := ls.calls.Load(); n != 2 {
		t.Fatalf("TaskInsertStarted called %d times, want 2", n)
	}
	res := f.claimNow("w1", "k", 4)
	if len(res.Runs) != 3 || res.Runs[0].TaskID != handed.ID || res.Runs[2].TaskID != waiting.ID {
		t.Fatalf("next claim = %+v, want the 2 handed tasks then %s", res, waiting.ID)
	}
	// The look took every task it saw: hand-offs resume.
	f.submit("k", time.Time{})
	if n := ls.calls.Load(); n != 3 {
		t.Fatalf("TaskInsertStarted called %d times after the look, want 3", n)
	}
}

// TestDeregisterReleasesBox: a worker that deregisters gets nothing more
// from its box: the runs handed to it are released at once.
func TestDeregisterReleasesBox(t *testing.T) {
	t.Parallel()
	f, _ := setupBetween(t, nil)
	f.firstClaim("w1", "k", 4)
	task := f.submit("k", time.Time{})
	if _, err := f.d.DeregisterWorker(t.Context(), "w1"); err != nil {
		t.Fatal(err)
	}
	stored, err := f.st.TaskGet(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != rota.StatusScheduled || len(stored.Runs) != 1 || stored.Runs[0].Status != rota.StatusCanceled {
		t.Fatalf("after the deregistration: %s with runs %+v, want SCHEDULED with one CANCELED run", stored.Status, stored.Runs)
	}
}
