package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// workers returns WorkerList at now sorted by id; it fails the test on
// error.
func (f *Fixture) workers(now time.Time) []rota.Worker {
	f.TB.Helper()
	ws, err := f.Store.WorkerList(f.Ctx(), now)
	must(f.TB, "WorkerList", err)
	slices.SortFunc(ws, func(a, b rota.Worker) int { return strings.Compare(a.ID, b.ID) })
	return ws
}

// worker returns one worker of WorkerList at now.
func (f *Fixture) worker(id string, now time.Time) rota.Worker {
	f.TB.Helper()
	for _, w := range f.workers(now) {
		if w.ID == id {
			return w
		}
	}
	f.TB.Fatalf("WorkerList at %s has no worker %s", f.rel(now), id)
	return rota.Worker{}
}

// claimWait claims like Claim, with a long-poll wait and explicit kinds.
func (f *Fixture) claimWait(worker string, now time.Time, wait time.Duration, kinds ...string) store.TaskClaimResult {
	f.TB.Helper()
	res, err := f.Store.TaskClaim(f.Ctx(), store.TaskClaimParams{
		WorkerID: worker, WorkerAddress: Addr(worker), Kinds: kinds, Max: 1, Wait: wait, Now: now, NewRunID: f.NewRunID,
	})
	must(f.TB, "TaskClaim", err)
	return res
}

func testWorker(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "RecordedByClaim", workerRecordedByClaim)

	parallel(t, ns, "Liveness", workerLiveness)

	parallel(t, ns, "Stop", workerStop)

	parallel(t, ns, "StopUnknown", workerStopUnknown)

	parallel(t, ns, "RunningCount", workerRunningCount)
}

// workerRecordedByClaim is the RecordedByClaim subtest of testWorker.
func workerRecordedByClaim(t *testing.T, f *Fixture) {
	if ws := f.workers(f.At(0)); len(ws) != 0 {
		t.Fatalf("WorkerList of an empty store: %+v", ws)
	}
	f.InsertNew("a", f.At(0))
	if n := len(f.claimWait("w1", f.At(sec(1)), 10*time.Second, "b", "a").Runs); n != 1 {
		t.Fatalf("claim: %d runs, want 1", n)
	}
	f.claimWait("w2", f.At(sec(2)), 0, "c") // nothing to hand out, still seen
	want := []rota.Worker{
		{ID: "w1", Address: Addr("w1"), Kinds: []string{"a", "b"}, Running: 1, FirstSeen: f.At(sec(1)), LastSeen: f.At(sec(1)), Status: rota.WorkerActive},
		{ID: "w2", Address: Addr("w2"), Kinds: []string{"c"}, FirstSeen: f.At(sec(2)), LastSeen: f.At(sec(2)), Status: rota.WorkerActive},
	}
	diff(t, "WorkerList", want, f.workers(f.At(sec(3))))
}

// workerLiveness is the Liveness subtest of testWorker.
func workerLiveness(t *testing.T, f *Fixture) {
	// Active until LastSeen + WorkerLiveness + the Wait of its last
	// claim; lost after; active again as soon as it is seen. The suite
	// stays a second clear of each boundary.
	live := store.WorkerLiveness
	p := f.Params(kindK, f.At(0))
	p.HeartbeatTimeoutSeconds = 24 * 3600
	f.Insert(p)
	res := f.claimWait("w1", f.At(0), 10*time.Second, kindK)
	if len(res.Runs) != 1 {
		t.Fatalf("claim: %d runs", len(res.Runs))
	}
	check := func(phase string, at time.Duration, want rota.WorkerStatus) {
		t.Helper()
		if got := f.worker("w1", f.At(at)).Status; got != want {
			t.Fatalf("%s: status at base+%v = %s, want %s", phase, at, got, want)
		}
	}
	end := live + 10*time.Second // of the first claim's window
	phase := "after a claim at 0s with wait 10s"
	check(phase, 0, rota.WorkerActive)
	check(phase, end-time.Second, rota.WorkerActive)
	check(phase, end+time.Second, rota.WorkerLost)
	check(phase, end+time.Hour, rota.WorkerLost)

	hbAt := end + 5*time.Second
	f.Heartbeat("w1", res.Runs[0].RunID, f.At(hbAt))
	wantInstant(t, "LastSeen after a heartbeat", f.worker("w1", f.At(hbAt)).LastSeen, f.At(hbAt))
	end = hbAt + live + 10*time.Second // the last claim's wait still counts
	phase = "after a heartbeat"
	check(phase, hbAt, rota.WorkerActive)
	check(phase, end-time.Second, rota.WorkerActive)
	check(phase, end+time.Second, rota.WorkerLost)

	claimAt := end + 15*time.Second
	f.claimWait("w1", f.At(claimAt), 0, kindK)
	end = claimAt + live
	phase = "after a claim with no wait"
	check(phase, claimAt, rota.WorkerActive)
	check(phase, end-time.Second, rota.WorkerActive)
	check(phase, end+time.Second, rota.WorkerLost)
	w := f.worker("w1", f.At(claimAt))
	wantInstant(t, "FirstSeen", w.FirstSeen, f.At(0))
	wantInstant(t, "LastSeen", w.LastSeen, f.At(claimAt))
	if w.Running != 1 {
		t.Fatalf("Running = %d, want 1", w.Running)
	}
}

// workerStop is the Stop subtest of testWorker.
func workerStop(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(0))
	b := f.InsertNew(kindK, f.At(sec(1)))
	c := f.ClaimOne("w1", f.At(sec(2)), kindK)
	if c.TaskID != a.ID {
		t.Fatalf("claimed %s, want %s", c.TaskID, a.ID)
	}
	w, err := f.Store.WorkerStop(f.Ctx(), "w1", f.At(sec(3)))
	must(t, "WorkerStop", err)
	if w.ID != "w1" || !w.StopRequested {
		t.Fatalf("WorkerStop result %+v, want w1 with StopRequested", w)
	}

	res := f.Claim("w1", f.At(sec(4)), 5, kindK)
	if !res.Drain || len(res.Runs) != 0 {
		t.Fatalf("claim of a stopped worker: drain %v, %d runs; want drain and none", res.Drain, len(res.Runs))
	}
	wantStatus(t, f.Get(b.ID), rota.StatusScheduled)
	hb := f.Heartbeat("w1", c.RunID, f.At(sec(5)))
	if !hb.Drain || hb.Stop {
		t.Fatalf("heartbeat of a draining worker: drain %v stop %v; want drain only", hb.Drain, hb.Stop)
	}
	w1 := f.worker("w1", f.At(sec(5)))
	if !w1.StopRequested || w1.Running != 1 || w1.Status != rota.WorkerActive {
		t.Fatalf("draining worker holding a run: %+v; want StopRequested, Running 1, active", w1)
	}

	wantStatus(t, f.Succeed("w1", c.RunID, f.At(sec(6))), rota.StatusSuccess) // a draining worker finishes its runs
	w1 = f.worker("w1", f.At(sec(7)))
	if w1.Status != rota.WorkerStopped || w1.Running != 0 {
		t.Fatalf("drained worker: status %s running %d; want stopped, 0", w1.Status, w1.Running)
	}
	if res := f.Claim("w1", f.At(sec(8)), 5, kindK); !res.Drain || len(res.Runs) != 0 {
		t.Fatalf("claim of a stopped worker: drain %v, %d runs", res.Drain, len(res.Runs))
	}
	if got := f.ClaimOne("w2", f.At(sec(8)), kindK); got.TaskID != b.ID {
		t.Fatalf("w2 claimed %s, want %s", got.TaskID, b.ID)
	}
	if w2 := f.worker("w2", f.At(sec(8))); w2.StopRequested || w2.Status != rota.WorkerActive {
		t.Fatalf("other worker %+v, want active", w2)
	}
}

// workerStopUnknown is the StopUnknown subtest of testWorker.
func workerStopUnknown(t *testing.T, f *Fixture) {
	f.Claim("w1", f.At(0), 1, kindK)
	_, err := f.Store.WorkerStop(f.Ctx(), "nope", f.At(sec(1)))
	wantErr(t, "WorkerStop(unknown)", err, rota.ErrNotFound)
}

// workerRunningCount is the RunningCount subtest of testWorker.
func workerRunningCount(t *testing.T, f *Fixture) {
	for i := range 4 {
		f.InsertNew(kindK, f.At(sec(i)))
	}
	p := f.Params(kindK, f.At(sec(5)))
	p.WorkerIDs = []string{"w2"}
	p.HeartbeatTimeoutSeconds = 300
	f.Insert(p)
	runs := f.Claim("w1", f.At(sec(10)), 4, kindK).Runs
	if len(runs) != 4 {
		t.Fatalf("w1 claimed %d, want 4", len(runs))
	}
	f.ClaimOne("w2", f.At(sec(10)), kindK)
	running := func(at time.Duration) (int, int) {
		t.Helper()
		return f.worker("w1", f.At(at)).Running, f.worker("w2", f.At(at)).Running
	}
	if r1, r2 := running(sec(10)); r1 != 4 || r2 != 1 {
		t.Fatalf("Running after claims: w1 %d w2 %d, want 4 and 1", r1, r2)
	}
	f.Succeed("w1", runs[0].RunID, f.At(sec(11)))
	f.Fail("w1", runs[1].RunID, f.At(sec(12)), backoff7)
	if r1, r2 := running(sec(12)); r1 != 2 || r2 != 1 {
		t.Fatalf("Running after a success and a failure: w1 %d w2 %d, want 2 and 1", r1, r2)
	}
	f.Expire(f.At(sec(41)))
	if r1, r2 := running(sec(41)); r1 != 0 || r2 != 1 {
		t.Fatalf("Running after w1's leases lapsed: w1 %d w2 %d, want 0 and 1", r1, r2)
	}
}
