package storetest

import (
	"slices"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// testProtocol covers the worker-protocol details beyond the state
// machine: releasing a run, progress notes, the heartbeat timeout a
// heartbeat reports, and a worker's kinds across claims.
func testProtocol(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "ReleaseSpendsNoRetry", protocolReleaseSpendsNoRetry)

	parallel(t, ns, "ReleaseOfStoppedTaskCancels", protocolReleaseOfStoppedTaskCancels)

	parallel(t, ns, "StopReasonKept", protocolStopReasonKept)

	parallel(t, ns, "ReleaseByOtherWorkerRefused", protocolReleaseByOtherWorkerRefused)

	parallel(t, ns, "HeartbeatProgressAndTimeout", protocolHeartbeatProgressAndTimeout)

	parallel(t, ns, "WorkerKindsAccumulate", protocolWorkerKindsAccumulate)
}

// protocolReleaseSpendsNoRetry is the ReleaseSpendsNoRetry subtest of testProtocol.
func protocolReleaseSpendsNoRetry(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.MaxRetries = 0
	task := f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	got := f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Release: true, Message: "draining", Now: f.At(sec(2))})
	wantStatus(t, got, rota.StatusScheduled)
	if len(got.Runs) != 1 || got.Runs[0].Status != rota.StatusCanceled || got.Runs[0].Message != "draining" {
		t.Fatalf("released run = %+v, want CANCELED with the release message", got.Runs)
	}
	// Claimable at once by another worker: with MaxRetries 0 a counted
	// failure would have ended the task, so the release spent nothing.
	c2 := f.ClaimOne("w2", f.At(sec(2)), kindK)
	if c2.TaskID != task.ID || c2.Attempt != 2 {
		t.Fatalf("claim after release = %+v, want task %s attempt 2", c2, task.ID)
	}
	done := f.Succeed("w2", c2.RunID, f.At(sec(3)))
	wantStatus(t, done, rota.StatusSuccess)
}

// protocolReleaseOfStoppedTaskCancels is the ReleaseOfStoppedTaskCancels subtest of testProtocol.
func protocolReleaseOfStoppedTaskCancels(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	if _, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: task.ID, Now: f.At(sec(2))}); err != nil {
		t.Fatal(err)
	}
	got := f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Release: true, Now: f.At(sec(3))})
	wantStatus(t, got, rota.StatusCanceled)
}

// protocolStopReasonKept is the StopReasonKept subtest of testProtocol.
func protocolStopReasonKept(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	if _, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: task.ID, Message: "operator: bad input", Now: f.At(sec(2))}); err != nil {
		t.Fatal(err)
	}
	got := f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Message: "context canceled", Retry: true, Now: f.At(sec(3))})
	wantStatus(t, got, rota.StatusCanceled)
	if got.Message != "operator: bad input" || got.Runs[0].Message != "context canceled" {
		t.Fatalf("task message %q, run message %q; want the stop reason on the task and the report on the run", got.Message, got.Runs[0].Message)
	}
}

// protocolReleaseByOtherWorkerRefused is the ReleaseByOtherWorkerRefused subtest of testProtocol.
func protocolReleaseByOtherWorkerRefused(t *testing.T, f *Fixture) {
	task := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	_, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: c.RunID, WorkerID: "w2", Release: true, Now: f.At(sec(2))})
	wantErr(t, "release by another worker", err, rota.ErrLeaseLost)
	wantStatus(t, f.Get(task.ID), rota.StatusRunning)
}

// protocolHeartbeatProgressAndTimeout is the HeartbeatProgressAndTimeout subtest of testProtocol.
func protocolHeartbeatProgressAndTimeout(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.HeartbeatTimeoutSeconds = 30
	task := f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	res, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: c.RunID, WorkerID: "w1", Message: "50%", Now: f.At(sec(2))})
	if err != nil {
		t.Fatal(err)
	}
	if res.HeartbeatTimeoutSeconds != 30 {
		t.Fatalf("heartbeat reports timeout %d, want 30", res.HeartbeatTimeoutSeconds)
	}
	if got := f.Get(task.ID).Runs[0].Message; got != "50%" {
		t.Fatalf("run message after a progress heartbeat = %q, want 50%%", got)
	}
	three := 3
	if _, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: task.ID, HeartbeatTimeoutSeconds: &three, Now: f.At(sec(3))}); err != nil {
		t.Fatal(err)
	}
	res, err = f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: c.RunID, WorkerID: "w1", Now: f.At(sec(4))})
	if err != nil {
		t.Fatal(err)
	}
	if res.HeartbeatTimeoutSeconds != 3 || !res.LeaseExpiresAt.Equal(f.At(sec(7))) {
		t.Fatalf("heartbeat after PATCH = %+v, want timeout 3 and lease until +7s", res)
	}
	if got := f.Get(task.ID).Runs[0].Message; got != "50%" {
		t.Fatalf("a heartbeat without a note changed the message to %q", got)
	}
}

// protocolWorkerKindsAccumulate is the WorkerKindsAccumulate subtest of testProtocol.
func protocolWorkerKindsAccumulate(t *testing.T, f *Fixture) {
	f.ClaimNone("multi", f.At(0), "a")
	f.ClaimNone("multi", f.At(sec(1)), "b", "a")
	ws, err := f.Store.WorkerList(f.Ctx(), f.At(sec(2)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 {
		t.Fatalf("workers = %+v", ws)
	}
	kinds := slices.Sorted(slices.Values(ws[0].Kinds))
	if !slices.Equal(kinds, []string{"a", "b"}) {
		t.Fatalf("worker kinds = %v, want the union [a b] of its claims", ws[0].Kinds)
	}
}
