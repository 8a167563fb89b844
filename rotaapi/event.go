package rotaapi

import (
	"encoding/json"

	"github.com/rotahq/rota"
)

// Event is an event as the stream (GET /api/events) sends it in the data
// line of each message, with the message's id line equal to ID. Instants
// are unix milliseconds unless said otherwise.
type Event struct {
	// ID is the cluster's id of the event: consecutive, the same on every
	// node (Last-Event-ID resumes after it).
	ID       uint64         `json:"id"`
	Time     int64          `json:"time"` // unix milliseconds
	Type     rota.EventType `json:"type"` // task, run, kind, worker or schedule
	Kind     string         `json:"kind"`
	TaskID   string         `json:"task_id"`
	RunID    string         `json:"run_id"`
	WorkerID string         `json:"worker_id"`
	Status   rota.Status    `json:"status"` // the task's for task events, the run's for run events
	Attempt  int            `json:"attempt"`
	Message  string         `json:"message"`
	// RunAt is the task's ready time (unix ms) on run-start events, else
	// absent.
	RunAt int64 `json:"run_at,omitempty"`
	// ScheduleID and FireTime (unix seconds) name the schedule and nominal
	// fire time of a task fired by a schedule (task, schedule.fired and
	// schedule.skipped events); absent otherwise.
	ScheduleID string `json:"schedule_id,omitempty"`
	FireTime   int64  `json:"fire_time,omitempty"`
	// Name is the event's type and status word, as "task.succeeded"
	// (rota.Event.Name): what the types parameter filters on.
	Name string `json:"name"`
	// Result is the result of a run that ended with one (JSON), on its run
	// event; longer than rota.MaxEventResult, it is its first bytes as a
	// JSON string and ResultTruncated is true. Absent otherwise.
	Result          json.RawMessage `json:"result,omitempty"`
	ResultTruncated bool            `json:"result_truncated,omitempty"`
}

// EventReset is the data of a stream's "reset" message: the id a client
// asked to resume after is unknown or no longer kept, and the stream goes
// on after LastID.
type EventReset struct {
	LastID uint64 `json:"last_id"`
}
