package rotaapi

import (
	"encoding/json"

	"github.com/rotahq/rota"
)

// ClaimRequest is the body of POST /api/workers/claim.
type ClaimRequest struct {
	// WorkerID identifies the worker; its reports must carry it. Ids
	// starting with "rota:" are reserved.
	WorkerID string `json:"worker_id"`
	// Kinds are the kinds the worker runs, served in this order (1 to 100).
	Kinds []string `json:"kinds"`
	// Max is the most runs to hand over; default 1.
	Max *int `json:"max,omitempty"`
	// WaitSeconds long-polls up to this long (0 to 60) when nothing is
	// claimable; default 0, answer at once.
	WaitSeconds *int `json:"wait_seconds,omitempty"`
	// Address is the worker's address, shown on its runs; default the
	// peer's IP address.
	Address *string `json:"address,omitempty"`
	// Follow says the worker sends its next claim as soon as this one
	// answers (the Go SDK's claim loop does; default false). Tasks
	// submitted meanwhile may then be started for the worker at once and
	// handed to that next claim, without another look at the store. A run
	// no claim of the worker takes within a second is released (its run
	// CANCELED, no attempt spent, the task claimable again), so a client
	// that claims at its own pace should leave it unset.
	Follow *bool `json:"follow,omitempty"`
}

// ClaimedRun is a run handed to a worker by a claim.
type ClaimedRun struct {
	// TaskID is the run's task.
	TaskID string `json:"task_id"`
	// RunID names the run in its heartbeats and reports.
	RunID string `json:"run_id"`
	// Kind is the task's kind.
	Kind string `json:"kind"`
	// Priority is the task's priority.
	Priority rota.Priority `json:"priority"`
	// Task is the task's payload.
	Task json.RawMessage `json:"task"`
	// Attempt is the run's position among the task's runs, from 1.
	Attempt int `json:"attempt"`
	// HeartbeatTimeoutSeconds is the lease length: heartbeat well within it.
	HeartbeatTimeoutSeconds int `json:"heartbeat_timeout_seconds"`
	// TimeoutSeconds limits the run; 0 for no limit.
	TimeoutSeconds int `json:"timeout_seconds"`
	// LeaseExpiresAt is when the lease ends unless renewed;
	// unix seconds, 0 when unset.
	LeaseExpiresAt int64 `json:"lease_expires_at"`
	// StartedAt is when the run started on the server, unix seconds: its
	// timeout counts from then.
	StartedAt int64 `json:"started_at"`
	// StartedAtMs is StartedAt in unix milliseconds.
	StartedAtMs int64 `json:"started_at_ms"`
	// ScheduleID is the schedule that fired the task; "" for other tasks.
	ScheduleID string `json:"schedule_id"`
	// FireTime is the nominal fire time the task stands for, unix seconds;
	// 0 for other tasks. A job about "the day that just ended" reads its
	// day from it, not from the clock.
	FireTime int64 `json:"fire_time"`
}

// ClaimResponse is the data of POST /api/workers/claim.
type ClaimResponse struct {
	// Tasks are the runs the worker now holds; [] when none.
	Tasks []ClaimedRun `json:"tasks"`
	// Drain is true when the worker was asked to stop: it should finish
	// what it runs and claim no more.
	Drain bool `json:"drain"`
	// ServerTimeMs is the server's clock when it answered, unix
	// milliseconds: a worker measures the runs' started_at_ms against it,
	// not against its own clock.
	ServerTimeMs int64 `json:"server_time_ms"`
}

// HeartbeatRequest is the body of POST /api/runs/{run_id}/heartbeat.
type HeartbeatRequest struct {
	// WorkerID must be the worker that claimed the run.
	WorkerID string `json:"worker_id"`
	// Message is an optional progress note, shown as the run's message.
	Message string `json:"message,omitempty"`
	// WaitSeconds holds the answer up to this long (at most a third of the
	// run's heartbeat timeout) unless the run or its worker is asked to
	// stop meanwhile; default 0, answer at once.
	WaitSeconds *int `json:"wait_seconds,omitempty"`
}

// HeartbeatResponse is the data of POST /api/runs/{run_id}/heartbeat.
type HeartbeatResponse struct {
	// Stop is true when the run must stop now and be reported.
	Stop bool `json:"stop"`
	// Drain is true when the worker was asked to stop.
	Drain bool `json:"drain"`
	// LeaseExpiresAt is the lease's new end; unix seconds, 0 when unset.
	LeaseExpiresAt int64 `json:"lease_expires_at"`
	// HeartbeatTimeoutSeconds is the task's current lease length (PATCH
	// may have changed it): a worker heartbeats at a third of it.
	HeartbeatTimeoutSeconds int `json:"heartbeat_timeout_seconds"`
}

// SucceedRequest is the body of POST /api/runs/{run_id}/succeed.
type SucceedRequest struct {
	// WorkerID must be the worker that claimed the run.
	WorkerID string `json:"worker_id"`
	// Message is recorded on the run and the task; optional.
	Message string `json:"message,omitempty"`
	// Result is the task's result, any JSON value; optional.
	Result json.RawMessage `json:"result,omitempty"`
}

// FailRequest is the body of POST /api/runs/{run_id}/fail.
type FailRequest struct {
	// WorkerID must be the worker that claimed the run.
	WorkerID string `json:"worker_id"`
	// Message says what went wrong.
	Message string `json:"message"`
	// Retry retries the task after a backoff while it has retries left;
	// default true.
	Retry *bool `json:"retry,omitempty"`
}

// ReleaseRequest is the body of POST /api/runs/{run_id}/release: the run is
// handed back unfinished.
type ReleaseRequest struct {
	// WorkerID must be the worker that claimed the run.
	WorkerID string `json:"worker_id"`
	// Message is recorded on the run; optional.
	Message string `json:"message,omitempty"`
}

// ReportResponse is the data of a succeed, fail or release report.
type ReportResponse struct {
	// TaskID is the run's task.
	TaskID string `json:"task_id"`
	// Status is the task's status after the report.
	Status rota.Status `json:"status"`
	// RunStatus is how the run ended (CANCELED if it was asked to stop).
	RunStatus rota.Status `json:"run_status"`
}

// Outcome is how a run ends in a ReportItem.
type Outcome string

// The outcomes of a ReportItem, as the single report endpoints apply them.
const (
	OutcomeSucceed Outcome = "succeed" // the run ends SUCCESS
	OutcomeFail    Outcome = "fail"    // the run ends FAILED (CANCELED if its stop was requested)
	OutcomeRelease Outcome = "release" // the run is handed back unfinished (CANCELED, no retry spent)
)

// ReportsRequest is the body of POST /api/runs/reports: the reports of
// 1 to 1000 runs of one worker.
type ReportsRequest struct {
	// WorkerID must be the worker that claimed the runs.
	WorkerID string `json:"worker_id"`
	// Reports are the reports, each a ReportItem. They are raw so that the
	// server can decode each on its own and name the item at fault
	// ("reports[3].run_id").
	Reports []json.RawMessage `json:"reports"`
}

// ReportItem is one report of a ReportsRequest: the body of the single
// endpoint of its outcome, with the run id.
type ReportItem struct {
	// RunID is the run reported; each run at most once per request.
	RunID string `json:"run_id"`
	// Outcome says how the run ends.
	Outcome Outcome `json:"outcome"`
	// Message is recorded on the run and the task; optional.
	Message string `json:"message,omitempty"`
	// Result is the task's result; succeed only.
	Result json.RawMessage `json:"result,omitempty"`
	// Retry retries the task; fail only, default true.
	Retry *bool `json:"retry,omitempty"`
}

// ReportResult is one item of a ReportsResponse: the single endpoint's
// answer (task_id, status, run_status) or its error.
type ReportResult struct {
	// RunID is the run reported.
	RunID string `json:"run_id"`
	// TaskID is the run's task; omitted with Error.
	TaskID string `json:"task_id,omitempty"`
	// Status is the task's status after the report; omitted with Error.
	Status rota.Status `json:"status,omitempty"`
	// RunStatus is how the run ended; omitted with Error.
	RunStatus rota.Status `json:"run_status,omitempty"`
	// Error is why the report was not applied; omitted when it was.
	Error *ReportError `json:"error,omitempty"`
}

// ReportError is the error of one report: what the single endpoint's
// envelope would have said.
type ReportError struct {
	// Code is the error's number (rota.Code.Number()).
	Code int `json:"code"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Field names the input field at fault; omitted when none.
	Field string `json:"field,omitempty"`
}

// ReportsResponse is the data of POST /api/runs/reports.
type ReportsResponse struct {
	// Results are one per report, in the order of the reports.
	Results []ReportResult `json:"results"`
}

// Worker is a worker as Rota sees it.
type Worker struct {
	// WorkerID is the worker's id.
	WorkerID string `json:"worker_id"`
	// Address is the worker's address.
	Address string `json:"address"`
	// Kinds are the kinds of its claims (at most 100; past that, those
	// of its last claim); [] when none.
	Kinds []string `json:"kinds"`
	// Running counts the runs it holds.
	Running int `json:"running"`
	// FirstSeen is its first claim; unix seconds, 0 when unset.
	FirstSeen int64 `json:"first_seen"`
	// LastSeen is its last claim, heartbeat or report;
	// unix seconds, 0 when unset.
	LastSeen int64 `json:"last_seen"`
	// Status is its liveness.
	Status rota.WorkerStatus `json:"status"`
	// StopRequested is true once it was asked to drain.
	StopRequested bool `json:"stop_requested"`
	// Capacity is how many runs a push worker takes at once (its
	// registration); omitted for a worker that only pulls.
	Capacity int `json:"capacity,omitempty"`
	// Runs are the runs it holds now, oldest first: in GET /api/workers
	// only, omitted when it holds none.
	Runs []WorkerRun `json:"runs,omitempty"`
}

// WorkerRun is a run a worker holds now.
type WorkerRun struct {
	// RunID is the run's id.
	RunID string `json:"run_id"`
	// TaskID is the run's task.
	TaskID string `json:"task_id"`
	// Kind is the task's kind.
	Kind string `json:"kind"`
	// StartedAt is when the run started; unix seconds.
	StartedAt int64 `json:"started_at"`
}

// WorkerList is the data of GET /api/workers: one page of workers, by id.
type WorkerList struct {
	// Workers are the page's workers; [] when none.
	Workers []Worker `json:"workers"`
	// NextCursor is the cursor of the next page (the query's cursor);
	// "" on the last page.
	NextCursor string `json:"next_cursor"`
}
