package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// testLimits covers a kind's rate limit (token bucket) and retention.
func testLimits(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "RateTokenBucket", func(t *testing.T, f *Fixture) {
		rate := 2.0 // 2 starts per second, burst 2
		if _, err := f.Store.KindUpsert(f.Ctx(), store.KindUpsertParams{Name: kindK, Rate: &rate}); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			f.InsertNew(kindK, f.At(0))
		}
		// A full bucket: 2 at once, then nothing until a token is due.
		if got := f.Claim("w1", f.At(sec(1)), 10, kindK); len(got.Runs) != 2 {
			t.Fatalf("first claim got %d runs, want the burst of 2", len(got.Runs))
		}
		res := f.Claim("w1", f.At(sec(1)), 10, kindK)
		if len(res.Runs) != 0 {
			t.Fatalf("claim on an empty bucket got %d runs", len(res.Runs))
		}
		if want := f.At(sec(1) + 500*time.Millisecond); res.RateLimitedUntil.Before(want) || res.RateLimitedUntil.After(want.Add(10*time.Millisecond)) {
			t.Fatalf("RateLimitedUntil = %v, want about %v (one token at 2/s)", res.RateLimitedUntil, want)
		}
		// Half a second later: one token.
		if got := f.Claim("w1", f.At(sec(1)+500*time.Millisecond), 10, kindK); len(got.Runs) != 1 {
			t.Fatalf("claim after 0.5 s got %d runs, want 1", len(got.Runs))
		}
		// Ten seconds later the bucket is full again, but holds only 2.
		if got := f.Claim("w1", f.At(sec(12)), 10, kindK); len(got.Runs) != 2 {
			t.Fatalf("claim after a long pause got %d runs, want the burst of 2", len(got.Runs))
		}
		// An empty queue is not rate limited.
		other := f.Claim("w1", f.At(sec(12)), 10, "nothing-here")
		if !other.RateLimitedUntil.IsZero() {
			t.Fatalf("empty kind reported rate limited until %v", other.RateLimitedUntil)
		}
	})

	parallel(t, ns, "RateZeroIsUnlimited", func(t *testing.T, f *Fixture) {
		for range 5 {
			f.InsertNew(kindK, f.At(0))
		}
		if got := f.Claim("w1", f.At(sec(1)), 10, kindK); len(got.Runs) != 5 {
			t.Fatalf("claim without a rate got %d runs, want 5", len(got.Runs))
		}
	})

	parallel(t, ns, "Retention", func(t *testing.T, f *Fixture) {
		keep := 60
		if _, err := f.Store.KindUpsert(f.Ctx(), store.KindUpsertParams{Name: kindK, RetentionSeconds: &keep}); err != nil {
			t.Fatal(err)
		}
		old := f.InsertNew(kindK, f.At(0))
		c := f.ClaimOne("w1", f.At(sec(1)), kindK)
		f.Succeed("w1", c.RunID, f.At(sec(2))) // ended at +2s
		waiting := f.InsertNew(kindK, f.At(0)) // never finishes
		kept := f.InsertNew("keep-all", f.At(0))
		c2 := f.ClaimOne("w1", f.At(sec(1)), "keep-all")
		f.Succeed("w1", c2.RunID, f.At(sec(2)))

		n, err := f.Store.TaskCleanup(f.Ctx(), store.TaskCleanupParams{Now: f.At(sec(61)), Limit: 100})
		if err != nil || n != 0 {
			t.Fatalf("cleanup before retention passed: %d, %v; want 0", n, err)
		}
		n, err = f.Store.TaskCleanup(f.Ctx(), store.TaskCleanupParams{Now: f.At(sec(63)), Limit: 100})
		if err != nil || n != 1 {
			t.Fatalf("cleanup after retention: %d, %v; want 1", n, err)
		}
		if _, err := f.Store.TaskGet(f.Ctx(), old.ID); !errors.Is(err, rota.ErrNotFound) {
			t.Fatalf("expired task still there: %v", err)
		}
		f.Get(waiting.ID) // unfinished: kept
		f.Get(kept.ID)    // kind without retention: kept
	})
}
