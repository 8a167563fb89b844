package rota

import "time"

// WorkerStatus is how Rota sees a worker.
type WorkerStatus string

// The worker statuses.
const (
	// WorkerActive: seen within its liveness window.
	WorkerActive WorkerStatus = "active"
	// WorkerLost: not seen within its liveness window; it becomes active
	// again as soon as it claims or heartbeats.
	WorkerLost WorkerStatus = "lost"
	// WorkerStopped: asked to stop (drain) and holding no runs.
	WorkerStopped WorkerStatus = "stopped"
)

// Worker is a process that claims and runs tasks.
type Worker struct {
	ID            string
	Address       string
	Kinds         []string
	Running       int // runs it holds now
	FirstSeen     time.Time
	LastSeen      time.Time
	Status        WorkerStatus
	StopRequested bool // asked to drain: it gets no new work
	// Capacity is how many runs a push worker (registered with an HTTP
	// address, POST /api/workers/register) takes at once; 0 for a worker
	// that only pulls.
	Capacity int
	// Runs are the runs it holds now, oldest first, where the listing
	// includes them (GET /api/workers); nil elsewhere.
	Runs []WorkerRun
}

// WorkerRun is a run a worker holds now.
type WorkerRun struct {
	RunID     string
	TaskID    string
	Kind      string
	StartedAt time.Time
}

// Kind holds the settings shared by all tasks of one kind.
type Kind struct {
	Name             string
	PriorityFactor   int     // f in the f²:f:1 weighted rounds; default 2
	Paused           bool    // a paused kind accepts tasks but hands none out
	MaxRunning       int     // cluster-wide cap on running runs; 0 means none
	Rate             float64 // runs started per second (token bucket); 0 means none
	RetentionSeconds int     // finished tasks older than this are deleted; 0 keeps them
	// Dispatch is how the kind's tasks reach workers: DispatchPull (the
	// default: workers claim them) or DispatchPush (Rota also posts them to
	// the registered push workers of the kind).
	Dispatch string
}

// The dispatch modes of a kind.
const (
	DispatchPull = "pull"
	DispatchPush = "push"
)

// DefaultPriorityFactor is the priority factor of a kind nobody configured.
const DefaultPriorityFactor = 2

// Node is one rota server process of a cluster.
type Node struct {
	ID            string
	Address       string
	Version       string
	StartedAt     time.Time
	LastHeartbeat time.Time
	Leader        bool
}
