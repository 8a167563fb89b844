package rota

import (
	"encoding/json"
	"time"
)

// Status is the state of a task or of one of its runs.
//
// A task is WAITING while one of its dependencies (Task.DependsOn) has not
// succeeded yet, SCHEDULED while it waits (delayed, queued or backing off before a
// retry), RUNNING while at least one run holds a lease, and ends in one of the
// terminal statuses. A run starts RUNNING and ends SUCCESS, FAILED, TIMEOUT or
// CANCELED. SKIPPED is used by schedules for fire times a policy dropped.
type Status string

// The statuses of tasks and runs.
const (
	StatusWaiting   Status = "WAITING" // for its dependencies to succeed; not claimable
	StatusScheduled Status = "SCHEDULED"
	StatusRunning   Status = "RUNNING"
	StatusSuccess   Status = "SUCCESS"
	StatusFailed    Status = "FAILED"
	StatusTimeout   Status = "TIMEOUT"
	StatusCanceled  Status = "CANCELED"
	StatusSkipped   Status = "SKIPPED"
)

// Statuses lists every status in lifecycle order.
func Statuses() []Status {
	return []Status{StatusWaiting, StatusScheduled, StatusRunning, StatusSuccess, StatusFailed, StatusTimeout, StatusCanceled, StatusSkipped}
}

// Terminal reports whether s is a final status: nothing changes a task or run
// in a terminal status.
func (s Status) Terminal() bool {
	switch s {
	case StatusSuccess, StatusFailed, StatusTimeout, StatusCanceled, StatusSkipped:
		return true
	}
	return false
}

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses() {
		if s == v {
			return true
		}
	}
	return false
}

// Priority is a task's priority level. Within a kind, levels are served in
// weighted rounds: f² high, f mid and 1 low per round, f being the kind's
// priority factor.
type Priority string

// The priority levels.
const (
	PriorityHigh Priority = "high"
	PriorityMid  Priority = "mid"
	PriorityLow  Priority = "low"
)

// Priorities lists the levels from highest to lowest.
func Priorities() []Priority { return []Priority{PriorityHigh, PriorityMid, PriorityLow} }

// Level returns 0 for high, 1 for mid and 2 for low, and -1 for anything else.
func (p Priority) Level() int {
	switch p {
	case PriorityHigh:
		return 0
	case PriorityMid:
		return 1
	case PriorityLow:
		return 2
	}
	return -1
}

// PriorityOfLevel is the inverse of Priority.Level.
func PriorityOfLevel(level int) Priority {
	switch level {
	case 0:
		return PriorityHigh
	case 1:
		return PriorityMid
	default:
		return PriorityLow
	}
}

// Task is a unit of work of some kind, with an opaque JSON payload handed to
// the worker as it was submitted.
//
// Times are UTC instants; the zero time means "not yet" (no run started, not
// finished). The JSON form used by the HTTP API encodes them as unix seconds.
type Task struct {
	ID       string          // 32 lowercase hex characters, time-ordered
	Kind     string          // matches KindPattern
	Priority Priority        // high, mid or low
	Payload  json.RawMessage // the "task" field: any JSON value
	Key      string          // optional idempotency key, unique per kind among unfinished tasks

	Status     Status
	Attempt    int      // runs started so far; the current or last run's attempt number
	MaxRetries int      // failed runs tolerated before the task fails
	Workers    int      // distinct workers that must each run it successfully
	WorkerIDs  []string // when not empty, only these workers may run it

	TimeoutSeconds          int // per run; 0 means no limit
	HeartbeatTimeoutSeconds int // lease length, renewed by each heartbeat

	CreatedAt time.Time
	RunAt     time.Time // earliest time it may (next) be claimed
	StartTime time.Time // first run's start
	EndTime   time.Time // when it reached a terminal status

	WorkerAddress string          // address of the worker of the latest run
	IsSucceed     bool            // Status == SUCCESS
	Message       string          // latest message reported by a worker or by Rota
	Result        json.RawMessage // result reported by the successful run, if any

	ScheduleID string    // the schedule that fired it, if any
	FireTime   time.Time // the schedule fire time it stands for, if any

	DependsOn  []string // the tasks it waits for (parents), filled by TaskGet
	Dependents []string // the tasks that wait for it (children), filled by TaskGet

	Runs []Run // execution attempts, oldest first (filled by single-task reads)
}

// Run is one execution attempt of a task by one worker. Its ID is also its
// lease token: heartbeat and reports must name it, and once the run has ended
// (or its lease lapsed and the task was taken over) they are refused.
type Run struct {
	ID             string
	TaskID         string
	WorkerID       string
	WorkerAddress  string
	Attempt        int
	Status         Status
	StartTime      time.Time
	EndTime        time.Time
	LeaseExpiresAt time.Time // zero once the run has ended
	Deadline       time.Time // StartTime + task timeout; zero when the task has none
	StopRequested  bool      // the run was asked to stop through its next heartbeat
	Message        string
}

// ClaimedRun is what a worker receives when it claims work: the run it now
// holds and what it needs to execute it.
type ClaimedRun struct {
	TaskID                  string
	RunID                   string
	Kind                    string
	Priority                Priority
	Payload                 json.RawMessage
	Attempt                 int
	HeartbeatTimeoutSeconds int
	TimeoutSeconds          int
	LeaseExpiresAt          time.Time
	RunAt                   time.Time // when the task became ready: start − RunAt is its wait
	// StartedAt is when the run started, by the server's clock: its lease
	// and timeout count from then. Zero when not known (the stores leave
	// it zero: it is LeaseExpiresAt − HeartbeatTimeoutSeconds at a claim).
	StartedAt time.Time
	// ScheduleID and FireTime say why the task runs: the schedule that
	// fired it and the nominal fire time it stands for (empty and zero for
	// other tasks).
	ScheduleID string
	FireTime   time.Time
}
