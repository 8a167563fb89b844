package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestClaimRunIDBlock checks that a claim given RunIDBlock (as the
// dispatcher gives it) names its runs from the block, the i-th task of the
// pick the i-th id, for a counter that is positive and one that is
// negative as int64, reserves the block once per claim, and that the runs
// so named are the ones the store knows (their reports succeed).
func TestClaimRunIDBlock(t *testing.T) {
	t.Parallel()
	st := openSchema(t, newSchema(t), "n1")
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	for _, first := range []uint64{0xff, 1<<63 + 5} {
		for range 3 {
			f.InsertNew("k", now)
		}
		var reserved []int
		res, err := st.TaskClaim(t.Context(), store.TaskClaimParams{WorkerID: "w", Kinds: []string{"k"}, Max: 5, Now: now,
			NewRunID: func() string { t.Fatal("NewRunID called with RunIDBlock set"); return "" },
			RunIDBlock: func(n int) (string, uint64) {
				reserved = append(reserved, n)
				return "0123456789abcdef", first
			}})
		if err != nil {
			t.Fatal(err)
		}
		if len(reserved) != 1 || reserved[0] != 5 {
			t.Fatalf("RunIDBlock calls: %v, want one of 5", reserved)
		}
		if len(res.Runs) != 3 {
			t.Fatalf("claimed %d runs, want 3", len(res.Runs))
		}
		for i, r := range res.Runs {
			if want := fmt.Sprintf("0123456789abcdef%016x", first+uint64(i)); r.RunID != want {
				t.Fatalf("run %d: id %s, want %s", i, r.RunID, want)
			}
			if task := f.Succeed("w", r.RunID, now); task.Status != rota.StatusSuccess {
				t.Fatalf("report of run %s: task %s", r.RunID, task.Status)
			}
		}
	}
}
