package storetest

import (
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func testMultiWorker(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "ThreeAtOnce", multiWorkerThreeAtOnce)

	parallel(t, ns, "PartialSuccessWaits", multiWorkerPartialSuccessWaits)

	parallel(t, ns, "FailedRunFreesRoom", multiWorkerFailedRunFreesRoom)

	parallel(t, ns, "FinalFailureStopsOthers", multiWorkerFinalFailureStopsOthers)
}

// multiWorkerThreeAtOnce is the ThreeAtOnce subtest of testMultiWorker.
func multiWorkerThreeAtOnce(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.Workers = 3
	f.Insert(p)

	c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.ClaimNone("w1", f.At(sec(1)), kindK) // not twice while running it
	c2 := f.ClaimOne("w2", f.At(sec(2)), kindK)
	c3 := f.ClaimOne("w3", f.At(sec(3)), kindK)
	for i, c := range []rota.ClaimedRun{c1, c2, c3} {
		if c.TaskID != p.ID || c.Attempt != i+1 {
			t.Fatalf("claim %d: task %s attempt %d, want %s attempt %d", i+1, c.TaskID, c.Attempt, p.ID, i+1)
		}
	}
	if c1.RunID == c2.RunID || c2.RunID == c3.RunID || c1.RunID == c3.RunID {
		t.Fatal("runs share an id")
	}
	f.ClaimNone("w4", f.At(sec(4)), kindK) // full
	task := f.Get(p.ID)
	wantStatus(t, task, rota.StatusRunning)
	if n := countRuns(task, rota.StatusRunning); n != 3 || len(task.Runs) != 3 {
		t.Fatalf("runs %s, want 3 RUNNING", runsString(task))
	}
	wantInstant(t, "StartTime (first run's)", task.StartTime, f.At(sec(1)))

	got := f.Succeed("w1", c1.RunID, f.At(sec(5)))
	wantStatus(t, got, rota.StatusRunning)
	if got.IsSucceed || !got.EndTime.IsZero() {
		t.Fatalf("after 1 of 3 successes: IsSucceed %v EndTime %v", got.IsSucceed, got.EndTime)
	}
	f.ClaimNone("w1", f.At(sec(6)), kindK) // not after succeeding it
	f.ClaimNone("w4", f.At(sec(6)), kindK) // 2 running + 1 succeeded = 3

	wantStatus(t, f.Succeed("w2", c2.RunID, f.At(sec(7))), rota.StatusRunning)
	got = f.Succeed("w3", c3.RunID, f.At(sec(8)))
	wantStatus(t, got, rota.StatusSuccess)
	task = f.Get(p.ID)
	wantStatus(t, task, rota.StatusSuccess)
	wantInstant(t, "EndTime", task.EndTime, f.At(sec(8)))
	if !task.IsSucceed || countRuns(task, rota.StatusSuccess) != 3 {
		t.Fatalf("IsSucceed %v, runs %s; want 3 SUCCESS", task.IsSucceed, runsString(task))
	}
	f.ClaimNone("w4", f.At(sec(9)), kindK)
}

// multiWorkerPartialSuccessWaits is the PartialSuccessWaits subtest of testMultiWorker.
func multiWorkerPartialSuccessWaits(t *testing.T, f *Fixture) {
	// One success of three and nothing running: the task waits,
	// SCHEDULED, for other workers.
	p := f.Params(kindK, f.At(0))
	p.Workers = 3
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	got := f.Succeed("w1", c1.RunID, f.At(sec(2)))
	wantStatus(t, got, rota.StatusScheduled)
	task := f.Get(p.ID)
	wantStatus(t, task, rota.StatusScheduled)
	if task.IsSucceed || !task.EndTime.IsZero() {
		t.Fatalf("IsSucceed %v EndTime %v, want neither yet", task.IsSucceed, task.EndTime)
	}
	f.ClaimNone("w1", f.At(sec(3)), kindK)
	c2 := f.ClaimOne("w2", f.At(sec(3)), kindK)
	if c2.Attempt != 2 {
		t.Fatalf("second worker's attempt %d, want 2", c2.Attempt)
	}
	wantStatus(t, f.Succeed("w2", c2.RunID, f.At(sec(4))), rota.StatusScheduled)
	c3 := f.ClaimOne("w3", f.At(sec(5)), kindK)
	wantStatus(t, f.Succeed("w3", c3.RunID, f.At(sec(6))), rota.StatusSuccess)
}

// multiWorkerFailedRunFreesRoom is the FailedRunFreesRoom subtest of testMultiWorker.
func multiWorkerFailedRunFreesRoom(t *testing.T, f *Fixture) {
	// A failed run does not count toward Workers; the worker whose run
	// failed may take the task again.
	p := f.Params(kindK, f.At(0))
	p.Workers = 2
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.Fail("w1", c1.RunID, f.At(sec(2)), nil)
	c2 := f.ClaimOne("w1", f.At(sec(3)), kindK)
	c3 := f.ClaimOne("w2", f.At(sec(3)), kindK)
	f.ClaimNone("w3", f.At(sec(3)), kindK)
	wantStatus(t, f.Succeed("w1", c2.RunID, f.At(sec(4))), rota.StatusRunning)
	wantStatus(t, f.Succeed("w2", c3.RunID, f.At(sec(4))), rota.StatusSuccess)
}

// multiWorkerFinalFailureStopsOthers is the FinalFailureStopsOthers subtest of testMultiWorker.
func multiWorkerFinalFailureStopsOthers(t *testing.T, f *Fixture) {
	// A final failure fails the task; the other running runs are asked to
	// stop and end CANCELED whatever they report.
	p := f.Params(kindK, f.At(0))
	p.Workers = 2
	p.MaxRetries = 0
	f.Insert(p)
	c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
	c2 := f.ClaimOne("w2", f.At(sec(1)), kindK)
	wantStatus(t, f.Fail("w1", c1.RunID, f.At(sec(2)), nil), rota.StatusFailed)
	f.ClaimNone("w3", f.At(sec(2)), kindK)
	hb := f.Heartbeat("w2", c2.RunID, f.At(sec(3)))
	if !hb.Stop {
		t.Fatal("heartbeat of a run of a failed task: stop = false")
	}
	f.Complete(store.RunCompleteParams{RunID: c2.RunID, WorkerID: "w2", Success: true, Message: "done anyway", Now: f.At(sec(4))})
	task := f.Get(p.ID)
	wantStatus(t, task, rota.StatusFailed)
	wantInstant(t, "EndTime", task.EndTime, f.At(sec(2)))
	if r := runByID(t, task, c2.RunID); r.Status != rota.StatusCanceled {
		t.Fatalf("the other run ended %s, want CANCELED", r.Status)
	}
	if task.IsSucceed {
		t.Fatal("failed task IsSucceed")
	}
}
