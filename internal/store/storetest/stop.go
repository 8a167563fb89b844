package storetest

import (
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func testStop(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "Scheduled", stopScheduled)

	parallel(t, ns, "Message", stopMessage)

	parallel(t, ns, "DelayedOrBackingOff", stopDelayedOrBackingOff)

	reports := []struct {
		name   string
		report func(f *Fixture, runID string, now time.Time) store.RunCompleteParams
	}{
		{"Success", func(f *Fixture, runID string, now time.Time) store.RunCompleteParams {
			return store.RunCompleteParams{RunID: runID, WorkerID: "w1", Success: true, Message: "done", Now: now}
		}},
		{"RetryableFailure", func(f *Fixture, runID string, now time.Time) store.RunCompleteParams {
			return store.RunCompleteParams{RunID: runID, WorkerID: "w1", Message: "boom", Retry: true, Now: now, Backoff: backoff7}
		}},
		{"FinalFailure", func(f *Fixture, runID string, now time.Time) store.RunCompleteParams {
			return store.RunCompleteParams{RunID: runID, WorkerID: "w1", Message: "boom", Retry: false, Now: now}
		}},
	}
	for _, r := range reports {
		parallel(t, ns, "RunningThen"+r.name, func(t *testing.T, f *Fixture) { stopRunningThen(t, f, r.report) })
	}

	parallel(t, ns, "LastRunEnds", stopLastRunEnds)

	parallel(t, ns, "RunExpires", stopRunExpires)

	parallel(t, ns, "PartialSuccessStopsAtOnce", stopPartialSuccessStopsAtOnce)

	terminal := []struct {
		name   string
		finish func(f *Fixture)
	}{
		{"Success", func(f *Fixture) {
			c := f.ClaimOne("w1", f.At(sec(1)), kindK)
			f.Succeed("w1", c.RunID, f.At(sec(2)))
		}},
		{"Failed", func(f *Fixture) {
			c := f.ClaimOne("w1", f.At(sec(1)), kindK)
			f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Message: "boom", Now: f.At(sec(2))})
		}},
	}
	for _, c := range terminal {
		parallel(t, ns, "Terminal"+c.name, func(t *testing.T, f *Fixture) { stopTerminal(t, f, c.finish) })
	}

	parallel(t, ns, "Unknown", stopUnknown)
}

// stopScheduled is the Scheduled subtest of testStop.
func stopScheduled(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	f.Insert(p)
	got := f.stopTask(p.ID, f.At(sec(5)))
	want := inserted(p)
	want.Status = rota.StatusCanceled
	want.EndTime = f.At(sec(5))
	want.Message = "stopped"
	want.RunAt = got.RunAt
	got.Runs = nil
	diff(t, "TaskStop result", want, got)
	task := f.Get(p.ID)
	want.RunAt = task.RunAt
	diff(t, "task after TaskStop", want, task)
	f.ClaimNone("w1", f.At(sec(6)), kindK)
}

// stopMessage is the Message subtest of testStop.
func stopMessage(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	got, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: task.ID, Message: "not needed any more", Now: f.At(sec(1))})
	must(t, "TaskStop", err)
	if got.Message != "not needed any more" || f.Get(task.ID).Message != "not needed any more" {
		t.Fatalf("message %q, want the given one", got.Message)
	}
}

// stopDelayedOrBackingOff is the DelayedOrBackingOff subtest of testStop.
func stopDelayedOrBackingOff(t *testing.T, f *Fixture) {
	delayed := f.Params(kindK, f.At(0))
	delayed.RunAt = f.At(time.Hour)
	f.Insert(delayed)
	retrying := f.InsertNew(kindK, f.At(sec(1)))
	c := f.ClaimOne("w1", f.At(sec(2)), kindK)
	if c.TaskID != retrying.ID {
		t.Fatalf("claimed %s, want %s", c.TaskID, retrying.ID)
	}
	f.Fail("w1", c.RunID, f.At(sec(3)), backoff7)
	for _, id := range []string{delayed.ID, retrying.ID} {
		wantStatus(t, f.stopTask(id, f.At(sec(4))), rota.StatusCanceled)
		task := f.Get(id)
		wantStatus(t, task, rota.StatusCanceled)
		wantInstant(t, "EndTime", task.EndTime, f.At(sec(4)))
	}
	if r := runByID(t, f.Get(retrying.ID), c.RunID); r.Status != rota.StatusFailed {
		t.Fatalf("the earlier failed run became %s; it must stay FAILED", r.Status)
	}
	f.ClaimNone("w1", f.At(2*time.Hour), kindK)
}

// stopLastRunEnds is the LastRunEnds subtest of testStop.
func stopLastRunEnds(t *testing.T, f *Fixture) {
	// With two runs, the task ends CANCELED when the last one ends.
	p := f.Params(kindK, f.At(0))
	p.Workers = 2
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	c2 := f.ClaimOne("w2", f.At(sec(1)), kindK)
	f.stopTask(p.ID, f.At(sec(2)))
	if hb := f.Heartbeat("w2", c2.RunID, f.At(sec(2))); !hb.Stop {
		t.Fatal("heartbeat of the second run: stop = false")
	}
	got := f.Succeed("w1", c1.RunID, f.At(sec(3)))
	if got.Status.Terminal() {
		t.Fatalf("task %s while a run still runs, want it to wait for the last run", got.Status)
	}
	f.ClaimNone("w3", f.At(sec(3)), kindK)
	got = f.Fail("w2", c2.RunID, f.At(sec(4)), nil)
	wantStatus(t, got, rota.StatusCanceled)
	task := f.Get(p.ID)
	wantInstant(t, "EndTime", task.EndTime, f.At(sec(4)))
	if countRuns(task, rota.StatusCanceled) != 2 {
		t.Fatalf("runs %s, want both CANCELED", runsString(task))
	}
}

// stopRunExpires is the RunExpires subtest of testStop.
func stopRunExpires(t *testing.T, f *Fixture) {
	// The stopped task's run lapses: the task ends CANCELED (not retried).
	task := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK) // lease 31s
	f.stopTask(task.ID, f.At(sec(2)))
	if res := f.Expire(f.At(sec(32))); res.Expired != 1 {
		t.Fatalf("RunExpire: expired %d, want 1", res.Expired)
	}
	got := f.Get(task.ID)
	wantStatus(t, got, rota.StatusCanceled)
	wantBetween(t, "EndTime", got.EndTime, f.At(sec(31)), f.At(sec(32)))
	if r := runByID(t, got, c.RunID); !r.Status.Terminal() {
		t.Fatalf("lapsed run status %s, want terminal", r.Status)
	}
	f.ClaimNone("w2", f.At(sec(33)), kindK)
}

// stopPartialSuccessStopsAtOnce is the PartialSuccessStopsAtOnce subtest of testStop.
func stopPartialSuccessStopsAtOnce(t *testing.T, f *Fixture) {
	// Workers 3, one success, nothing running: the task is SCHEDULED and
	// a stop cancels it at once.
	p := f.Params(kindK, f.At(0))
	p.Workers = 3
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.Succeed("w1", c.RunID, f.At(sec(2)))
	wantStatus(t, f.stopTask(p.ID, f.At(sec(3))), rota.StatusCanceled)
	if r := runByID(t, f.Get(p.ID), c.RunID); r.Status != rota.StatusSuccess {
		t.Fatalf("the succeeded run became %s", r.Status)
	}
}

// stopUnknown is the Unknown subtest of testStop.
func stopUnknown(t *testing.T, f *Fixture) {
	_, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: f.NewTaskID(f.At(0)), Now: f.At(0)})
	wantErr(t, "TaskStop of an unknown task", err, rota.ErrNotFound)
}

func testUpdate(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "Options", updateOptions)

	parallel(t, ns, "PriorityReordersClaims", updatePriorityReordersClaims)

	parallel(t, ns, "MaxRetriesWhileRunning", updateMaxRetriesWhileRunning)

	finished := []struct {
		name   string
		finish func(f *Fixture, id string)
	}{
		{"Success", func(f *Fixture, _ string) {
			c := f.ClaimOne("w1", f.At(sec(1)), kindK)
			f.Succeed("w1", c.RunID, f.At(sec(2)))
		}},
		{"Failed", func(f *Fixture, _ string) {
			c := f.ClaimOne("w1", f.At(sec(1)), kindK)
			f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Message: "boom", Now: f.At(sec(2))})
		}},
		{"Canceled", func(f *Fixture, id string) { f.stopTask(id, f.At(sec(2))) }},
	}
	for _, c := range finished {
		parallel(t, ns, "Finished"+c.name, func(t *testing.T, f *Fixture) {
			task := f.InsertNew(kindK, f.At(0))
			c.finish(f, task.ID)
			before := f.Get(task.ID)
			high := rota.PriorityHigh
			_, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: task.ID, Priority: &high, Now: f.At(sec(3))})
			wantErr(t, "TaskUpdate of a "+string(before.Status)+" task", err, rota.ErrConflict)
			diff(t, "task after a refused update", before, f.Get(task.ID))
		})
	}

	parallel(t, ns, "Unknown", updateUnknown)
}

// updateOptions is the Options subtest of testUpdate.
func updateOptions(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.WorkerIDs = []string{"w1"}
	p.TimeoutSeconds = 10
	f.Insert(p)
	prio, retries, hbt := rota.PriorityHigh, 7, 60
	got, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{
		ID: p.ID, Priority: &prio, MaxRetries: &retries, HeartbeatTimeoutSeconds: &hbt, Now: f.At(sec(1)),
	})
	must(t, "TaskUpdate", err)
	want := inserted(p)
	want.Priority = rota.PriorityHigh
	want.MaxRetries = 7
	want.HeartbeatTimeoutSeconds = 60
	got.Runs = nil
	diff(t, "TaskUpdate result", want, got)
	diff(t, "task after update", want, f.Get(p.ID))

	// Nil fields leave everything as it is.
	got, err = f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: p.ID, Now: f.At(sec(2))})
	must(t, "TaskUpdate with nothing", err)
	got.Runs = nil
	diff(t, "TaskUpdate with nil fields", want, got)

	c := f.ClaimOne("w1", f.At(sec(3)), kindK)
	if c.Priority != rota.PriorityHigh || c.HeartbeatTimeoutSeconds != 60 {
		t.Fatalf("claimed run %+v, want the updated priority and heartbeat timeout", c)
	}
	wantInstant(t, "lease with the updated heartbeat timeout", c.LeaseExpiresAt, f.At(sec(63)))
}

// updatePriorityReordersClaims is the PriorityReordersClaims subtest of testUpdate.
func updatePriorityReordersClaims(t *testing.T, f *Fixture) {
	older := f.InsertNew(kindK, f.At(0))
	newer := f.InsertNew(kindK, f.At(sec(1)))
	high := rota.PriorityHigh
	_, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: newer.ID, Priority: &high, Now: f.At(sec(2))})
	must(t, "TaskUpdate", err)
	if c := f.ClaimOne("w1", f.At(sec(3)), kindK); c.TaskID != newer.ID {
		t.Fatalf("claimed %s, want the task raised to high %s (not %s)", c.TaskID, newer.ID, older.ID)
	}
}

// updateMaxRetriesWhileRunning is the MaxRetriesWhileRunning subtest of testUpdate.
func updateMaxRetriesWhileRunning(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.MaxRetries = 0
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	one := 1
	got, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: p.ID, MaxRetries: &one, Now: f.At(sec(2))})
	must(t, "TaskUpdate of a running task", err)
	wantStatus(t, got, rota.StatusRunning)
	if hb := f.Heartbeat("w1", c.RunID, f.At(sec(3))); hb.Stop {
		t.Fatal("heartbeat after a MaxRetries update: stop = true")
	}
	wantStatus(t, f.Fail("w1", c.RunID, f.At(sec(4)), nil), rota.StatusScheduled)
	c2 := f.ClaimOne("w1", f.At(sec(5)), kindK)
	wantStatus(t, f.Fail("w1", c2.RunID, f.At(sec(6)), nil), rota.StatusFailed)
}

// updateUnknown is the Unknown subtest of testUpdate.
func updateUnknown(t *testing.T, f *Fixture) {
	high := rota.PriorityHigh
	_, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: f.NewTaskID(f.At(0)), Priority: &high, Now: f.At(0)})
	wantErr(t, "TaskUpdate of an unknown task", err, rota.ErrNotFound)
}

// stopRunningThen stops a task while its run is held, then ends the run with\n// the report made by report: the task ends CANCELED.
func stopRunningThen(t *testing.T, f *Fixture, report func(f *Fixture, runID string, now time.Time) store.RunCompleteParams) {
	// Workers 2, so that only the stop keeps w2 from claiming it.
	p := f.Params(kindK, f.At(0))
	p.Workers = 2
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)

	got := f.stopTask(p.ID, f.At(sec(2)))
	wantStatus(t, got, rota.StatusRunning)
	task := f.Get(p.ID)
	wantStatus(t, task, rota.StatusRunning)
	if run := runByID(t, task, c.RunID); !run.StopRequested || run.Status != rota.StatusRunning {
		t.Fatalf("run of a stopped task: %+v, want RUNNING with StopRequested", run)
	}
	hb := f.Heartbeat("w1", c.RunID, f.At(sec(3)))
	if !hb.Stop || hb.Drain {
		t.Fatalf("heartbeat of a stopped task's run: stop %v drain %v, want stop only", hb.Stop, hb.Drain)
	}
	f.ClaimNone("w2", f.At(sec(3)), kindK)
	f.stopTask(p.ID, f.At(sec(3))) // stopping twice is not an error

	got = f.Complete(report(f, c.RunID, f.At(sec(4))))
	wantStatus(t, got, rota.StatusCanceled)
	task = f.Get(p.ID)
	wantStatus(t, task, rota.StatusCanceled)
	wantInstant(t, "EndTime", task.EndTime, f.At(sec(4)))
	if task.IsSucceed {
		t.Fatal("canceled task IsSucceed")
	}
	if run := runByID(t, task, c.RunID); run.Status != rota.StatusCanceled {
		t.Fatalf("run of a stopped task ended %s, want CANCELED", run.Status)
	}
	f.ClaimNone("w2", f.At(time.Hour), kindK)
}

// stopTerminal refuses to stop a task that finish ended, and changes nothing.
func stopTerminal(t *testing.T, f *Fixture, finish func(f *Fixture)) {
	task := f.InsertNew(kindK, f.At(0))
	finish(f)
	before := f.Get(task.ID)
	_, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: task.ID, Now: f.At(sec(3))})
	wantErr(t, "TaskStop of a "+string(before.Status)+" task", err, rota.ErrConflict)
	diff(t, "task after a refused stop", before, f.Get(task.ID))
}
