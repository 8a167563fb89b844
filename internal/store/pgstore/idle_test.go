package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
)

// TestStalledLeaderDoesNotBlockElection: a leader stopped in the middle of
// a fenced write (its transaction open, the leader row locked FOR SHARE)
// must not block the next election for as long as its connection lives.
// The store's sessions end such a transaction after
// idle_in_transaction_session_timeout (5 s), and a successor takes over.
func TestStalledLeaderDoesNotBlockElection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	a := openSchema(t, schema, "node-a")
	b := openSchema(t, schema, "node-b")
	t0 := time.UnixMilli(1_800_000_000_000).UTC()
	res, err := a.LeaderAttemptElect(ctx, store.LeaderElectParams{NodeID: "node-a", TTL: 2 * time.Second, Now: t0})
	if err != nil || !res.Leader {
		t.Fatalf("node-a elect: %+v %v", res, err)
	}
	end, err := pgstore.HoldLeaderRowIdle(a, ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer end()

	// Without the timeout the election would wait forever: bound it.
	bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	res, err = b.LeaderAttemptElect(bctx, store.LeaderElectParams{NodeID: "node-b", TTL: 2 * time.Second, Now: t0.Add(time.Minute)})
	took := time.Since(start)
	if err != nil || !res.Leader || res.Term != 2 {
		t.Fatalf("node-b elect after node-a's lease passed: %+v %v, want leader with term 2", res, err)
	}
	// The successor waited for the stalled transaction to be ended by the
	// server (about 5 s), not for the stalled process.
	t.Logf("takeover waited %v for the stalled transaction", took)
}
