package storetest

import (
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
)

// Benchmark runs the hot-path benchmarks against fresh stores made by
// newStore (the same function Run takes): TaskInsert, TaskClaim (one task
// from a pre-filled queue), RunHeartbeat, RunComplete (success) and Cycle
// (submit → claim → succeed), each as a sub-benchmark with ReportAllocs.
// Set-up (pre-filling, claiming) is outside the timed region.
func Benchmark(b *testing.B, newStore func(tb testing.TB) store.Store) {
	b.Run("TaskInsert", func(b *testing.B) { benchTaskInsert(b, newStore) })
	b.Run("TaskClaim", func(b *testing.B) { benchTaskClaim(b, newStore) })
	b.Run("RunHeartbeat", func(b *testing.B) { benchRunHeartbeat(b, newStore) })
	b.Run("RunComplete", func(b *testing.B) { benchRunComplete(b, newStore) })
	b.Run("Cycle", func(b *testing.B) { benchCycle(b, newStore) })
}

// benchTaskInsert inserts one task per iteration.
func benchTaskInsert(b *testing.B, newStore newStoreFunc) {
	f := NewFixture(b, newStore(b))
	ps := make([]store.TaskInsertParams, b.N)
	for i := range ps {
		ps[i] = f.Params(kindK, f.At(msec(i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Store.TaskInsert(f.Ctx(), ps[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTaskClaim claims one task per iteration from a pre-filled queue.
func benchTaskClaim(b *testing.B, newStore newStoreFunc) {
	f := NewFixture(b, newStore(b))
	f.prefill(b.N)
	p := store.TaskClaimParams{WorkerID: "w1", WorkerAddress: Addr("w1"), Kinds: []string{kindK}, Max: 1, Now: f.At(time.Hour), NewRunID: f.untrackedRunID}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := f.Store.TaskClaim(f.Ctx(), p)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Runs) != 1 {
			b.Fatalf("claim got %d runs, want 1", len(res.Runs))
		}
	}
}

// benchRunHeartbeat renews one lease per iteration.
func benchRunHeartbeat(b *testing.B, newStore newStoreFunc) {
	f := NewFixture(b, newStore(b))
	p := f.Params(kindK, f.At(0))
	p.HeartbeatTimeoutSeconds = 10 * 365 * 24 * 3600
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(0), kindK)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: c.RunID, WorkerID: "w1", Now: f.At(msec(i))}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRunComplete reports one claimed run a success per iteration.
func benchRunComplete(b *testing.B, newStore newStoreFunc) {
	f := NewFixture(b, newStore(b))
	f.prefill(b.N)
	now := f.At(time.Hour)
	var runIDs []string
	for len(runIDs) < b.N {
		res := f.Claim("w1", now, min(100, b.N-len(runIDs)), kindK)
		if len(res.Runs) == 0 {
			b.Fatalf("claimed %d of %d tasks", len(runIDs), b.N)
		}
		for _, r := range res.Runs {
			runIDs = append(runIDs, r.RunID)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: runIDs[i], WorkerID: "w1", Success: true, Message: "done", Now: now}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCycle submits, claims and succeeds one task per iteration.
func benchCycle(b *testing.B, newStore newStoreFunc) {
	f := NewFixture(b, newStore(b))
	ps := make([]store.TaskInsertParams, b.N)
	for i := range ps {
		ps[i] = f.Params(kindK, f.At(msec(i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now := f.At(msec(i))
		if _, err := f.Store.TaskInsert(f.Ctx(), ps[i]); err != nil {
			b.Fatal(err)
		}
		res, err := f.Store.TaskClaim(f.Ctx(), store.TaskClaimParams{WorkerID: "w1", WorkerAddress: Addr("w1"), Kinds: []string{kindK}, Max: 1, Now: now, NewRunID: f.untrackedRunID})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Runs) != 1 {
			b.Fatalf("claim got %d runs, want 1", len(res.Runs))
		}
		if _, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: res.Runs[0].RunID, WorkerID: "w1", Success: true, Now: now}); err != nil {
			b.Fatal(err)
		}
	}
}

// prefill inserts n default tasks with TaskInsertMany in batches of 500,
// created 1ms apart from Base.
func (f *Fixture) prefill(n int) {
	f.TB.Helper()
	for done := 0; done < n; {
		batch := make([]store.TaskInsertParams, min(500, n-done))
		for i := range batch {
			batch[i] = f.Params(kindK, f.At(msec(done+i)))
		}
		if _, err := f.Store.TaskInsertMany(f.Ctx(), batch); err != nil {
			f.TB.Fatalf("TaskInsertMany: %v", err)
		}
		done += len(batch)
	}
}

// untrackedRunID is NewRunID without the bookkeeping of Issued, so that
// benchmarks measure the store's allocations, not the suite's.
func (f *Fixture) untrackedRunID() string { return f.runIDs.New(f.Base) }
