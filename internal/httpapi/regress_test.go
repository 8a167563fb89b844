package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rotahq/rota"
)

// Regression tests for bugs found outside this package (now fixed); each
// says what it expects and why.

// TestStaleHeartbeatExpiryWakesWaiter: when a late heartbeat
// (or report) finds its lease lapsed, the store expires the run on the spot
// and the task becomes claimable again — but dispatch.Dispatcher.Heartbeat
// (and Complete) return the error without waking the workers waiting for
// that kind, so a waiting claim only sees the task at its next safety poll
// (SafetyPoll, default 2s), or never if its wait ends first. The reaper
// cannot make up for it: it finds nothing left to expire. The node here is
// a follower (no reaper), as any node but the leader of a cluster is; on
// the leader the same happens whenever the heartbeat beats the reaper to
// the expiry.
//
// Fix (internal/dispatch): in Heartbeat and Complete, on rota.ErrLeaseLost
// notify the run's kind (the store could return the kind, or the task, with
// the error; or RunHeartbeatResult/RunComplete could report that they
// expired the run).
func TestStaleHeartbeatExpiryWakesWaiter(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) {
		o.follower = true
		o.dispatch.SafetyPoll = time.Minute
	})
	id := e.submit(map[string]any{"kind": "stale", "task": 1, "heartbeat_timeout_seconds": 1})
	a := e.claimOne("A", "stale", 0)
	done := make(chan apiResp, 1)
	go func() {
		r, _ := sendRequest(e.url, "POST", "/api/workers/claim", map[string]any{"worker_id": "B", "kinds": []string{"stale"}, "wait_seconds": 4})
		done <- r
	}()
	waitFor(t, 5*time.Second, "B to wait", func() bool { return e.workerStatus("B") != "" })
	time.Sleep(1200 * time.Millisecond) // A's lease lapses
	wantErr(t, e.do("POST", "/api/runs/"+a.RunID+"/heartbeat", map[string]any{"worker_id": "A"}), rota.CodeLeaseLost)
	select {
	case r := <-done:
		var c claimed
		if err := json.Unmarshal(r.Data, &c); err != nil || len(c.Tasks) != 1 || c.Tasks[0].TaskID != id {
			t.Fatalf("B's waiting claim ended without the task the stale heartbeat made claimable: %v", r)
		}
	case <-time.After(time.Second):
		t.Fatal("B's waiting claim was not woken when the stale heartbeat made the task claimable")
	}
}
