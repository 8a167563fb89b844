package mysqlstore_test

import (
	"testing"

	"github.com/rotahq/rota/internal/store/mysqlstore/mysqltest"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestCostPerTask pins what each hot path asks of MySQL, so that a change
// cannot add a statement or a round trip unnoticed. The driver
// interpolates parameters, so each statement is one round trip, and so
// are START TRANSACTION and COMMIT; each COMMIT is one redo log flush
// (which InnoDB shares among concurrent commits).
func TestCostPerTask(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openDB(t, mysqltest.NewDatabase(t), "n1", &c)
	tx := func(n int64) storecost.Counts { return storetest.Transaction(n, n) }
	storetest.WantHotPathCost(t, "MySQL", st, &c, nil, map[string]storecost.Counts{
		// BEGIN; INSERT tasks; INSERT changes (the wake-up of other
		// nodes); COMMIT.
		storetest.CostInsert: tx(4),
		// BEGIN; SELECT workers FOR UPDATE (drain flag, kinds); upsert
		// workers; SELECT kinds FOR UPDATE; the pick (FOR UPDATE SKIP
		// LOCKED); UPDATE tasks (the run, in the task row); UPDATE kinds
		// (round_pos, rate tokens); COMMIT.
		storetest.CostClaim: tx(8),
		// BEGIN; SELECT tasks FOR UPDATE (by run id, with the worker's
		// drain flag); UPDATE tasks (lease); UPDATE workers (last_seen);
		// COMMIT.
		storetest.CostHeartbeat: tx(5),
		// BEGIN; SELECT tasks FOR UPDATE (by run id); UPDATE tasks (the
		// run ended and the task settled, one write); COMMIT. The task
		// returned is built from the row read: a first attempt has no
		// history to read.
		storetest.CostComplete: tx(4),
		// As a claim without its writes of the task and the kind.
		storetest.CostClaimEmpty: tx(6),
		// BEGIN; INSERT tasks (all 10 rows); INSERT changes; COMMIT.
		storetest.CostInsertBatch: tx(4),
		// As a claim, with one UPDATE tasks per task (10).
		storetest.CostClaimBatch: tx(7 + storetest.CostBatch),
		// BEGIN; SELECT schedules FOR UPDATE; SELECT open runs; INSERT
		// tasks (the run); UPDATE schedules (state, version); INSERT
		// changes; COMMIT.
		storetest.CostFire: tx(7),
		// BEGIN; UPDATE event_seq (LAST_INSERT_ID); INSERT events (one
		// statement); INSERT changes; COMMIT.
		storetest.CostEventAppend: tx(5),
	})
}
