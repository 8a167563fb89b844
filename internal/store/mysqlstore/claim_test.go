package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestClaimMixedGroup claims, in one claim, a fresh task, a retried one
// (its failed run moves to the history) and a task of two workers (its run
// goes to the history, the task stays claimable by another worker): the
// one set-based UPDATE must give each its own run, attempt and state.
func TestClaimMixedGroup(t *testing.T) {
	t.Parallel()
	st := open(t) // checks the store's invariants at the end
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	retried := f.InsertNew("k", now)
	f.Fail("w0", f.ClaimOne("w0", now, "k").RunID, now, func(int) time.Duration { return 0 })
	fresh := f.InsertNew("k", now)
	p := f.Params("k", now)
	p.Workers = 2
	multi := f.Insert(p)

	runs := f.Claim("w1", now, 10, "k").Runs
	if len(runs) != 3 {
		t.Fatalf("claimed %d runs, want 3: %+v", len(runs), runs)
	}
	byTask := map[string]rota.ClaimedRun{}
	for _, r := range runs {
		byTask[r.TaskID] = r
	}
	want := map[string]int{retried.ID: 2, fresh.ID: 1, multi.ID: 1} // attempts
	for id, attempt := range want {
		r, ok := byTask[id]
		if !ok || r.Attempt != attempt {
			t.Fatalf("task %s: run %+v, want attempt %d", id, r, attempt)
		}
		task := f.Get(id)
		last := task.Runs[len(task.Runs)-1]
		if task.Status != rota.StatusRunning || task.Attempt != attempt || last.ID != r.RunID ||
			last.WorkerID != "w1" || last.Status != rota.StatusRunning || !last.LeaseExpiresAt.Equal(r.LeaseExpiresAt) {
			t.Fatalf("task %s after the claim: %+v", id, task)
		}
	}
	if got := f.Get(retried.ID).Runs; len(got) != 2 || got[0].Status != rota.StatusFailed || got[0].WorkerID != "w0" {
		t.Fatalf("retried task's runs: %+v", got)
	}
	// The task of two workers is still claimable, by another worker only.
	if again := f.Claim("w1", now, 10, "k").Runs; len(again) != 0 {
		t.Fatalf("w1 claimed again: %+v", again)
	}
	other := f.ClaimOne("w2", now, "k")
	if other.TaskID != multi.ID {
		t.Fatalf("w2 claimed %s, want the task of two workers %s", other.TaskID, multi.ID)
	}
	for _, r := range runs {
		f.Succeed("w1", r.RunID, now)
	}
	f.Succeed("w2", other.RunID, now)
	for id := range want {
		if task := f.Get(id); task.Status != rota.StatusSuccess {
			t.Fatalf("task %s: %s, want SUCCESS", id, task.Status)
		}
	}
}
