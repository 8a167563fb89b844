package httpapi

import (
	"encoding/json"
	"testing"
	"time"
)

// TestClaimStatesWhenTheRunStarted: a claim's tasks carry started_at (and
// its milliseconds), from which the lease counts, and the response the
// server's clock, so that a worker counts from the hand-over.
func TestClaimStatesWhenTheRunStarted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.submit(map[string]any{"kind": "st", "task": 1, "heartbeat_timeout_seconds": 7, "timeout_seconds": 2})
	before := time.Now().UnixMilli()
	c := e.claim("w1", []string{"st"}, 1, 0)
	after := time.Now().UnixMilli()
	if len(c.Tasks) != 1 {
		t.Fatalf("claimed %+v", c)
	}
	got := c.Tasks[0]
	if got.StartedAtMs < before-1000 || got.StartedAtMs > after {
		t.Errorf("started_at_ms %d, want between %d and %d", got.StartedAtMs, before, after)
	}
	if got.StartedAt != got.StartedAtMs/1000 {
		t.Errorf("started_at %d, started_at_ms %d: want the same instant", got.StartedAt, got.StartedAtMs)
	}
	if got.LeaseExpiresAt != got.StartedAt+7 {
		t.Errorf("lease_expires_at %d, want started_at %d + 7", got.LeaseExpiresAt, got.StartedAt)
	}
	if c.ServerTimeMs < got.StartedAtMs || c.ServerTimeMs > after {
		t.Errorf("server_time_ms %d, want between started_at_ms %d and %d", c.ServerTimeMs, got.StartedAtMs, after)
	}
}

// TestHeldHeartbeatAnswersOnStop: a heartbeat with wait_seconds is held
// until the task is stopped, then answers stop at once.
func TestHeldHeartbeatAnswersOnStop(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "hold", "task": 1})
	run := e.claimOne("w1", "hold", 0)
	type answer struct {
		r   apiResp
		err error
		at  time.Time
	}
	out := make(chan answer, 1)
	go func() {
		r, err := sendRequest(e.url, "POST", "/api/runs/"+run.RunID+"/heartbeat", map[string]any{"worker_id": "w1", "wait_seconds": 8})
		out <- answer{r, err, time.Now()}
	}()
	select {
	case a := <-out:
		t.Fatalf("held heartbeat answered before the stop: %v %v", a.r, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	stopAt := time.Now()
	e.ok("POST", "/api/tasks/stop/"+id, nil, nil)
	select {
	case a := <-out:
		if a.err != nil || a.r.Status != 200 {
			t.Fatalf("heartbeat: %v %v", a.r, a.err)
		}
		var hb heartbeat
		if err := json.Unmarshal(a.r.Data, &hb); err != nil || !hb.Stop {
			t.Errorf("answer %s, want stop", a.r.Data)
		}
		// Held for wait_seconds (8 s) it would answer 8 s late; 3 s tells
		// "at once" from that even on a loaded machine (691 ms seen).
		if d := a.at.Sub(stopAt); d > 3*time.Second {
			t.Errorf("answered %v after the stop", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held heartbeat not answered after the stop")
	}
}
