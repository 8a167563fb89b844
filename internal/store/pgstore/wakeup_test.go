package pgstore_test

import (
	"testing"

	"github.com/rotahq/rota/internal/store/storetest"
)

// TestCrossNodeWakeUp: a task inserted through one node wakes the other
// node's subscribers (LISTEN/NOTIFY on a dedicated connection), every time;
// p50 and p99 from the insert call are logged (a benchmark figure, quoted
// in docs/architecture.md from a quiet machine).
func TestCrossNodeWakeUp(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := openSchema(t, schema, "node-a"), openSchema(t, schema, "node-b")
	p50, p99 := storetest.WakeUp(t, a, b, "wake", 200)
	t.Logf("cross-node wake-up over 200 inserts, from the insert call: p50 %v, p99 %v", p50, p99)
}
