package rota

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// EventType names what an event is about.
type EventType string

// The event types.
const (
	EventTask   EventType = "task"   // a task changed status (or options)
	EventRun    EventType = "run"    // a run started or ended
	EventKind   EventType = "kind"   // a kind's settings changed
	EventWorker EventType = "worker" // a worker was asked to stop
	// EventKindNoWorker: a kind's ready tasks have had no live worker for
	// the server's --no-worker-after; emitted once (by the leader).
	EventKindNoWorker EventType = "kind.no_worker"
	// EventKindWorkerBack: a worker serves a kind in alarm again.
	EventKindWorkerBack EventType = "kind.worker_back"
	// EventScheduleFired: a schedule fired a run (TaskID, ScheduleID,
	// FireTime).
	EventScheduleFired EventType = "schedule.fired"
	// EventScheduleSkipped: a schedule recorded a fire as SKIPPED; Message
	// is the reason (overlap, misfire, backoff, circuit_open, …).
	EventScheduleSkipped EventType = "schedule.skipped"
	// EventBulkProgress: a bulk job (POST /api/tasks/bulk) finished a
	// batch; Result is the job (rotaapi.BulkJob), Message a summary.
	EventBulkProgress EventType = "bulk.progress"
	// EventBulkDone: a bulk job ended; Result is the job.
	EventBulkDone EventType = "bulk.done"
)

// MaxEventResult is the largest run result an event carries: a longer one
// is cut to its first MaxEventResult bytes and the event says so
// (ResultTruncated).
const MaxEventResult = 4 << 10

// Event is one state change, as the event stream (GET /api/events) and the
// Go SDK's Subscribe deliver it. IDs are the cluster's: every node's stream
// carries every node's events in one order, with the same IDs, and they
// increase by one per event, so a client that reconnects (to any node) with
// the last ID it saw gets exactly what it missed, as long as it is still
// kept (the server's event retention).
type Event struct {
	ID       uint64
	Time     time.Time
	Type     EventType
	Kind     string
	TaskID   string
	RunID    string
	WorkerID string
	Status   Status // the task's status for task events, the run's for run events
	Attempt  int
	Message  string
	// RunAt is the task's ready time, on run-start events: start − RunAt is
	// the time the task waited for a worker.
	RunAt time.Time
	// ScheduleID and FireTime name the schedule and nominal fire time of a
	// task fired by a schedule (empty and zero otherwise).
	ScheduleID string
	FireTime   time.Time
	// Result is the run's result on the event of a run that ended with
	// one (JSON). When the result is longer than MaxEventResult it holds
	// its first MaxEventResult bytes as a JSON string and ResultTruncated
	// is true.
	Result          json.RawMessage
	ResultTruncated bool
}

// SetResult sets e.Result to result, cut to MaxEventResult bytes (as a JSON
// string of its first bytes, with ResultTruncated) when it is longer.
func (e *Event) SetResult(result json.RawMessage) {
	if len(result) <= MaxEventResult {
		e.Result, e.ResultTruncated = result, false
		return
	}
	cut := result[:MaxEventResult]
	for range utf8.UTFMax - 1 { // do not split a character
		if r, size := utf8.DecodeLastRune(cut); r != utf8.RuneError || size != 1 {
			break
		}
		cut = cut[:len(cut)-1]
	}
	b, _ := json.Marshal(string(cut)) // a string always marshals
	e.Result, e.ResultTruncated = b, true
}

// Name is what the event says, as "task.succeeded": its type, then the
// status it reports in lower case (SUCCESS is "succeeded"), or the type
// alone for events without a status. GET /api/events?types= filters on
// types and names.
func (e Event) Name() string {
	if e.Status == "" {
		return string(e.Type)
	}
	return string(e.Type) + "." + e.Status.EventWord()
}

// EventWord is the status as event names spell it: lower case, with
// SUCCESS as "succeeded".
func (s Status) EventWord() string {
	if s == StatusSuccess {
		return "succeeded"
	}
	return strings.ToLower(string(s))
}
