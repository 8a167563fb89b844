package mongostore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storetest"
)

func TestDbgLoop(t *testing.T) {
	for _, workers := range []int{1, 8} {
		f := storetest.NewFixture(t, open(t))
		ps := make([]store.TaskInsertParams, 200)
		for i := range ps {
			ps[i] = f.Params("k", f.At(time.Duration(i)*time.Millisecond))
		}
		if _, err := f.Store.TaskInsertMany(f.Ctx(), ps); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var n atomic.Int64
		var claimT, doneT atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for {
					t0 := time.Now()
					res, err := f.Store.TaskClaim(f.Ctx(), store.TaskClaimParams{WorkerID: fmt.Sprint("w", w), Kinds: []string{"k"}, Max: 5, Now: f.At(10 * time.Second), NewRunID: f.NewRunID})
					claimT.Add(int64(time.Since(t0)))
					if err != nil || len(res.Runs) == 0 {
						return
					}
					for _, r := range res.Runs {
						t1 := time.Now()
						if _, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: r.RunID, WorkerID: fmt.Sprint("w", w), Success: true, Now: f.At(10 * time.Second)}); err != nil {
							t.Error(err)
						}
						doneT.Add(int64(time.Since(t1)))
						n.Add(1)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d workers: %d tasks in %v; claim time %v, complete time %v", workers, n.Load(), time.Since(start), time.Duration(claimT.Load()), time.Duration(doneT.Load()))
	}
}
