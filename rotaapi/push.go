package rotaapi

import (
	"encoding/json"
	"time"

	"github.com/rotahq/rota"
)

// RegisterRequest is the body of POST /api/workers/register: a push
// worker gives the HTTP address Rota posts the tasks of its kinds to (the
// kinds whose dispatch is "push").
type RegisterRequest struct {
	// WorkerID identifies the worker; its reports must carry it. Ids
	// starting with "rota:" are reserved.
	WorkerID string `json:"worker_id"`
	// Kinds are the kinds the worker runs (1 to 100).
	Kinds []string `json:"kinds"`
	// Address is the http or https URL deliveries are posted to;
	// GET {address}/healthz must answer 2xx while the worker is healthy.
	// It must pass the server's outbound address guard.
	Address string `json:"address"`
	// Capacity is how many runs the worker takes at once (1 to 1000).
	Capacity int `json:"capacity"`
}

// PushDelivery is the body Rota posts to a push worker's address: the
// fields of a claimed task (ClaimedRun), with the worker it was claimed for
// and the server's clock.
type PushDelivery struct {
	ClaimedRun
	// WorkerID is the worker the run was claimed for: its heartbeats and
	// reports carry it.
	WorkerID string `json:"worker_id"`
	// ServerTimeMs is the server's clock when it sent the delivery, unix
	// milliseconds (see ClaimResponse.ServerTimeMs).
	ServerTimeMs int64 `json:"server_time_ms"`
}

// PushResponse is a push worker's answer to a delivery with status 200:
// the run's outcome, which Rota reports for the worker. A worker that
// answers 202 Accepted instead (any body) took the run and reports it
// itself with the usual calls (heartbeat, succeed, fail, release); 429 or
// 503 refuse it (no free slot: Rota releases the run, no retry spent).
type PushResponse struct {
	// Outcome says how the run ends: "succeed", "fail" or "release".
	Outcome Outcome `json:"outcome"`
	// Message is recorded on the run and the task; optional.
	Message string `json:"message,omitempty"`
	// Result is the task's result; succeed only.
	Result json.RawMessage `json:"result,omitempty"`
	// Retry retries the task; fail only, default true.
	Retry *bool `json:"retry,omitempty"`
}

// ClaimedRunOf is the wire form of a run handed to a worker, by a claim or
// a push delivery.
func ClaimedRunOf(c *rota.ClaimedRun) ClaimedRun {
	// A claim's lease is its start plus the heartbeat timeout (the store
	// contract, checked by storetest).
	started := c.LeaseExpiresAt.Add(-time.Duration(c.HeartbeatTimeoutSeconds) * time.Second)
	task := c.Payload
	if len(task) == 0 {
		task = json.RawMessage("null")
	}
	return ClaimedRun{
		StartedAt:               Unix(started),
		StartedAtMs:             started.UnixMilli(),
		TaskID:                  c.TaskID,
		RunID:                   c.RunID,
		Kind:                    c.Kind,
		Priority:                c.Priority,
		Task:                    task,
		Attempt:                 c.Attempt,
		HeartbeatTimeoutSeconds: c.HeartbeatTimeoutSeconds,
		TimeoutSeconds:          c.TimeoutSeconds,
		LeaseExpiresAt:          Unix(c.LeaseExpiresAt),
		ScheduleID:              c.ScheduleID,
		FireTime:                Unix(c.FireTime),
	}
}
