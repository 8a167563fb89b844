package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// insertBatch inserts n default tasks of kind created at base+1ms·i with
// TaskInsertMany, after applying mod to each; it returns their ids.
func (f *Fixture) insertBatch(kind string, n int, mod func(*store.TaskInsertParams)) []string {
	f.TB.Helper()
	ps := make([]store.TaskInsertParams, n)
	out := make([]string, n)
	for i := range ps {
		ps[i] = f.Params(kind, f.At(0).Add(msec(i)))
		if mod != nil {
			mod(&ps[i])
		}
		out[i] = ps[i].ID
	}
	res, err := f.Store.TaskInsertMany(f.Ctx(), ps)
	must(f.TB, "TaskInsertMany", err)
	if len(res) != n {
		f.TB.Fatalf("TaskInsertMany: %d results, want %d", len(res), n)
	}
	return out
}

// claimLoop has worker claim and succeed tasks of kind one at a time at now
// until a claim comes back empty; it returns the task ids it ran. Errors go
// to errs (it runs off the test goroutine).
func claimLoop(f *Fixture, worker string, kind string, p store.TaskClaimParams, errs chan<- error) []string {
	var got []string
	p.WorkerID, p.WorkerAddress, p.Kinds, p.NewRunID = worker, Addr(worker), []string{kind}, f.NewRunID
	for range 10000 {
		res, err := f.Store.TaskClaim(f.Ctx(), p)
		if err != nil {
			errs <- fmt.Errorf("%s: TaskClaim: %w", worker, err)
			return got
		}
		if len(res.Runs) == 0 {
			return got
		}
		for _, r := range res.Runs {
			got = append(got, r.TaskID)
			_, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: r.RunID, WorkerID: worker, Success: true, Message: "done", Now: p.Now})
			if err != nil {
				errs <- fmt.Errorf("%s: RunComplete(task %s): %w", worker, r.TaskID, err)
				return got
			}
		}
	}
	errs <- fmt.Errorf("%s: claims do not end", worker)
	return got
}

func testConcurrency(t *testing.T, ns newStoreFunc) {
	for _, perClaim := range []int{1, 5} {
		parallel(t, ns, fmt.Sprintf("ClaimExactlyOnceMax%d", perClaim), func(t *testing.T, f *Fixture) { concurrencyClaimExactlyOnce(t, f, perClaim) })
	}

	parallel(t, ns, "MultiWorkerTasks", concurrencyMultiWorkerTasks)

	parallel(t, ns, "HeartbeatsDuringClaims", concurrencyHeartbeatsDuringClaims)
}

// concurrencyMultiWorkerTasks is the MultiWorkerTasks subtest of testConcurrency.
func concurrencyMultiWorkerTasks(t *testing.T, f *Fixture) {
	// 8 workers race over 20 tasks of Workers 3: each task runs exactly
	// three times, by three distinct workers.
	const nTasks, nWorkers = 20, 8
	want := f.insertBatch(kindK, nTasks, func(p *store.TaskInsertParams) { p.Workers = 3 })
	now := f.At(sec(10))
	errs := make(chan error, nWorkers)
	got := make([][]string, nWorkers)
	var wg sync.WaitGroup
	for w := range nWorkers {
		wg.Go(func() {
			got[w] = claimLoop(f, fmt.Sprintf("w%d", w), kindK, store.TaskClaimParams{Max: 2, Now: now}, errs)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	byTask := map[string]map[int]int{}
	for w, ids := range got {
		for _, id := range ids {
			if byTask[id] == nil {
				byTask[id] = map[int]int{}
			}
			byTask[id][w]++
		}
	}
	for _, id := range want {
		if len(byTask[id]) != 3 {
			t.Errorf("task %s ran by %d workers (%v), want 3", id, len(byTask[id]), byTask[id])
		}
		for w, n := range byTask[id] {
			if n != 1 {
				t.Errorf("task %s ran %d times by w%d, want once", id, n, w)
			}
		}
		task := f.Get(id)
		if task.Status != rota.StatusSuccess || countRuns(task, rota.StatusSuccess) != 3 || len(task.Runs) != 3 {
			t.Errorf("task %s: status %s runs %s; want SUCCESS with 3 successful runs", id, task.Status, runsString(task))
		}
	}
}

// concurrencyHeartbeatsDuringClaims is the HeartbeatsDuringClaims subtest of testConcurrency.
func concurrencyHeartbeatsDuringClaims(t *testing.T, f *Fixture) {
	// Heartbeats, claims and the reaper interleave without errors or lost
	// leases: runs renewed in time are never expired.
	const nTasks = 40
	f.insertBatch(kindK, nTasks, nil)
	runs := f.Claim("w0", f.At(sec(1)), 20, kindK).Runs
	if len(runs) != 20 {
		t.Fatalf("w0 claimed %d, want 20", len(runs))
	}
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, r := range runs {
			_, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: r.RunID, WorkerID: "w0", Now: f.At(sec(20 + i%5))})
			if err != nil {
				errs <- fmt.Errorf("heartbeat %d: %w", i, err)
			}
		}
	})
	for w := 1; w <= 4; w++ {
		wg.Go(func() {
			claimLoop(f, fmt.Sprintf("w%d", w), kindK, store.TaskClaimParams{Max: 1, Now: f.At(sec(2))}, errs)
		})
	}
	wg.Go(func() {
		for range 10 {
			res, err := f.Store.RunExpire(f.Ctx(), store.RunExpireParams{Now: f.At(sec(25)), Limit: 100, Backoff: backoff7})
			if err != nil {
				errs <- fmt.Errorf("RunExpire: %w", err)
			} else if res.Expired != 0 {
				errs <- fmt.Errorf("RunExpire at base+25s expired %d runs, whose leases run until base+31s at least", res.Expired)
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(f.ListAll(store.TaskListParams{Status: rota.StatusSuccess})); n != nTasks-20 {
		t.Errorf("%d tasks SUCCESS, want %d", n, nTasks-20)
	}
	if n := len(f.ListAll(store.TaskListParams{Status: rota.StatusRunning})); n != 20 {
		t.Errorf("%d tasks RUNNING, want 20", n)
	}
}

// concurrencyClaimExactlyOnce races 8 workers claiming perClaim tasks at a\n// time over 200 tasks: each task runs exactly once.
func concurrencyClaimExactlyOnce(t *testing.T, f *Fixture, perClaim int) {
	// 8 workers race over 200 tasks: each task runs exactly once and
	// all end SUCCESS.
	const nTasks, nWorkers = 200, 8
	want := f.insertBatch(kindK, nTasks, nil)
	now := f.At(sec(10))
	errs := make(chan error, nWorkers)
	got := make([][]string, nWorkers)
	var wg sync.WaitGroup
	for w := range nWorkers {
		wg.Go(func() {
			got[w] = claimLoop(f, fmt.Sprintf("w%d", w), kindK, store.TaskClaimParams{Max: perClaim, Now: now}, errs)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	runs := map[string]int{}
	for _, ids := range got {
		for _, id := range ids {
			runs[id]++
		}
	}
	for _, id := range want {
		if runs[id] != 1 {
			t.Errorf("task %s ran %d times, want 1", id, runs[id])
		}
	}
	if len(runs) != nTasks {
		t.Errorf("%d distinct tasks ran, want %d", len(runs), nTasks)
	}
	if n := len(f.ListAll(store.TaskListParams{Status: rota.StatusSuccess})); n != nTasks {
		t.Errorf("%d tasks SUCCESS, want %d", n, nTasks)
	}
	active := 0
	for _, ids := range got {
		if len(ids) > 0 {
			active++
		}
	}
	t.Logf("%d of %d workers got work", active, nWorkers)
}
