package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// wantBetween fails the test unless lo ≤ got ≤ hi (at millisecond
// precision).
func wantBetween(tb testing.TB, what string, got, lo, hi time.Time) {
	tb.Helper()
	g := got.Truncate(time.Millisecond)
	if g.Before(lo.Truncate(time.Millisecond)) || g.After(hi.Truncate(time.Millisecond)) {
		tb.Fatalf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

// wantRunTimedOut fails the test unless the run ended TIMEOUT between lo and
// hi and holds no lease any more.
func wantRunTimedOut(tb testing.TB, task *rota.Task, runID string, lo, hi time.Time) {
	tb.Helper()
	r := runByID(tb, task, runID)
	if r.Status != rota.StatusTimeout {
		tb.Fatalf("run %s: status %s, want TIMEOUT (task %s, runs %s)", runID, r.Status, task.Status, runsString(task))
	}
	wantBetween(tb, "EndTime of the timed-out run", r.EndTime, lo, hi)
	if !r.LeaseExpiresAt.IsZero() {
		tb.Fatalf("ended run %s still has a lease until %v", runID, r.LeaseExpiresAt)
	}
}

// refused asserts that a heartbeat and both kinds of report by worker on
// runID fail with target at now and change nothing on task id.
func (f *Fixture) refused(target error, worker, runID, id string, now time.Time) {
	f.TB.Helper()
	before := f.Get(id)
	_, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: runID, WorkerID: worker, Now: now})
	wantErr(f.TB, "RunHeartbeat(run "+runID+", worker "+worker+")", err, target)
	_, err = f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: runID, WorkerID: worker, Success: true, Message: "stale success", Now: now})
	wantErr(f.TB, "RunComplete success (run "+runID+", worker "+worker+")", err, target)
	_, err = f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: runID, WorkerID: worker, Message: "stale failure", Retry: false, Now: now})
	wantErr(f.TB, "RunComplete failure (run "+runID+", worker "+worker+")", err, target)
	diff(f.TB, "task after refused reports (nothing changes on error)", before, f.Get(id))
}

func testLease(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "HeartbeatRenews", leaseHeartbeatRenews)

	parallel(t, ns, "OtherWorker", leaseOtherWorker)

	parallel(t, ns, "UnknownRun", leaseUnknownRun)

	parallel(t, ns, "HeartbeatAfterLease", leaseHeartbeatAfterLease)

	for _, success := range []bool{true, false} {
		name := "FailureAfterLease"
		if success {
			name = "SuccessAfterLease"
		}
		parallel(t, ns, name, func(t *testing.T, f *Fixture) {
			task := f.InsertNew(kindK, f.At(0))
			c := f.ClaimOne("w1", f.At(sec(10)), kindK)
			_, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Success: success, Message: "late", Retry: true, Now: f.At(sec(41))})
			wantErr(t, "RunComplete after the lease", err, rota.ErrLeaseLost)
			got := f.Get(task.ID)
			wantRunTimedOut(t, got, c.RunID, f.At(sec(40)), f.At(sec(41)))
			wantStatus(t, got, rota.StatusScheduled)
			if got.IsSucceed || len(got.Result) != 0 {
				t.Fatalf("late report applied: IsSucceed %v result %s", got.IsSucceed, got.Result)
			}
			f.ClaimOne("w2", f.At(sec(41)), kindK)
		})
	}

	parallel(t, ns, "ExpireAndTakeOver", leaseExpireAndTakeOver)

	parallel(t, ns, "PoisonTask", leasePoisonTask)

	parallel(t, ns, "ExpireLimit", leaseExpireLimit)

	parallel(t, ns, "NextExpiry", leaseNextExpiry)
}

// leaseHeartbeatRenews is the HeartbeatRenews subtest of testLease.
func leaseHeartbeatRenews(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(10)), kindK)
	wantInstant(t, "LeaseExpiresAt of the claim", c.LeaseExpiresAt, f.At(sec(40)))

	hb := f.Heartbeat("w1", c.RunID, f.At(sec(20)))
	if hb.Stop || hb.Drain {
		t.Fatalf("heartbeat: stop %v drain %v, want neither", hb.Stop, hb.Drain)
	}
	wantInstant(t, "LeaseExpiresAt after a heartbeat", hb.LeaseExpiresAt, f.At(sec(50)))
	wantInstant(t, "stored lease", runByID(t, f.Get(p.ID), c.RunID).LeaseExpiresAt, f.At(sec(50)))

	// The task's current heartbeat timeout applies at the next heartbeat.
	hbt := 60
	_, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: p.ID, HeartbeatTimeoutSeconds: &hbt, Now: f.At(sec(25))})
	must(t, "TaskUpdate", err)
	hb = f.Heartbeat("w1", c.RunID, f.At(sec(30)))
	wantInstant(t, "LeaseExpiresAt after the timeout changed to 60s", hb.LeaseExpiresAt, f.At(sec(90)))
	task := f.Get(p.ID)
	wantInstant(t, "stored lease", runByID(t, task, c.RunID).LeaseExpiresAt, f.At(sec(90)))
	wantStatus(t, task, rota.StatusRunning)

	// Renewed, the run outlives its first lease.
	if res := f.Expire(f.At(sec(85))); res.Expired != 0 {
		t.Fatalf("RunExpire within the renewed lease expired %d runs", res.Expired)
	}
	f.Succeed("w1", c.RunID, f.At(sec(86)))
}

// leaseOtherWorker is the OtherWorker subtest of testLease.
func leaseOtherWorker(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(10)), kindK)
	f.refused(rota.ErrLeaseLost, "w2", c.RunID, task.ID, f.At(sec(11)))
	// The run is still w1's.
	hb := f.Heartbeat("w1", c.RunID, f.At(sec(12)))
	wantInstant(t, "lease", hb.LeaseExpiresAt, f.At(sec(42)))
	wantStatus(t, f.Succeed("w1", c.RunID, f.At(sec(13))), rota.StatusSuccess)
}

// leaseUnknownRun is the UnknownRun subtest of testLease.
func leaseUnknownRun(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.refused(rota.ErrNotFound, "w1", f.NewRunID(), task.ID, f.At(sec(2)))
}

// leaseHeartbeatAfterLease is the HeartbeatAfterLease subtest of testLease.
func leaseHeartbeatAfterLease(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(10)), kindK) // lease until 40s
	_, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: c.RunID, WorkerID: "w1", Now: f.At(sec(41))})
	wantErr(t, "RunHeartbeat after the lease", err, rota.ErrLeaseLost)
	// The error names the kind, so the dispatcher can wake its workers.
	var expired *store.ExpiredError
	if !errors.As(err, &expired) || expired.Kind != kindK {
		t.Fatalf("RunHeartbeat after the lease: error %v is not a *store.ExpiredError for kind %q", err, kindK)
	}

	got := f.Get(task.ID)
	wantRunTimedOut(t, got, c.RunID, f.At(sec(40)), f.At(sec(41)))
	wantStatus(t, got, rota.StatusScheduled)
	wantBetween(t, "RunAt after a lapsed lease (retried at once)", got.RunAt, f.At(sec(40)), f.At(sec(41)))
	c2 := f.ClaimOne("w2", f.At(sec(41)), kindK)
	if c2.Attempt != 2 || c2.TaskID != task.ID {
		t.Fatalf("take-over claim: task %s attempt %d, want %s attempt 2", c2.TaskID, c2.Attempt, task.ID)
	}
	f.refused(rota.ErrLeaseLost, "w1", c.RunID, task.ID, f.At(sec(42)))
}

// leaseExpireAndTakeOver is the ExpireAndTakeOver subtest of testLease.
func leaseExpireAndTakeOver(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	c1 := f.ClaimOne("w1", f.At(sec(10)), kindK) // lease until 40s
	if res := f.Expire(f.At(sec(39))); res.Expired != 0 {
		t.Fatalf("RunExpire before the lease ends: expired %d", res.Expired)
	}
	f.ClaimNone("w2", f.At(sec(39)), kindK)

	res := f.Expire(f.At(sec(41)))
	if res.Expired != 1 {
		t.Fatalf("RunExpire after the lease: expired %d, want 1", res.Expired)
	}
	if !slices.Contains(res.Kinds, kindK) {
		t.Fatalf("RunExpire kinds %v, want %q (its task is claimable again)", res.Kinds, kindK)
	}
	got := f.Get(task.ID)
	wantRunTimedOut(t, got, c1.RunID, f.At(sec(40)), f.At(sec(41)))
	wantStatus(t, got, rota.StatusScheduled)
	if res := f.Expire(f.At(sec(41))); res.Expired != 0 {
		t.Fatalf("second RunExpire: expired %d, want 0", res.Expired)
	}

	c2 := f.ClaimOne("w2", f.At(sec(41)), kindK)
	if c2.TaskID != task.ID || c2.Attempt != 2 || c2.RunID == c1.RunID {
		t.Fatalf("take-over: %+v, want task %s attempt 2 with a new run", c2, task.ID)
	}
	f.ClaimNone("w1", f.At(sec(42)), kindK)

	// The stale worker is fenced off; the new run goes on untouched.
	f.refused(rota.ErrLeaseLost, "w1", c1.RunID, task.ID, f.At(sec(42)))
	got = f.Get(task.ID)
	wantStatus(t, got, rota.StatusRunning)
	if r := runByID(t, got, c2.RunID); r.Status != rota.StatusRunning || r.WorkerID != "w2" {
		t.Fatalf("new run: %+v, want RUNNING by w2", r)
	}
	wantStatus(t, f.Succeed("w2", c2.RunID, f.At(sec(43))), rota.StatusSuccess)
}

// leasePoisonTask is the PoisonTask subtest of testLease.
func leasePoisonTask(t *testing.T, f *Fixture) {
	// A lapsed lease counts as a failure: with MaxRetries 1 the second
	// lapse is final, and the task ends FAILED (not TIMEOUT: no deadline
	// passed).
	p := f.Params(kindK, f.At(0))
	p.MaxRetries = 1
	p.HeartbeatTimeoutSeconds = 10
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	if res := f.Expire(f.At(sec(12))); res.Expired != 1 {
		t.Fatalf("first lapse: expired %d", res.Expired)
	}
	wantStatus(t, f.Get(p.ID), rota.StatusScheduled)
	c2 := f.ClaimOne("w2", f.At(sec(12)), kindK)
	if res := f.Expire(f.At(sec(23))); res.Expired != 1 {
		t.Fatalf("second lapse: expired %d", res.Expired)
	}
	got := f.Get(p.ID)
	wantStatus(t, got, rota.StatusFailed)
	wantBetween(t, "EndTime", got.EndTime, f.At(sec(22)), f.At(sec(23)))
	wantRunTimedOut(t, got, c1.RunID, f.At(sec(11)), f.At(sec(12)))
	wantRunTimedOut(t, got, c2.RunID, f.At(sec(22)), f.At(sec(23)))
	f.ClaimNone("w3", f.At(sec(100)), kindK)
}

// leaseExpireLimit is the ExpireLimit subtest of testLease.
func leaseExpireLimit(t *testing.T, f *Fixture) {
	for i := range 3 {
		f.InsertNew(kindK, f.At(sec(i)))
	}
	if n := len(f.Claim("w1", f.At(sec(5)), 3, kindK).Runs); n != 3 {
		t.Fatalf("claimed %d, want 3", n)
	}
	for _, want := range []int{2, 1, 0} {
		res, err := f.Store.RunExpire(f.Ctx(), store.RunExpireParams{Now: f.At(sec(60)), Limit: 2, Backoff: backoff7})
		must(t, "RunExpire", err)
		if res.Expired != want {
			t.Fatalf("RunExpire limit 2: expired %d, want %d", res.Expired, want)
		}
	}
	if n := len(f.ListAll(store.TaskListParams{Status: rota.StatusScheduled})); n != 3 {
		t.Fatalf("%d tasks SCHEDULED after expiry, want 3", n)
	}
}

// leaseNextExpiry is the NextExpiry subtest of testLease.
func leaseNextExpiry(t *testing.T, f *Fixture) {
	next := func() (time.Time, bool) {
		t.Helper()
		n, ok, err := f.Store.RunNextExpiry(f.Ctx())
		must(t, "RunNextExpiry", err)
		return n, ok
	}
	if _, ok := next(); ok {
		t.Fatal("RunNextExpiry on an empty store: ok = true")
	}
	f.InsertNew(kindK, f.At(0))
	if _, ok := next(); ok {
		t.Fatal("RunNextExpiry with nothing running: ok = true")
	}

	a := f.ClaimOne("w1", f.At(sec(1)), kindK) // lease 31s
	if n, ok := next(); !ok || !sameInstant(n, f.At(sec(31))) {
		t.Fatalf("RunNextExpiry = %v, %v; want base+31s", n, ok)
	}
	p := f.Params(kindK, f.At(sec(2)))
	p.HeartbeatTimeoutSeconds = 10
	f.Insert(p)
	b := f.ClaimOne("w2", f.At(sec(3)), kindK) // lease 13s
	if n, ok := next(); !ok || !sameInstant(n, f.At(sec(13))) {
		t.Fatalf("RunNextExpiry = %v, %v; want base+13s (the shorter lease)", n, ok)
	}
	p = f.Params(kindK, f.At(sec(4)))
	p.TimeoutSeconds = 3
	f.Insert(p)
	c := f.ClaimOne("w3", f.At(sec(5)), kindK) // lease 35s, deadline 8s
	if n, ok := next(); !ok || !sameInstant(n, f.At(sec(8))) {
		t.Fatalf("RunNextExpiry = %v, %v; want base+8s (a deadline)", n, ok)
	}
	f.Succeed("w3", c.RunID, f.At(sec(6)))
	if n, ok := next(); !ok || !sameInstant(n, f.At(sec(13))) {
		t.Fatalf("RunNextExpiry after the deadline run ended = %v, %v; want base+13s", n, ok)
	}
	f.Heartbeat("w2", b.RunID, f.At(sec(7))) // lease 17s
	if n, ok := next(); !ok || !sameInstant(n, f.At(sec(17))) {
		t.Fatalf("RunNextExpiry after a heartbeat = %v, %v; want base+17s", n, ok)
	}
	f.Succeed("w2", b.RunID, f.At(sec(8)))
	f.Succeed("w1", a.RunID, f.At(sec(8)))
	if n, ok := next(); ok {
		t.Fatalf("RunNextExpiry with nothing running = %v, want none", n)
	}
}

func testTimeout(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "Deadline", timeoutDeadline)

	parallel(t, ns, "HeartbeatPastDeadline", timeoutHeartbeatPastDeadline)

	parallel(t, ns, "SuccessPastDeadline", timeoutSuccessPastDeadline)

	// The final failure status follows the last failed run: TIMEOUT when it
	// passed its deadline, FAILED otherwise (reported or lease lapse).
	parallel(t, ns, "ReportThenDeadline", timeoutReportThenDeadline)

	parallel(t, ns, "DeadlineThenReport", timeoutDeadlineThenReport)

	parallel(t, ns, "DeadlineThenLeaseLapse", timeoutDeadlineThenLeaseLapse)
}

// timeoutDeadline is the Deadline subtest of testTimeout.
func timeoutDeadline(t *testing.T, f *Fixture) {
	// TimeoutSeconds 5: the deadline holds even while heartbeats keep
	// the lease valid; a passed deadline is retried after Backoff, and
	// the final one leaves the task TIMEOUT.
	p := f.Params(kindK, f.At(0))
	p.TimeoutSeconds = 5
	p.MaxRetries = 1
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(10)), kindK)
	if c1.TimeoutSeconds != 5 {
		t.Fatalf("claimed run TimeoutSeconds = %d, want 5", c1.TimeoutSeconds)
	}
	wantInstant(t, "run Deadline", runByID(t, f.Get(p.ID), c1.RunID).Deadline, f.At(sec(15)))
	f.Heartbeat("w1", c1.RunID, f.At(sec(14)))
	if res := f.Expire(f.At(sec(15)).Add(-time.Millisecond)); res.Expired != 0 {
		t.Fatalf("RunExpire before the deadline: expired %d", res.Expired)
	}

	if res := f.Expire(f.At(sec(16))); res.Expired != 1 {
		t.Fatalf("RunExpire after the deadline: expired %d, want 1", res.Expired)
	}
	got := f.Get(p.ID)
	wantRunTimedOut(t, got, c1.RunID, f.At(sec(15)), f.At(sec(16)))
	wantStatus(t, got, rota.StatusScheduled)
	wantInstant(t, "RunAt after a passed deadline (now + Backoff(1))", got.RunAt, f.At(sec(23)))
	f.refused(rota.ErrLeaseLost, "w1", c1.RunID, p.ID, f.At(sec(17)))

	f.ClaimNone("w2", f.At(sec(23)).Add(-time.Millisecond), kindK)
	c2 := f.ClaimOne("w2", f.At(sec(23)), kindK)
	if c2.Attempt != 2 {
		t.Fatalf("retry attempt %d, want 2", c2.Attempt)
	}
	wantInstant(t, "second run Deadline", runByID(t, f.Get(p.ID), c2.RunID).Deadline, f.At(sec(28)))
	if res := f.Expire(f.At(sec(29))); res.Expired != 1 {
		t.Fatalf("RunExpire after the second deadline: expired %d, want 1", res.Expired)
	}
	got = f.Get(p.ID)
	wantStatus(t, got, rota.StatusTimeout)
	wantBetween(t, "EndTime", got.EndTime, f.At(sec(28)), f.At(sec(29)))
	if got.IsSucceed {
		t.Fatal("timed-out task IsSucceed")
	}
	wantRunTimedOut(t, got, c2.RunID, f.At(sec(28)), f.At(sec(29)))
	f.ClaimNone("w3", f.At(sec(1000)), kindK)
}

// timeoutHeartbeatPastDeadline is the HeartbeatPastDeadline subtest of testTimeout.
func timeoutHeartbeatPastDeadline(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.TimeoutSeconds = 5
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(10)), kindK) // lease 40s, deadline 15s
	_, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: c.RunID, WorkerID: "w1", Now: f.At(sec(16))})
	wantErr(t, "RunHeartbeat past the deadline", err, rota.ErrLeaseLost)
	got := f.Get(p.ID)
	wantRunTimedOut(t, got, c.RunID, f.At(sec(15)), f.At(sec(16)))
	wantStatus(t, got, rota.StatusScheduled)
}

// timeoutSuccessPastDeadline is the SuccessPastDeadline subtest of testTimeout.
func timeoutSuccessPastDeadline(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.TimeoutSeconds = 5
	p.MaxRetries = 0
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(10)), kindK)
	_, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Success: true, Message: "too late", Now: f.At(sec(16)), Backoff: backoff7})
	wantErr(t, "RunComplete success past the deadline", err, rota.ErrLeaseLost)
	got := f.Get(p.ID)
	wantRunTimedOut(t, got, c.RunID, f.At(sec(15)), f.At(sec(16)))
	wantStatus(t, got, rota.StatusTimeout)
}

// timeoutReportThenDeadline is the ReportThenDeadline subtest of testTimeout.
func timeoutReportThenDeadline(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.TimeoutSeconds = 5
	p.MaxRetries = 1
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(10)), kindK)
	wantStatus(t, f.Fail("w1", c1.RunID, f.At(sec(11)), nil), rota.StatusScheduled)
	f.ClaimOne("w1", f.At(sec(11)), kindK) // deadline 16s
	f.Expire(f.At(sec(17)))
	wantStatus(t, f.Get(p.ID), rota.StatusTimeout)
}

// timeoutDeadlineThenReport is the DeadlineThenReport subtest of testTimeout.
func timeoutDeadlineThenReport(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.TimeoutSeconds = 5
	p.MaxRetries = 1
	f.Insert(p)
	f.ClaimOne("w1", f.At(sec(10)), kindK)
	f.Expire(f.At(sec(16))) // retry at 23s
	c2 := f.ClaimOne("w1", f.At(sec(23)), kindK)
	wantStatus(t, f.Fail("w1", c2.RunID, f.At(sec(24)), backoff7), rota.StatusFailed)
}

// timeoutDeadlineThenLeaseLapse is the DeadlineThenLeaseLapse subtest of testTimeout.
func timeoutDeadlineThenLeaseLapse(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.TimeoutSeconds = 5
	p.HeartbeatTimeoutSeconds = 3
	p.MaxRetries = 1
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(10)), kindK) // lease 13s, deadline 15s
	f.Heartbeat("w1", c1.RunID, f.At(sec(12)))   // lease 15s
	f.Heartbeat("w1", c1.RunID, f.At(sec(14)))   // lease 17s
	f.Expire(f.At(sec(16)))                      // deadline passed, lease valid: retry at 23s
	wantStatus(t, f.Get(p.ID), rota.StatusScheduled)
	f.ClaimOne("w1", f.At(sec(23)), kindK) // lease 26s, deadline 28s
	f.Expire(f.At(sec(27)))                // lease lapsed, deadline not passed
	wantStatus(t, f.Get(p.ID), rota.StatusFailed)
}
