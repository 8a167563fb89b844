package rotaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rotahq/rota"
)

// MaxClaimWait is the longest long-poll wait a claim may ask for.
const MaxClaimWait = 60 * time.Second

// ClaimParams asks for work.
type ClaimParams struct {
	// WorkerID identifies the worker; its runs' reports must carry it.
	WorkerID string
	// Kinds the worker can run, served in this order.
	Kinds []string
	// Max is the most runs to receive (at least 1).
	Max int
	// Wait long-polls up to this long (whole seconds, at most
	// MaxClaimWait) when nothing is claimable; 0 answers at once.
	Wait time.Duration
	// Address is the worker's address, shown on its runs; optional.
	Address string
}

// ClaimResult is what a claim got.
type ClaimResult struct {
	// Runs are the runs the worker now holds; each must be heartbeated
	// within its HeartbeatTimeoutSeconds and reported with Succeed or Fail.
	// LeaseExpiresAt is set only if the server sends it.
	Runs []rota.ClaimedRun
	// Drain is true when the worker was asked to stop: it got no work and
	// should finish what it runs, then exit.
	Drain bool
}

// Claim asks for up to p.Max runs of p.Kinds (POST /api/workers/claim),
// waiting up to p.Wait for some to become claimable. Bound it with a ctx
// that outlives p.Wait.
func (c *Client) Claim(ctx context.Context, p ClaimParams) (ClaimResult, error) {
	wait := min(p.Wait, MaxClaimWait)
	in := struct {
		WorkerID    string   `json:"worker_id"`
		Kinds       []string `json:"kinds"`
		Max         int      `json:"max"`
		WaitSeconds int      `json:"wait_seconds"`
		Address     string   `json:"address,omitempty"`
	}{p.WorkerID, p.Kinds, max(p.Max, 1), int((wait + time.Second - 1) / time.Second), p.Address}
	var out struct {
		Tasks []claimedWire `json:"tasks"`
		Drain bool          `json:"drain"`
	}
	if err := c.Do(ctx, http.MethodPost, "/api/workers/claim", in, &out); err != nil {
		return ClaimResult{}, err
	}
	res := ClaimResult{Drain: out.Drain}
	for i := range out.Tasks {
		res.Runs = append(res.Runs, out.Tasks[i].claimed())
	}
	return res, nil
}

// HeartbeatResult tells a worker what to do with a run it holds.
type HeartbeatResult struct {
	// Stop: the run must stop (the task was stopped, or this worker is no
	// longer allowed to run it); report it failed once the work is
	// abandoned (it ends CANCELED).
	Stop bool `json:"stop"`
	// Drain: the worker was asked to stop; finish and exit.
	Drain bool `json:"drain"`
	// LeaseExpiresAt is the lease's new end by the server's clock, in
	// whole seconds (zero if the server does not send it).
	LeaseExpiresAt time.Time `json:"-"`
	// HeartbeatTimeout is the task's current lease length (it may have been
	// changed since the claim); zero if the server does not send it.
	HeartbeatTimeout time.Duration `json:"-"`
}

// Heartbeat renews a run's lease (POST /api/runs/{run_id}/heartbeat),
// recording message (optional) as the run's progress note. An error
// matching rota.ErrLeaseLost (or rota.ErrNotFound) means the run is no
// longer this worker's: abandon it without reporting.
func (c *Client) Heartbeat(ctx context.Context, runID, workerID, message string) (HeartbeatResult, error) {
	var out struct {
		Stop             bool     `json:"stop"`
		Drain            bool     `json:"drain"`
		LeaseExpiresAt   unixTime `json:"lease_expires_at"`
		HeartbeatTimeout int      `json:"heartbeat_timeout_seconds"`
	}
	in := struct {
		WorkerID string `json:"worker_id"`
		Message  string `json:"message,omitempty"`
	}{workerID, message}
	err := c.Do(ctx, http.MethodPost, "/api/runs/"+escape(runID)+"/heartbeat", in, &out)
	return HeartbeatResult{Stop: out.Stop, Drain: out.Drain, LeaseExpiresAt: out.LeaseExpiresAt.Time,
		HeartbeatTimeout: time.Duration(out.HeartbeatTimeout) * time.Second}, err
}

// Release hands a run back unfinished (POST /api/runs/{run_id}/release), as
// a worker that stops gracefully does: the run ends CANCELED, nothing
// counts against the task's retries, and another worker can claim it at
// once. An error matching rota.ErrLeaseLost means the run was no longer this
// worker's.
func (c *Client) Release(ctx context.Context, runID, workerID, message string) error {
	in := struct {
		WorkerID string `json:"worker_id"`
		Message  string `json:"message,omitempty"`
	}{workerID, message}
	return c.Do(ctx, http.MethodPost, "/api/runs/"+escape(runID)+"/release", in, nil)
}

// SucceedParams reports a successful run.
type SucceedParams struct {
	// WorkerID must be the id of the worker that claimed the run.
	WorkerID string
	// Message is recorded on the run and the task; optional.
	Message string
	// Result is the task's result: encoded with encoding/json (a
	// json.RawMessage is sent as is); nil sends none.
	Result any
}

// Succeed ends a run as SUCCESS (POST /api/runs/{run_id}/succeed). An error
// matching rota.ErrLeaseLost means the run was no longer this worker's and
// nothing changed.
func (c *Client) Succeed(ctx context.Context, runID string, p SucceedParams) error {
	in := struct {
		WorkerID string          `json:"worker_id"`
		Message  string          `json:"message,omitempty"`
		Result   json.RawMessage `json:"result,omitempty"`
	}{WorkerID: p.WorkerID, Message: p.Message}
	switch v := p.Result.(type) {
	case nil:
	case json.RawMessage:
		in.Result = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return &rota.Error{Code: rota.CodeInvalid, Field: "result", Message: fmt.Sprintf("field %q: encode result: %v", "result", err)}
		}
		in.Result = b
	}
	return c.Do(ctx, http.MethodPost, "/api/runs/"+escape(runID)+"/succeed", in, nil)
}

// FailParams reports a failed run.
type FailParams struct {
	// WorkerID must be the id of the worker that claimed the run.
	WorkerID string
	// Message says what went wrong; recorded on the run and the task.
	Message string
	// NoRetry fails the task at once instead of retrying it (when it has
	// retries left).
	NoRetry bool
}

// Fail ends a run as FAILED (POST /api/runs/{run_id}/fail); the task is
// retried after a backoff unless NoRetry or out of retries. A run whose stop
// was requested ends CANCELED instead. An error matching rota.ErrLeaseLost
// means the run was no longer this worker's and nothing changed.
func (c *Client) Fail(ctx context.Context, runID string, p FailParams) error {
	in := struct {
		WorkerID string `json:"worker_id"`
		Message  string `json:"message"`
		Retry    bool   `json:"retry"`
	}{p.WorkerID, p.Message, !p.NoRetry}
	return c.Do(ctx, http.MethodPost, "/api/runs/"+escape(runID)+"/fail", in, nil)
}
