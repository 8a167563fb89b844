package sqlitestore_test

import (
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// BenchmarkGroupCycleHeld is BenchmarkGroupCycle with groups made the
// same at every run: the writer is held while the reports queue, so the
// 100 reports of an iteration always commit as one group. Its work per
// iteration does not depend on scheduling, so that an instruction count
// (valgrind --tool=cachegrind) compares two versions of the store.
func BenchmarkGroupCycleHeld(b *testing.B) {
	const batch = 100
	st := open(b).(*sqlitestore.Store)
	f := storetest.NewFixture(b, st)
	now := f.At(0)
	ps := make([]store.TaskInsertParams, batch)
	errs := make(chan error, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range ps {
			ps[i] = f.Params("k", now)
		}
		if _, err := st.TaskInsertMany(f.Ctx(), ps); err != nil {
			b.Fatal(err)
		}
		runs := f.Claim("w1", now, batch, "k").Runs
		release := st.HoldWriterForTest()
		for _, r := range runs {
			go func() {
				_, err := st.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now})
				errs <- err
			}()
		}
		for st.QueuedForTest() < len(runs) {
			time.Sleep(100 * time.Microsecond)
		}
		release()
		for range runs {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
}
