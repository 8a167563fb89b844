package redisstore_test

import (
	"context"
	"testing"

	"github.com/rotahq/rota/internal/store/redisstore"
	"github.com/rotahq/rota/internal/store/redisstore/redistest"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestCostPerTask pins the commands and round trips each hot path asks of
// Redis. A "statement" is a command (a pipeline of n is n), a round trip
// one wait for the server, a commit one script run (commit.lua and
// friends: one AOF write; runread.lua, which only reads, is not one).
// Reads go before the commit, pipelined where independent. A task
// submitted, claimed and completed costs 14 commands in 7 round trips and
// 3 script writes.
func TestCostPerTask(t *testing.T) {
	var c storecost.Counter
	u := redistest.URL() + "?prefix=" + redistest.Prefix(t)
	st, err := redisstore.New(context.Background(), redisstore.Config{URL: u, Cost: &c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tx := storetest.Transaction
	storetest.WantHotPathCost(t, "Redis", st, &c, nil, map[string]storecost.Counts{
		// commit.lua alone: the task hash, its index entries, the wake-up.
		storetest.CostInsert: tx(1, 1),
		// HMGET worker, HMGET kind and ZCARD running (one pipeline);
		// ZRANGEBYSCORE of the six ready sets (pipelined); HMGET of the
		// candidates; commit.lua (the task hash with its run, the worker,
		// the round position).
		storetest.CostClaim: tx(11, 4),
		// runread.lua (run → task, the task hash and the worker's, one
		// round trip); commit.lua (the task hash: lease; the worker's
		// last_seen field).
		storetest.CostHeartbeat: tx(2, 2),
		// runread.lua; commit.lua (the task hash, settled).
		storetest.CostComplete: tx(2, 2),
		// As a claim, without candidates; the commit records the worker.
		storetest.CostClaimEmpty: tx(10, 3),
		// One commit.lua for the whole batch.
		storetest.CostInsertBatch: tx(1, 1),
		// As a claim: the candidates' records in one pipeline.
		storetest.CostClaimBatch: tx(20, 4),
		// HMGET schedule; ZRANGE open runs; HMGET the fire key; HMGET kind;
		// HMGET schedule (revision); commit.lua; + the run's record read.
		storetest.CostFire: tx(7, 7),
		// events.lua.
		storetest.CostEventAppend: tx(1, 1),
	})
}
