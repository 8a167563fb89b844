package httpapi

import (
	"encoding/json"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// The JSON shapes of the API's objects. Instants are unix seconds, 0 when
// unset; lists are [] rather than null.

// unix returns t in unix seconds, 0 for the zero time.
func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// rawOrNull returns v, or null when v is empty, so that an absent JSON value
// never makes the encoder fail.
func rawOrNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// nonNil returns s, or an empty slice when s is nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// taskJSON is a task as the API shows it in lists.
type taskJSON struct {
	TaskID                  string          `json:"task_id"`
	Kind                    string          `json:"kind"`
	Priority                rota.Priority   `json:"priority"`
	Task                    json.RawMessage `json:"task"`
	Key                     string          `json:"key"`
	Status                  rota.Status     `json:"status"`
	Attempt                 int             `json:"attempt"`
	MaxRetries              int             `json:"max_retries"`
	Workers                 int             `json:"workers"`
	WorkerIDs               []string        `json:"worker_ids"`
	TimeoutSeconds          int             `json:"timeout_seconds"`
	HeartbeatTimeoutSeconds int             `json:"heartbeat_timeout_seconds"`
	CreatedAt               int64           `json:"created_at"`
	RunAt                   int64           `json:"run_at"`
	WorkerAddress           string          `json:"worker_address"`
	StartTime               int64           `json:"start_time"`
	EndTime                 int64           `json:"end_time"`
	IsSucceed               bool            `json:"is_succeed"`
	Message                 string          `json:"message"`
	Result                  json.RawMessage `json:"result"`
	ScheduleID              string          `json:"schedule_id"`
	FireTime                int64           `json:"fire_time"`
}

// taskDetailJSON is a task with its runs, as GET /api/tasks/{id} shows it.
type taskDetailJSON struct {
	taskJSON
	Runs []runJSON `json:"runs"`
}

// runJSON is one execution attempt of a task.
type runJSON struct {
	RunID          string      `json:"run_id"`
	TaskID         string      `json:"task_id"`
	WorkerID       string      `json:"worker_id"`
	WorkerAddress  string      `json:"worker_address"`
	Attempt        int         `json:"attempt"`
	Status         rota.Status `json:"status"`
	StartTime      int64       `json:"start_time"`
	EndTime        int64       `json:"end_time"`
	LeaseExpiresAt int64       `json:"lease_expires_at"`
	Deadline       int64       `json:"deadline"`
	StopRequested  bool        `json:"stop_requested"`
	Message        string      `json:"message"`
}

func toTaskJSON(t *rota.Task) taskJSON {
	return taskJSON{
		TaskID:                  t.ID,
		Kind:                    t.Kind,
		Priority:                t.Priority,
		Task:                    rawOrNull(t.Payload),
		Key:                     t.Key,
		Status:                  t.Status,
		Attempt:                 t.Attempt,
		MaxRetries:              t.MaxRetries,
		Workers:                 t.Workers,
		WorkerIDs:               nonNil(t.WorkerIDs),
		TimeoutSeconds:          t.TimeoutSeconds,
		HeartbeatTimeoutSeconds: t.HeartbeatTimeoutSeconds,
		CreatedAt:               unix(t.CreatedAt),
		RunAt:                   unix(t.RunAt),
		WorkerAddress:           t.WorkerAddress,
		StartTime:               unix(t.StartTime),
		EndTime:                 unix(t.EndTime),
		IsSucceed:               t.IsSucceed,
		Message:                 t.Message,
		Result:                  rawOrNull(t.Result),
		ScheduleID:              t.ScheduleID,
		FireTime:                unix(t.FireTime),
	}
}

func toTaskDetailJSON(t *rota.Task) *taskDetailJSON {
	runs := make([]runJSON, 0, len(t.Runs))
	for _, r := range t.Runs {
		runs = append(runs, runJSON{
			RunID:          r.ID,
			TaskID:         r.TaskID,
			WorkerID:       r.WorkerID,
			WorkerAddress:  r.WorkerAddress,
			Attempt:        r.Attempt,
			Status:         r.Status,
			StartTime:      unix(r.StartTime),
			EndTime:        unix(r.EndTime),
			LeaseExpiresAt: unix(r.LeaseExpiresAt),
			Deadline:       unix(r.Deadline),
			StopRequested:  r.StopRequested,
			Message:        r.Message,
		})
	}
	return &taskDetailJSON{taskJSON: toTaskJSON(t), Runs: runs}
}

// claimedJSON is a task handed to a worker by a claim.
type claimedJSON struct {
	TaskID                  string          `json:"task_id"`
	RunID                   string          `json:"run_id"`
	Kind                    string          `json:"kind"`
	Priority                rota.Priority   `json:"priority"`
	Task                    json.RawMessage `json:"task"`
	Attempt                 int             `json:"attempt"`
	HeartbeatTimeoutSeconds int             `json:"heartbeat_timeout_seconds"`
	TimeoutSeconds          int             `json:"timeout_seconds"`
	LeaseExpiresAt          int64           `json:"lease_expires_at"`
	// StartedAt is when the run started on the server (unix seconds; to
	// the millisecond in StartedAtMs): its timeout counts from then.
	StartedAt   int64 `json:"started_at"`
	StartedAtMs int64 `json:"started_at_ms"`
}

func toClaimedJSON(c rota.ClaimedRun) claimedJSON {
	// A claim's lease is its start plus the heartbeat timeout (the store
	// contract, checked by storetest).
	started := c.LeaseExpiresAt.Add(-time.Duration(c.HeartbeatTimeoutSeconds) * time.Second)
	return claimedJSON{
		StartedAt:               unix(started),
		StartedAtMs:             started.UnixMilli(),
		TaskID:                  c.TaskID,
		RunID:                   c.RunID,
		Kind:                    c.Kind,
		Priority:                c.Priority,
		Task:                    rawOrNull(c.Payload),
		Attempt:                 c.Attempt,
		HeartbeatTimeoutSeconds: c.HeartbeatTimeoutSeconds,
		TimeoutSeconds:          c.TimeoutSeconds,
		LeaseExpiresAt:          unix(c.LeaseExpiresAt),
	}
}

// kindJSON is a kind's settings.
type kindJSON struct {
	Kind             string  `json:"kind"`
	PriorityFactor   int     `json:"priority_factor"`
	Paused           bool    `json:"paused"`
	MaxRunning       int     `json:"max_running"`
	Rate             float64 `json:"rate"`
	RetentionSeconds int     `json:"retention_seconds"`
}

func toKindJSON(k *rota.Kind) *kindJSON {
	return &kindJSON{
		Kind:             k.Name,
		PriorityFactor:   k.PriorityFactor,
		Paused:           k.Paused,
		MaxRunning:       k.MaxRunning,
		Rate:             k.Rate,
		RetentionSeconds: k.RetentionSeconds,
	}
}

// workerJSON is a worker as Rota sees it.
type workerJSON struct {
	WorkerID      string            `json:"worker_id"`
	Address       string            `json:"address"`
	Kinds         []string          `json:"kinds"`
	Running       int               `json:"running"`
	FirstSeen     int64             `json:"first_seen"`
	LastSeen      int64             `json:"last_seen"`
	Status        rota.WorkerStatus `json:"status"`
	StopRequested bool              `json:"stop_requested"`
}

func toWorkerJSON(w *rota.Worker) *workerJSON {
	return &workerJSON{
		WorkerID:      w.ID,
		Address:       w.Address,
		Kinds:         nonNil(w.Kinds),
		Running:       w.Running,
		FirstSeen:     unix(w.FirstSeen),
		LastSeen:      unix(w.LastSeen),
		Status:        w.Status,
		StopRequested: w.StopRequested,
	}
}

// statusCounts returns a count for every status, zeros included.
func statusCounts(counts map[rota.Status]int) map[rota.Status]int {
	out := make(map[rota.Status]int, len(rota.Statuses()))
	for _, s := range rota.Statuses() {
		out[s] = counts[s]
	}
	return out
}

// kindStatsJSON is one kind's line of GET /api/stats.
type kindStatsJSON struct {
	Kind                 string              `json:"kind"`
	Counts               map[rota.Status]int `json:"counts"`
	OldestWaitingSeconds int64               `json:"oldest_waiting_seconds"`
	Paused               bool                `json:"paused"`
}

func toKindStatsJSON(k store.KindStats) kindStatsJSON {
	return kindStatsJSON{
		Kind:                 k.Kind,
		Counts:               statusCounts(k.Counts),
		OldestWaitingSeconds: int64(max(k.OldestWaitingAge, 0) / time.Second),
		Paused:               k.Paused,
	}
}
