package rota

import "time"

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
)

// Event is one state change, as the event stream (GET /api/events) and the
// Go SDK's Subscribe deliver it. IDs increase by one per event on a node, so
// a client that reconnects with the last ID it saw gets exactly what it
// missed, as long as that is still in the node's buffer.
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
}
