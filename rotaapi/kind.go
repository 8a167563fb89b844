package rotaapi

import "github.com/rotahq/rota"

// Kind is a kind's settings: the data of GET, PUT /api/kinds/{kind} and of
// its pause and resume.
type Kind struct {
	// Kind is the kind's name.
	Kind string `json:"kind"`
	// PriorityFactor is f in the f²:f:1 weighted rounds of high, mid and low.
	PriorityFactor int `json:"priority_factor"`
	// Paused kinds accept tasks but hand none out.
	Paused bool `json:"paused"`
	// MaxRunning caps the kind's running runs cluster-wide; 0 for no cap.
	MaxRunning int `json:"max_running"`
	// Rate limits run starts per second; 0 for no limit.
	Rate float64 `json:"rate"`
	// RetentionSeconds deletes finished tasks older than this; 0 keeps them.
	RetentionSeconds int `json:"retention_seconds"`
	// Dispatch is how the kind's tasks reach workers: "pull" (workers
	// claim them) or "push" (Rota posts them to the kind's registered push
	// workers; workers may still claim them).
	Dispatch string `json:"dispatch"`
	// NoWorkerSince is set (unix seconds) while the kind is in no-worker
	// alarm: its ready tasks have had no live worker serving the kind since
	// then, for at least the server's --no-worker-after. Omitted otherwise,
	// and in the answers of the kind's changes (PUT, pause, resume).
	NoWorkerSince int64 `json:"no_worker_since,omitempty"`
}

// KindList is the data of GET /api/kinds.
type KindList struct {
	// Kinds are every known kind, by name; [] when none.
	Kinds []Kind `json:"kinds"`
}

// KindPutRequest is the body of PUT /api/kinds/{kind}: absent (or null)
// fields keep their value (the defaults for a new kind).
type KindPutRequest struct {
	// PriorityFactor is 1 to 1000.
	PriorityFactor *int `json:"priority_factor,omitempty"`
	// Paused pauses or resumes the kind.
	Paused *bool `json:"paused,omitempty"`
	// MaxRunning caps the running runs; 0 for no cap.
	MaxRunning *int `json:"max_running,omitempty"`
	// Rate limits run starts per second; 0 for no limit.
	Rate *float64 `json:"rate,omitempty"`
	// RetentionSeconds deletes finished tasks older than this; 0 keeps them.
	RetentionSeconds *int `json:"retention_seconds,omitempty"`
	// Dispatch is "pull" or "push".
	Dispatch *string `json:"dispatch,omitempty"`
}

// Stats is the data of GET /api/stats.
type Stats struct {
	// Kinds are the per-kind counts, by kind name; [] when none.
	Kinds []KindStats `json:"kinds"`
	// Totals counts every task by status, every status present.
	Totals map[rota.Status]int `json:"totals"`
}

// KindStats is one kind's line of Stats.
type KindStats struct {
	// Kind is the kind's name.
	Kind string `json:"kind"`
	// Counts maps every status to its number of tasks.
	Counts map[rota.Status]int `json:"counts"`
	// OldestWaitingSeconds is the age in seconds of the oldest task waiting
	// to be claimed (the server sends whole seconds); 0 when none waits.
	OldestWaitingSeconds float64 `json:"oldest_waiting_seconds"`
	// Paused tells whether the kind hands out no tasks.
	Paused bool `json:"paused"`
}

// Node is one node of GET /api/cluster.
type Node struct {
	// NodeID is the node's id.
	NodeID string `json:"node_id"`
	// Address is the node's advertised address.
	Address string `json:"address"`
	// Version is the node's server version.
	Version string `json:"version"`
	// StartedAt is when the node started; unix seconds, 0 when unset.
	StartedAt int64 `json:"started_at"`
	// LastHeartbeat is the node's last heartbeat in the store;
	// unix seconds, 0 when unset.
	LastHeartbeat int64 `json:"last_heartbeat"`
	// Leader is true for the node that leads the cluster.
	Leader bool `json:"leader"`
}

// Cluster is the data of GET /api/cluster.
type Cluster struct {
	// Nodes are the live nodes; [] when none.
	Nodes []Node `json:"nodes"`
	// Durability is what an acknowledged write means on the store of the
	// node that answers: "durable" (on disk before the reply) or
	// "relaxed" (a crash of the store can lose it: Redis without
	// appendfsync always, SQLite with --relaxed).
	Durability string `json:"durability"`
}
