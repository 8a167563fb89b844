package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// running is the task p must be after worker's claim at now as attempt n,
// with run as its only (or latest) run; earlier runs are prepended by the
// caller. RunAt is copied from got: the contract leaves it open while the
// task runs.
func running(p store.TaskInsertParams, worker, runID string, start time.Time, attempt int) (*rota.Task, rota.Run) {
	want := inserted(p)
	want.Status = rota.StatusRunning
	want.Attempt = attempt
	want.StartTime = start
	want.WorkerAddress = Addr(worker)
	run := rota.Run{
		ID:             runID,
		TaskID:         p.ID,
		WorkerID:       worker,
		WorkerAddress:  Addr(worker),
		Attempt:        attempt,
		Status:         rota.StatusRunning,
		StartTime:      start,
		LeaseExpiresAt: start.Add(sec(p.HeartbeatTimeoutSeconds)),
	}
	if p.TimeoutSeconds > 0 {
		run.Deadline = start.Add(sec(p.TimeoutSeconds))
	}
	return want, run
}

// ended returns run as ended in status s at end with message msg.
func ended(run rota.Run, s rota.Status, end time.Time, msg string) rota.Run {
	run.Status = s
	run.EndTime = end
	run.LeaseExpiresAt = time.Time{}
	run.Message = msg
	return run
}

func testStateMachine(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "ClaimStartsRun", stateMachineClaimStartsRun)

	parallel(t, ns, "Succeed", stateMachineSucceed)

	parallel(t, ns, "RetryThenFail", stateMachineRetryThenFail)

	parallel(t, ns, "NilBackoffRetriesAtOnce", stateMachineNilBackoffRetriesAtOnce)

	parallel(t, ns, "NoRetryFailsAtOnce", stateMachineNoRetryFailsAtOnce)

	parallel(t, ns, "MaxRetriesZero", stateMachineMaxRetriesZero)

	parallel(t, ns, "ClaimMax", stateMachineClaimMax)

	parallel(t, ns, "ClaimOtherKind", stateMachineClaimOtherKind)
}

// stateMachineClaimStartsRun is the ClaimStartsRun subtest of testStateMachine.
func stateMachineClaimStartsRun(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.Priority = rota.PriorityHigh
	p.Payload = json.RawMessage(`{"job": [1, 2]}`)
	p.HeartbeatTimeoutSeconds = 20
	f.Insert(p)

	now := f.At(sec(10))
	res, err := f.Store.TaskClaim(f.Ctx(), store.TaskClaimParams{
		WorkerID: "w1", WorkerAddress: Addr("w1"), Kinds: []string{kindK}, Max: 1, Now: now, NewRunID: f.NewRunID,
	})
	if err != nil {
		t.Fatalf("TaskClaim: %v", err)
	}
	if res.Drain || len(res.Runs) != 1 {
		t.Fatalf("TaskClaim: %d runs, drain %v; want 1 run", len(res.Runs), res.Drain)
	}
	got := res.Runs[0]
	if !f.Issued(got.RunID) {
		t.Fatalf("run id %q was not made by NewRunID", got.RunID)
	}
	diff(t, "claimed run", rota.ClaimedRun{
		TaskID:                  p.ID,
		RunID:                   got.RunID,
		Kind:                    kindK,
		Priority:                rota.PriorityHigh,
		Payload:                 p.Payload,
		Attempt:                 1,
		HeartbeatTimeoutSeconds: 20,
		LeaseExpiresAt:          now.Add(sec(20)),
		RunAt:                   f.At(0), // ready since its insert: it waited 10 s
	}, got)

	task := f.Get(p.ID)
	want, run := running(p, "w1", got.RunID, now, 1)
	want.RunAt = task.RunAt
	want.Runs = []rota.Run{run}
	diff(t, "task after claim", want, task)

	f.ClaimNone("w2", now, kindK)
	f.ClaimNone("w1", now, kindK)
}

// stateMachineSucceed is the Succeed subtest of testStateMachine.
func stateMachineSucceed(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	f.Insert(p)
	claimed := f.ClaimOne("w1", f.At(sec(10)), kindK)
	end := f.At(sec(15))
	got := f.Complete(store.RunCompleteParams{
		RunID: claimed.RunID, WorkerID: "w1", Success: true,
		Message: "all good", Result: json.RawMessage(`{"sent": 3}`), Now: end,
	})

	want, run := running(p, "w1", claimed.RunID, f.At(sec(10)), 1)
	want.Status = rota.StatusSuccess
	want.IsSucceed = true
	want.EndTime = end
	want.Message = "all good"
	want.Result = json.RawMessage(`{"sent":3}`)
	want.RunAt = got.RunAt
	got.Runs = nil // the result of RunComplete may or may not carry runs
	diff(t, "RunComplete result", want, got)

	task := f.Get(p.ID)
	want.RunAt = task.RunAt
	want.Runs = []rota.Run{ended(run, rota.StatusSuccess, end, "all good")}
	diff(t, "task after success", want, task)

	f.ClaimNone("w1", f.At(sec(20)), kindK)
	f.ClaimNone("w2", f.At(sec(20)), kindK)

	// The run is over: its id is no lease any more, and nothing changes.
	_, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: claimed.RunID, WorkerID: "w1", Now: f.At(sec(16))})
	wantErr(t, "RunHeartbeat of a succeeded run", err, rota.ErrLeaseLost)
	_, err = f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: claimed.RunID, WorkerID: "w1", Success: true, Message: "again", Now: f.At(sec(16))})
	wantErr(t, "second RunComplete of a run", err, rota.ErrLeaseLost)
	_, err = f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: claimed.RunID, WorkerID: "w1", Message: "late failure", Retry: true, Now: f.At(sec(16))})
	wantErr(t, "failure report after success", err, rota.ErrLeaseLost)
	diff(t, "task after refused reports", task, f.Get(p.ID))
}

// stateMachineRetryThenFail is the RetryThenFail subtest of testStateMachine.
func stateMachineRetryThenFail(t *testing.T, f *Fixture) {
	// MaxRetries 2: two failures are retried after Backoff(1) = 7s and
	// Backoff(2) = 14s, the third failure is final.
	p := f.Params(kindK, f.At(0))
	p.MaxRetries = 2
	f.Insert(p)

	c1 := f.ClaimOne("w1", f.At(sec(10)), kindK)
	if c1.Attempt != 1 {
		t.Fatalf("first claim: attempt %d, want 1", c1.Attempt)
	}
	got := f.Fail("w1", c1.RunID, f.At(sec(12)), backoff7)
	wantStatus(t, got, rota.StatusScheduled)
	wantInstant(t, "RunAt after the first failure (now + Backoff(1))", got.RunAt, f.At(sec(19)))

	task := f.Get(p.ID)
	want, r1 := running(p, "w1", c1.RunID, f.At(sec(10)), 1)
	want.Status = rota.StatusScheduled
	want.RunAt = f.At(sec(19))
	want.Message = "boom"
	r1 = ended(r1, rota.StatusFailed, f.At(sec(12)), "boom")
	want.Runs = []rota.Run{r1}
	diff(t, "task after a retried failure", want, task)

	f.ClaimNone("w2", f.At(sec(19)).Add(-time.Millisecond), kindK)
	c2 := f.ClaimOne("w2", f.At(sec(19)), kindK)
	if c2.Attempt != 2 {
		t.Fatalf("second claim: attempt %d, want 2", c2.Attempt)
	}
	task = f.Get(p.ID)
	_, r2 := running(p, "w2", c2.RunID, f.At(sec(19)), 2)
	want.Status = rota.StatusRunning
	want.Attempt = 2
	want.WorkerAddress = Addr("w2")
	want.RunAt = task.RunAt
	want.Runs = []rota.Run{r1, r2}
	diff(t, "task on its second run (StartTime stays the first run's)", want, task)

	got = f.Fail("w2", c2.RunID, f.At(sec(20)), backoff7)
	wantStatus(t, got, rota.StatusScheduled)
	wantInstant(t, "RunAt after the second failure (now + Backoff(2))", got.RunAt, f.At(sec(34)))

	f.ClaimNone("w1", f.At(sec(33)), kindK)
	c3 := f.ClaimOne("w1", f.At(sec(34)), kindK)
	if c3.Attempt != 3 {
		t.Fatalf("third claim: attempt %d, want 3", c3.Attempt)
	}
	got = f.Fail("w1", c3.RunID, f.At(sec(35)), backoff7)
	wantStatus(t, got, rota.StatusFailed)

	task = f.Get(p.ID)
	_, r3 := running(p, "w1", c3.RunID, f.At(sec(34)), 3)
	want.Status = rota.StatusFailed
	want.Attempt = 3
	want.WorkerAddress = Addr("w1")
	want.EndTime = f.At(sec(35))
	want.RunAt = task.RunAt
	want.Runs = []rota.Run{r1, ended(r2, rota.StatusFailed, f.At(sec(20)), "boom"), ended(r3, rota.StatusFailed, f.At(sec(35)), "boom")}
	diff(t, "task after its final failure", want, task)
	f.ClaimNone("w3", f.At(sec(1000)), kindK)
}

// stateMachineNilBackoffRetriesAtOnce is the NilBackoffRetriesAtOnce subtest of testStateMachine.
func stateMachineNilBackoffRetriesAtOnce(t *testing.T, f *Fixture) {
	f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	got := f.Fail("w1", c.RunID, f.At(sec(2)), nil)
	wantStatus(t, got, rota.StatusScheduled)
	wantInstant(t, "RunAt after a failure without backoff", got.RunAt, f.At(sec(2)))
	if c2 := f.ClaimOne("w1", f.At(sec(2)), kindK); c2.Attempt != 2 {
		t.Fatalf("retry claim: attempt %d, want 2", c2.Attempt)
	}
}

// stateMachineNoRetryFailsAtOnce is the NoRetryFailsAtOnce subtest of testStateMachine.
func stateMachineNoRetryFailsAtOnce(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.MaxRetries = 5
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	got := f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Message: "bad input", Retry: false, Now: f.At(sec(2)), Backoff: backoff7})
	wantStatus(t, got, rota.StatusFailed)
	task := f.Get(p.ID)
	wantStatus(t, task, rota.StatusFailed)
	wantInstant(t, "EndTime", task.EndTime, f.At(sec(2)))
	if task.IsSucceed || task.Message != "bad input" {
		t.Fatalf("failed task: IsSucceed %v, message %q", task.IsSucceed, task.Message)
	}
	if r := runByID(t, task, c.RunID); r.Status != rota.StatusFailed {
		t.Fatalf("run status %s, want FAILED", r.Status)
	}
	f.ClaimNone("w2", f.At(sec(100)), kindK)
}

// stateMachineMaxRetriesZero is the MaxRetriesZero subtest of testStateMachine.
func stateMachineMaxRetriesZero(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.MaxRetries = 0
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	got := f.Fail("w1", c.RunID, f.At(sec(2)), backoff7)
	wantStatus(t, got, rota.StatusFailed)
	wantInstant(t, "EndTime", f.Get(p.ID).EndTime, f.At(sec(2)))
	f.ClaimNone("w2", f.At(sec(100)), kindK)
}

// stateMachineClaimMax is the ClaimMax subtest of testStateMachine.
func stateMachineClaimMax(t *testing.T, f *Fixture) {
	for i := range 5 {
		f.InsertNew(kindK, f.At(sec(i)))
	}
	seen := map[string]bool{}
	runIDs := map[string]bool{}
	for _, want := range []int{3, 2, 0} {
		res := f.Claim("w1", f.At(sec(10)), 3, kindK)
		if len(res.Runs) != want {
			t.Fatalf("TaskClaim max 3: %d runs, want %d", len(res.Runs), want)
		}
		for _, r := range res.Runs {
			if seen[r.TaskID] || runIDs[r.RunID] {
				t.Fatalf("task %s / run %s handed out twice", r.TaskID, r.RunID)
			}
			seen[r.TaskID], runIDs[r.RunID] = true, true
			if !f.Issued(r.RunID) {
				t.Fatalf("run id %q was not made by NewRunID", r.RunID)
			}
			if task := f.Get(r.TaskID); task.Status != rota.StatusRunning || len(task.Runs) != 1 || task.Runs[0].ID != r.RunID {
				t.Fatalf("claimed task %s: status %s runs %s", r.TaskID, task.Status, runsString(task))
			}
		}
	}
}

// stateMachineClaimOtherKind is the ClaimOtherKind subtest of testStateMachine.
func stateMachineClaimOtherKind(t *testing.T, f *Fixture) {
	f.InsertNew("a", f.At(0))
	f.ClaimNone("w1", f.At(sec(1)), "b")
	f.ClaimNone("w1", f.At(sec(1)))
	f.ClaimOne("w1", f.At(sec(1)), "a")
}

func testDelay(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "FutureRunAt", delayFutureRunAt)

	parallel(t, ns, "DueBeforeDelayed", delayDueBeforeDelayed)

	parallel(t, ns, "NextRunAt", delayNextRunAt)

	parallel(t, ns, "NextRunAtRetry", delayNextRunAtRetry)
}

// delayFutureRunAt is the FutureRunAt subtest of testDelay.
func delayFutureRunAt(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.RunAt = f.At(sec(10))
	f.Insert(p)
	f.ClaimNone("w1", f.At(0), kindK)
	f.ClaimNone("w1", f.At(sec(10)).Add(-time.Millisecond), kindK)
	c := f.ClaimOne("w1", f.At(sec(10)), kindK)
	if c.TaskID != p.ID {
		t.Fatalf("claimed %s, want %s", c.TaskID, p.ID)
	}
}

// delayDueBeforeDelayed is the DueBeforeDelayed subtest of testDelay.
func delayDueBeforeDelayed(t *testing.T, f *Fixture) {
	// A delayed task inserted first does not block a due one.
	delayed := f.Params(kindK, f.At(0))
	delayed.RunAt = f.At(sec(60))
	f.Insert(delayed)
	due := f.InsertNew(kindK, f.At(sec(1)))
	if c := f.ClaimOne("w1", f.At(sec(2)), kindK); c.TaskID != due.ID {
		t.Fatalf("claimed %s, want the due task %s", c.TaskID, due.ID)
	}
	f.ClaimNone("w1", f.At(sec(59)), kindK)
}

// delayNextRunAt is the NextRunAt subtest of testDelay.
func delayNextRunAt(t *testing.T, f *Fixture) {
	at := func(kind string, runAt time.Duration) {
		p := f.Params(kind, f.At(0))
		p.RunAt = f.At(runAt)
		f.Insert(p)
	}
	next := func(now time.Duration, kinds ...string) (time.Time, bool) {
		t.Helper()
		n, ok, err := f.Store.TaskNextRunAt(f.Ctx(), kinds, f.At(now))
		if err != nil {
			t.Fatalf("TaskNextRunAt(%v): %v", kinds, err)
		}
		return n, ok
	}
	if _, ok := next(0, "a"); ok {
		t.Fatal("TaskNextRunAt on an empty store: ok = true")
	}
	at("a", sec(30))
	at("a", sec(20))
	at("a", 0) // due now: not waiting for its time
	at("b", sec(10))
	at("c", sec(5))

	cases := []struct {
		now   time.Duration
		kinds []string
		want  time.Duration // -1: none
	}{
		{0, []string{"a"}, sec(20)},
		{0, []string{"a", "b"}, sec(10)},
		{0, []string{"b", "a"}, sec(10)},
		{0, []string{"a", "b", "c"}, sec(5)},
		{0, []string{"d"}, -1},
		{0, nil, -1},
		{sec(25), []string{"a"}, sec(30)},
		{sec(25), []string{"b", "c"}, -1},
		{sec(31), []string{"a", "b", "c"}, -1},
	}
	for _, c := range cases {
		got, ok := next(c.now, c.kinds...)
		if c.want < 0 {
			if ok {
				t.Errorf("TaskNextRunAt(%v) at base+%v = %v, want none", c.kinds, c.now, got)
			}
			continue
		}
		if !ok || !sameInstant(got, f.At(c.want)) {
			t.Errorf("TaskNextRunAt(%v) at base+%v = %v, %v; want base+%v", c.kinds, c.now, got, ok, c.want)
		}
	}
}

// delayNextRunAtRetry is the NextRunAtRetry subtest of testDelay.
func delayNextRunAtRetry(t *testing.T, f *Fixture) {
	// A task backing off before its retry waits for its time too; a
	// running or finished task does not.
	f.InsertNew(kindK, f.At(0))
	f.InsertNew(kindK, f.At(0))
	c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	c2 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	if _, ok, err := f.Store.TaskNextRunAt(f.Ctx(), []string{kindK}, f.At(sec(1))); err != nil || ok {
		t.Fatalf("TaskNextRunAt with only running tasks: ok %v err %v, want none", ok, err)
	}
	f.Fail("w1", c1.RunID, f.At(sec(2)), backoff7)
	f.Succeed("w1", c2.RunID, f.At(sec(2)))
	got, ok, err := f.Store.TaskNextRunAt(f.Ctx(), []string{kindK}, f.At(sec(2)))
	if err != nil || !ok || !sameInstant(got, f.At(sec(9))) {
		t.Fatalf("TaskNextRunAt after a retried failure = %v, %v, %v; want base+9s", got, ok, err)
	}
}

// must fails tb when err is not nil.
func must(tb testing.TB, what string, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// stopTask stops a task at now; it fails the test on error.
func (f *Fixture) stopTask(id string, now time.Time) *rota.Task {
	f.TB.Helper()
	task, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: id, Now: now})
	must(f.TB, fmt.Sprintf("TaskStop(%s)", id), err)
	return task
}
