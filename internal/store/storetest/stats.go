package storetest

import (
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// kindStats is what the suite checks of one store.KindStats: the non-zero
// counts, the oldest waiting age and the paused flag.
type kindStats struct {
	Counts           map[rota.Status]int
	OldestWaitingAge time.Duration
	Paused           bool
}

// stats returns Stats at now by kind, without zero counts.
func (f *Fixture) stats(now time.Time) map[string]kindStats {
	f.TB.Helper()
	s, err := f.Store.Stats(f.Ctx(), now)
	must(f.TB, "Stats", err)
	out := map[string]kindStats{}
	for _, k := range s.Kinds {
		if _, dup := out[k.Kind]; dup {
			f.TB.Fatalf("Stats lists kind %s twice", k.Kind)
		}
		counts := map[rota.Status]int{}
		for st, n := range k.Counts {
			if n != 0 {
				counts[st] = n
			}
		}
		out[k.Kind] = kindStats{Counts: counts, OldestWaitingAge: k.OldestWaitingAge, Paused: k.Paused}
	}
	return out
}

func testStats(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "Counts", func(t *testing.T, f *Fixture) {
		// Kind a: one SUCCESS, one RUNNING, two due SCHEDULED (RunAt 2s and
		// 3s), one delayed SCHEDULED (RunAt 100s). Kind b: one CANCELED, one
		// FAILED, paused.
		f.InsertNew("a", f.At(0))
		f.InsertNew("a", f.At(0))
		runs := f.Claim("w1", f.At(sec(1)), 2, "a").Runs
		if len(runs) != 2 {
			t.Fatalf("claimed %d, want 2", len(runs))
		}
		f.Succeed("w1", runs[0].RunID, f.At(sec(1)))
		f.InsertNew("a", f.At(sec(2)))
		p := f.Params("a", f.At(sec(2)))
		p.RunAt = f.At(sec(3))
		f.Insert(p)
		p = f.Params("a", f.At(sec(2)))
		p.RunAt = f.At(sec(100))
		f.Insert(p)

		b1 := f.InsertNew("b", f.At(0))
		f.stopTask(b1.ID, f.At(sec(1)))
		f.InsertNew("b", f.At(sec(1)))
		c := f.ClaimOne("w2", f.At(sec(1)), "b")
		f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w2", Message: "boom", Now: f.At(sec(2))})
		f.upsertKind(store.KindUpsertParams{Name: "b", Paused: ptr(true)})

		got := f.stats(f.At(sec(10)))
		want := map[string]kindStats{
			"a": {Counts: map[rota.Status]int{rota.StatusSuccess: 1, rota.StatusRunning: 1, rota.StatusScheduled: 3}, OldestWaitingAge: sec(8)},
			"b": {Counts: map[rota.Status]int{rota.StatusCanceled: 1, rota.StatusFailed: 1}, Paused: true},
		}
		diff(t, "Stats at base+10s", want, got)

		// Before the second due task's RunAt only the first waits; before
		// either, nothing does.
		if age := f.stats(f.At(sec(2)).Add(500 * time.Millisecond))["a"].OldestWaitingAge; age != 500*time.Millisecond {
			t.Fatalf("OldestWaitingAge at base+2.5s = %v, want 500ms", age)
		}
		if age := f.stats(f.At(sec(1)))["a"].OldestWaitingAge; age != 0 {
			t.Fatalf("OldestWaitingAge at base+1s = %v, want 0 (nothing due yet)", age)
		}
		// The age grows with Now.
		if age := f.stats(f.At(sec(200)))["a"].OldestWaitingAge; age != sec(198) {
			t.Fatalf("OldestWaitingAge at base+200s = %v, want 198s", age)
		}
	})

	parallel(t, ns, "RetryWaits", func(t *testing.T, f *Fixture) {
		// A task back in SCHEDULED after a failure waits from its new RunAt.
		f.InsertNew(kindK, f.At(0))
		c := f.ClaimOne("w1", f.At(sec(1)), kindK)
		f.Fail("w1", c.RunID, f.At(sec(2)), backoff7) // RunAt 9s
		if age := f.stats(f.At(sec(5)))[kindK].OldestWaitingAge; age != 0 {
			t.Fatalf("OldestWaitingAge while backing off = %v, want 0", age)
		}
		if age := f.stats(f.At(sec(12)))[kindK].OldestWaitingAge; age != sec(3) {
			t.Fatalf("OldestWaitingAge after the backoff = %v, want 3s", age)
		}
	})
}
