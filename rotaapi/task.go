package rotaapi

import (
	"encoding/json"

	"github.com/rotahq/rota"
)

// Task is a task as the API shows it in lists (GET /api/tasks).
type Task struct {
	// TaskID is the task's id, 32 lowercase hex characters.
	TaskID string `json:"task_id"`
	// Kind names the handler that runs the task.
	Kind string `json:"kind"`
	// Priority is high, mid or low.
	Priority rota.Priority `json:"priority"`
	// Task is the task's payload, the JSON value submitted.
	Task json.RawMessage `json:"task"`
	// Key is the task's idempotency key, "" when none.
	Key string `json:"key"`
	// Status is the task's status.
	Status rota.Status `json:"status"`
	// Attempt counts the runs started.
	Attempt int `json:"attempt"`
	// MaxRetries is the number of failed runs tolerated.
	MaxRetries int `json:"max_retries"`
	// Workers is how many distinct workers must each run the task.
	Workers int `json:"workers"`
	// WorkerIDs are the only workers allowed to run the task; [] for any.
	WorkerIDs []string `json:"worker_ids"`
	// TimeoutSeconds limits each run; 0 for no limit.
	TimeoutSeconds int `json:"timeout_seconds"`
	// HeartbeatTimeoutSeconds is the lease length a heartbeat renews.
	HeartbeatTimeoutSeconds int `json:"heartbeat_timeout_seconds"`
	// CreatedAt is when the task was submitted; unix seconds, 0 when unset.
	CreatedAt int64 `json:"created_at"`
	// RunAt is the earliest time the task may run; unix seconds, 0 when unset.
	RunAt int64 `json:"run_at"`
	// WorkerAddress is the address of the worker of the last run.
	WorkerAddress string `json:"worker_address"`
	// StartTime is when the first run started: unix seconds, 0 before.
	StartTime int64 `json:"start_time"`
	// EndTime is when the task finished: unix seconds, 0 before.
	EndTime int64 `json:"end_time"`
	// IsSucceed is true once the task ended SUCCESS.
	IsSucceed bool `json:"is_succeed"`
	// Message is the last message of a run.
	Message string `json:"message"`
	// Result is the result of the successful run; null when none.
	Result json.RawMessage `json:"result"`
	// ScheduleID is the schedule that fired the task, "" when none.
	ScheduleID string `json:"schedule_id"`
	// FireTime is the schedule's fire time the task stands for: unix
	// seconds, 0 when not fired by a schedule.
	FireTime int64 `json:"fire_time"`
}

// TaskDetail is a task with its runs, oldest first: the data of GET
// /api/tasks/{id}, PATCH /api/tasks/{id} and POST /api/tasks/stop/{id}.
type TaskDetail struct {
	Task
	// Runs are the task's runs, oldest first; [] when none.
	Runs []Run `json:"runs"`
	// DependsOn are the tasks this one waits for (its parents), by id;
	// [] when none.
	DependsOn []string `json:"depends_on"`
	// Dependents are the tasks that wait for this one (its children), by
	// id; [] when none.
	Dependents []string `json:"dependents"`
}

// Run is one execution attempt of a task.
type Run struct {
	// RunID is the run's id.
	RunID string `json:"run_id"`
	// TaskID is the id of the run's task.
	TaskID string `json:"task_id"`
	// WorkerID is the worker that claimed the run.
	WorkerID string `json:"worker_id"`
	// WorkerAddress is that worker's address.
	WorkerAddress string `json:"worker_address"`
	// Attempt is the run's position among the task's runs, from 1.
	Attempt int `json:"attempt"`
	// Status is the run's status.
	Status rota.Status `json:"status"`
	// StartTime is when the run was claimed; unix seconds, 0 when unset.
	StartTime int64 `json:"start_time"`
	// EndTime is when the run ended: unix seconds, 0 while it runs.
	EndTime int64 `json:"end_time"`
	// LeaseExpiresAt is when the run's lease ends unless renewed;
	// unix seconds, 0 when unset.
	LeaseExpiresAt int64 `json:"lease_expires_at"`
	// Deadline is when the run times out: unix seconds, 0 for no timeout.
	Deadline int64 `json:"deadline"`
	// StopRequested is true once the run was asked to stop.
	StopRequested bool `json:"stop_requested"`
	// Message is the run's last message (a progress note or its outcome).
	Message string `json:"message"`
}

// TaskList is the data of GET /api/tasks: a page of tasks, newest first,
// without their runs.
type TaskList struct {
	// Tasks are the page's tasks; [] when none.
	Tasks []Task `json:"tasks"`
	Page
}

// TaskCounts is the data of GET /api/tasks/counts: how many tasks match
// the task list's filters (its status filter aside), by status.
type TaskCounts struct {
	// Counts has every status, zeros included.
	Counts map[rota.Status]int `json:"counts"`
	// Total is the sum of Counts.
	Total int `json:"total"`
}

// SubmitRequest is the body of POST /api/tasks and one item of a batch.
// Absent fields take the server's defaults.
type SubmitRequest struct {
	// Kind is required (rota.KindPattern).
	Kind string `json:"kind"`
	// Priority is "high", "mid" or "low"; default mid.
	Priority *rota.Priority `json:"priority,omitempty"`
	// Task is the task's payload, any JSON value but null; required.
	Task json.RawMessage `json:"task"`
	// Key makes the submit idempotent: while a task of the same kind has
	// it — unfinished or finished, until the task is cleaned by retention —
	// that task is answered (existing) instead.
	Key *string `json:"key,omitempty"`
	// RerunIfFinished, with Key: when the task holding the key is
	// finished, it is run again under its id (its runs cleared, due at
	// this submit's run time) rather than answered as it is; an unfinished
	// one is never disturbed.
	RerunIfFinished bool `json:"rerun_if_finished,omitempty"`
	// RunAt is the earliest time to run, unix seconds; a past time is now.
	RunAt *int64 `json:"run_at,omitempty"`
	// RunAtMS is RunAt in unix milliseconds (sub-second precision); not
	// with RunAt or DelaySeconds.
	RunAtMS *int64 `json:"run_at_ms,omitempty"`
	// DelaySeconds postpones the task from the server's now; not with
	// RunAt.
	DelaySeconds *int64 `json:"delay_seconds,omitempty"`
	// MaxRetries is the number of failed runs tolerated; default 3.
	MaxRetries *int `json:"max_retries,omitempty"`
	// TimeoutSeconds limits each run; default 0, no limit.
	TimeoutSeconds *int `json:"timeout_seconds,omitempty"`
	// HeartbeatTimeoutSeconds is the lease length; default 30.
	HeartbeatTimeoutSeconds *int `json:"heartbeat_timeout_seconds,omitempty"`
	// Workers is how many distinct workers must each run the task; default 1.
	Workers *int `json:"workers,omitempty"`
	// WorkerIDs, when not empty, are the only workers allowed to run it.
	WorkerIDs []string `json:"worker_ids,omitempty"`
	// DependsOn names up to 100 tasks that must all succeed before this
	// one may run (it is WAITING until then); if one ends FAILED, CANCELED
	// or TIMEOUT for good, this one ends CANCELED with reason
	// dependency_failed. In a batch, "ref:NAME" names an earlier item by
	// its Ref.
	DependsOn []string `json:"depends_on,omitempty"`
	// Ref names this item within a batch so that later items can depend
	// on it ("ref:NAME"); only in POST /api/tasks/batch.
	Ref string `json:"ref,omitempty"`
}

// SubmitResponse is the data of POST /api/tasks and POST
// /api/tasks/run_again/{id}.
type SubmitResponse struct {
	// TaskID is the new task's id, or the existing task's.
	TaskID string `json:"task_id"`
	// Existing is true when the task holding the same kind and key was
	// answered and nothing new stored; omitted when false.
	Existing bool `json:"existing,omitempty"`
	// Rerun is true when that task was finished and runs again
	// (rerun_if_finished); omitted when false.
	Rerun bool `json:"rerun,omitempty"`
}

// BatchSubmitRequest is the body of POST /api/tasks/batch: 1 to 1000
// tasks stored in one transaction, all or none.
type BatchSubmitRequest struct {
	// Tasks are the tasks, each a SubmitRequest. They are raw so that the
	// server can decode each on its own and name the item at fault
	// ("tasks[3].kind").
	Tasks []json.RawMessage `json:"tasks"`
}

// SubmitResult is the outcome of one submit: an item of a
// BatchSubmitResponse.
type SubmitResult struct {
	// TaskID is the new task's id, or the existing task's.
	TaskID string `json:"task_id"`
	// Existing is true when the task holding the same kind and key was
	// answered and nothing new stored.
	Existing bool `json:"existing"`
	// Rerun is true when that task was finished and runs again
	// (rerun_if_finished).
	Rerun bool `json:"rerun"`
}

// BatchSubmitResponse is the data of POST /api/tasks/batch.
type BatchSubmitResponse struct {
	// Results are in the order of the request's tasks.
	Results []SubmitResult `json:"results"`
}

// TaskUpdateRequest is the body of PATCH /api/tasks/{id}: absent (or null)
// fields are left as they are.
type TaskUpdateRequest struct {
	// Priority moves the task to another level.
	Priority *rota.Priority `json:"priority,omitempty"`
	// WorkerIDs replaces the workers allowed to run the task; [] allows
	// any. Narrowing it stops the runs of the workers no longer allowed.
	WorkerIDs *[]string `json:"worker_ids,omitempty"`
	// HeartbeatTimeoutSeconds changes the lease length from the next
	// heartbeat on.
	HeartbeatTimeoutSeconds *int `json:"heartbeat_timeout_seconds,omitempty"`
	// MaxRetries changes the number of failed runs tolerated.
	MaxRetries *int `json:"max_retries,omitempty"`
}

// TaskStopRequest is the optional body of POST /api/tasks/stop/{id}.
type TaskStopRequest struct {
	// Message is recorded on the canceled task; optional.
	Message *string `json:"message,omitempty"`
}
