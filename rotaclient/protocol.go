package rotaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
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
	// Follow tells the server the worker claims again as soon as this
	// claim answers (see rotaapi.ClaimRequest.Follow); rotaworker sets it.
	Follow bool
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
	// ServerTime is the server's clock when it answered (zero if the
	// server does not send it). The runs' StartedAt and LeaseExpiresAt are
	// instants of that clock: measure them against ServerTime, not against
	// the local clock, which may differ.
	ServerTime time.Time
}

// Claim asks for up to p.Max runs of p.Kinds (POST /api/workers/claim),
// waiting up to p.Wait for some to become claimable. Bound it with a ctx
// that outlives p.Wait.
func (c *Client) Claim(ctx context.Context, p ClaimParams) (ClaimResult, error) {
	wait := min(p.Wait, MaxClaimWait)
	in := rotaapi.ClaimRequest{
		WorkerID: p.WorkerID, Kinds: p.Kinds, Max: new(max(p.Max, 1)),
		WaitSeconds: new(int((wait + time.Second - 1) / time.Second)), Address: nonEmpty(p.Address),
	}
	if p.Follow {
		in.Follow = new(true)
	}
	return c.claim(ctx, in)
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
	return c.heartbeat(ctx, runID, workerID, message, 0)
}

// HeartbeatWait renews a run's lease as Heartbeat does, then lets the
// server hold the answer up to wait (whole seconds; it holds at most a
// third of the task's heartbeat timeout) and answer as soon as the task is
// stopped or the worker asked to drain: a heartbeat loop that sends the
// next one as soon as this one answers learns of a stop at once. Bound ctx
// beyond wait. A server too old to know the wait answers 400 naming the
// field "wait_seconds"; heartbeat with Heartbeat then.
func (c *Client) HeartbeatWait(ctx context.Context, runID, workerID string, wait time.Duration) (HeartbeatResult, error) {
	return c.heartbeat(ctx, runID, workerID, "", min(wait, MaxClaimWait))
}

func (c *Client) heartbeat(ctx context.Context, runID, workerID, message string, wait time.Duration) (HeartbeatResult, error) {
	var out heartbeatIn
	in := rotaapi.HeartbeatRequest{WorkerID: workerID, Message: message, WaitSeconds: nonZero(int(wait / time.Second))}
	err := c.Do(ctx, http.MethodPost, "/api/runs/"+escape(runID)+"/heartbeat", in, &out)
	return HeartbeatResult{Stop: out.Stop, Drain: out.Drain, LeaseExpiresAt: out.LeaseExpiresAt.Time,
		HeartbeatTimeout: time.Duration(out.HeartbeatTimeoutSeconds) * time.Second}, err
}

// Release hands a run back unfinished (POST /api/runs/{run_id}/release), as
// a worker that stops gracefully does: the run ends CANCELED, nothing
// counts against the task's retries, and another worker can claim it at
// once. An error matching rota.ErrLeaseLost means the run was no longer this
// worker's.
func (c *Client) Release(ctx context.Context, runID, workerID, message string) error {
	in := rotaapi.ReleaseRequest{WorkerID: workerID, Message: message}
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
	in := rotaapi.SucceedRequest{WorkerID: p.WorkerID, Message: p.Message}
	var err error
	if in.Result, err = encodeResult(p.Result); err != nil {
		return &rota.Error{Code: rota.CodeInvalid, Field: "result", Message: fmt.Sprintf("field %q: %v", "result", err)}
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
	in := rotaapi.FailRequest{WorkerID: p.WorkerID, Message: p.Message, Retry: new(!p.NoRetry)}
	return c.Do(ctx, http.MethodPost, "/api/runs/"+escape(runID)+"/fail", in, nil)
}

// MaxReports is the most reports one Reports call may carry.
const MaxReports = 1000

// Outcome is how a run ends in a Report.
type Outcome = rotaapi.Outcome

// The outcomes of a Report, as Succeed, Fail and Release report them one by
// one.
const (
	OutcomeSucceed = rotaapi.OutcomeSucceed // the run ends SUCCESS
	OutcomeFail    = rotaapi.OutcomeFail    // the run ends FAILED (CANCELED if its stop was requested)
	OutcomeRelease = rotaapi.OutcomeRelease // the run is handed back unfinished (CANCELED, no retry spent)
)

// Report is the outcome of one run in a Reports call.
type Report struct {
	// RunID is the run reported; it must be held by the reporting worker.
	RunID string
	// Outcome says how the run ends.
	Outcome Outcome
	// Message is recorded on the run and the task; optional.
	Message string
	// Result is the task's result, only with OutcomeSucceed: encoded with
	// encoding/json (a json.RawMessage is sent as is); nil sends none.
	Result any
	// NoRetry, only with OutcomeFail, fails the task at once instead of
	// retrying it.
	NoRetry bool
}

// ReportResult is the server's answer to one Report, at the same index.
type ReportResult struct {
	RunID string
	// TaskID, Status and RunStatus are the task's and the run's states
	// after the report was applied; empty when Err is set.
	TaskID    string
	Status    rota.Status
	RunStatus rota.Status
	// Err is why this report was not applied, a *rota.Error:
	// errors.Is(r.Err, rota.ErrLeaseLost) means the run was no longer the
	// worker's, rota.ErrNotFound that there is no such run. Nil when the
	// report was applied.
	Err error
}

// reportItem encodes reports[i] as the API reads it.
func reportItem(i int, r Report) (json.RawMessage, error) {
	switch {
	case r.Result != nil && r.Outcome != OutcomeSucceed:
		return nil, rota.Invalid(fmt.Sprintf("reports[%d].result", i), "a result goes only with outcome %q", OutcomeSucceed)
	case r.NoRetry && r.Outcome != OutcomeFail:
		return nil, rota.Invalid(fmt.Sprintf("reports[%d].retry", i), "retry goes only with outcome %q", OutcomeFail)
	}
	item := rotaapi.ReportItem{RunID: r.RunID, Outcome: r.Outcome, Message: r.Message}
	var err error
	if item.Result, err = encodeResult(r.Result); err != nil {
		return nil, rota.Invalid(fmt.Sprintf("reports[%d].result", i), "%v", err)
	}
	if r.Outcome == OutcomeFail {
		item.Retry = new(!r.NoRetry)
	}
	return json.Marshal(item)
}

// encodeResult encodes a task's result: a json.RawMessage as is, nil as
// none.
func encodeResult(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return b, nil
}

// Reports ends many runs of one worker in one request (POST
// /api/runs/reports), each as Succeed, Fail or Release would. The server
// applies each report on its own: the results, one per report in the same
// order, say which were applied and why the others were not. The returned
// error is about the whole request, and then nothing was applied: invalid
// input (a *rota.Error whose Field names the report at fault, e.g.
// "reports[3].run_id"), the server unavailable, a transport failure. A
// server too old to have the endpoint answers rota.ErrNotFound. Between 1
// and MaxReports reports may be sent.
func (c *Client) Reports(ctx context.Context, workerID string, reports []Report) ([]ReportResult, error) {
	if len(reports) == 0 || len(reports) > MaxReports {
		return nil, rota.Invalid("reports", "want 1 to %d reports, got %d", MaxReports, len(reports))
	}
	body, err := reportsBody(workerID, reports)
	if err != nil {
		return nil, err
	}
	const path = "/api/runs/reports"
	status, raw, err := c.send(ctx, http.MethodPost, path, true, body)
	if err != nil {
		return nil, err
	}
	var out rotaapi.ReportsResponse
	runIDs := func(i int) string {
		if i < len(reports) {
			return reports[i].RunID
		}
		return ""
	}
	if results, ok := decodeReportsFast(raw, runIDs); ok && status < 300 {
		out.Results = results
	} else if err := decodeResponse(http.MethodPost, path, status, raw, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(reports) {
		return nil, &rota.Error{Code: rota.CodeInternal,
			Message: fmt.Sprintf("rotaclient: POST %s: %d results for %d reports", path, len(out.Results), len(reports))}
	}
	res := make([]ReportResult, len(out.Results))
	for i, o := range out.Results {
		res[i] = ReportResult{RunID: o.RunID, TaskID: o.TaskID, Status: o.Status, RunStatus: o.RunStatus}
		if res[i].RunID == "" {
			res[i].RunID = reports[i].RunID
		}
		if e := o.Error; e != nil {
			re := &rota.Error{Code: rota.CodeOfNumber(e.Code), Message: e.Message, Field: e.Field}
			if re.Message == "" {
				re.Message = fmt.Sprintf("server error %d (%s)", e.Code, re.Code)
			}
			res[i].Err = re
		}
	}
	return res, nil
}

// nonEmpty returns a pointer to s, nil for "".
func nonEmpty[T ~string](s T) *T {
	if s == "" {
		return nil
	}
	return &s
}
