package rotaclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/rotahq/rota"
)

// unixTime decodes the API's times: unix seconds (integer or fractional),
// with 0 or null meaning the zero time.
type unixTime struct{ time.Time }

func (u *unixTime) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		u.Time = time.Time{}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("time: want unix seconds, got %s", b)
	}
	if f == 0 {
		u.Time = time.Time{}
		return nil
	}
	sec, frac := math.Modf(f)
	u.Time = time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC()
	return nil
}

// unixSeconds encodes t for a request: 0 for the zero time.
func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

type runWire struct {
	RunID          string      `json:"run_id"`
	TaskID         string      `json:"task_id"`
	WorkerID       string      `json:"worker_id"`
	WorkerAddress  string      `json:"worker_address"`
	Attempt        int         `json:"attempt"`
	Status         rota.Status `json:"status"`
	StartTime      unixTime    `json:"start_time"`
	EndTime        unixTime    `json:"end_time"`
	LeaseExpiresAt unixTime    `json:"lease_expires_at"`
	Deadline       unixTime    `json:"deadline"`
	StopRequested  bool        `json:"stop_requested"`
	Message        string      `json:"message"`
}

type taskWire struct {
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
	CreatedAt               unixTime        `json:"created_at"`
	RunAt                   unixTime        `json:"run_at"`
	WorkerAddress           string          `json:"worker_address"`
	StartTime               unixTime        `json:"start_time"`
	EndTime                 unixTime        `json:"end_time"`
	IsSucceed               bool            `json:"is_succeed"`
	Message                 string          `json:"message"`
	Result                  json.RawMessage `json:"result"`
	ScheduleID              string          `json:"schedule_id"`
	FireTime                unixTime        `json:"fire_time"`
	Runs                    []runWire       `json:"runs"`
}

func (w *taskWire) task() rota.Task {
	t := rota.Task{
		ID: w.TaskID, Kind: w.Kind, Priority: w.Priority, Payload: w.Task, Key: w.Key,
		Status: w.Status, Attempt: w.Attempt, MaxRetries: w.MaxRetries, Workers: w.Workers,
		WorkerIDs: w.WorkerIDs, TimeoutSeconds: w.TimeoutSeconds, HeartbeatTimeoutSeconds: w.HeartbeatTimeoutSeconds,
		CreatedAt: w.CreatedAt.Time, RunAt: w.RunAt.Time, StartTime: w.StartTime.Time, EndTime: w.EndTime.Time,
		WorkerAddress: w.WorkerAddress, IsSucceed: w.IsSucceed, Message: w.Message, Result: nullToNil(w.Result),
		ScheduleID: w.ScheduleID, FireTime: w.FireTime.Time,
	}
	for _, r := range w.Runs {
		taskID := r.TaskID
		if taskID == "" {
			taskID = w.TaskID
		}
		t.Runs = append(t.Runs, rota.Run{
			ID: r.RunID, TaskID: taskID, WorkerID: r.WorkerID, WorkerAddress: r.WorkerAddress,
			Attempt: r.Attempt, Status: r.Status, StartTime: r.StartTime.Time, EndTime: r.EndTime.Time,
			LeaseExpiresAt: r.LeaseExpiresAt.Time, Deadline: r.Deadline.Time, StopRequested: r.StopRequested,
			Message: r.Message,
		})
	}
	return t
}

// nullToNil maps an absent or null JSON value to nil.
func nullToNil(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || bytes.Equal(bytes.TrimSpace(m), []byte("null")) {
		return nil
	}
	return m
}

type kindWire struct {
	Kind             string  `json:"kind"`
	PriorityFactor   int     `json:"priority_factor"`
	Paused           bool    `json:"paused"`
	MaxRunning       int     `json:"max_running"`
	Rate             float64 `json:"rate"`
	RetentionSeconds int     `json:"retention_seconds"`
}

func (w *kindWire) kind() rota.Kind {
	return rota.Kind{
		Name: w.Kind, PriorityFactor: w.PriorityFactor, Paused: w.Paused, MaxRunning: w.MaxRunning,
		Rate: w.Rate, RetentionSeconds: w.RetentionSeconds,
	}
}

type workerWire struct {
	WorkerID      string            `json:"worker_id"`
	Address       string            `json:"address"`
	Kinds         []string          `json:"kinds"`
	Running       int               `json:"running"`
	FirstSeen     unixTime          `json:"first_seen"`
	LastSeen      unixTime          `json:"last_seen"`
	Status        rota.WorkerStatus `json:"status"`
	StopRequested bool              `json:"stop_requested"`
}

func (w *workerWire) worker() rota.Worker {
	return rota.Worker{
		ID: w.WorkerID, Address: w.Address, Kinds: w.Kinds, Running: w.Running,
		FirstSeen: w.FirstSeen.Time, LastSeen: w.LastSeen.Time, Status: w.Status, StopRequested: w.StopRequested,
	}
}

type claimedWire struct {
	TaskID                  string          `json:"task_id"`
	RunID                   string          `json:"run_id"`
	Kind                    string          `json:"kind"`
	Priority                rota.Priority   `json:"priority"`
	Task                    json.RawMessage `json:"task"`
	Attempt                 int             `json:"attempt"`
	HeartbeatTimeoutSeconds int             `json:"heartbeat_timeout_seconds"`
	TimeoutSeconds          int             `json:"timeout_seconds"`
	LeaseExpiresAt          unixTime        `json:"lease_expires_at"`
	StartedAt               unixTime        `json:"started_at"`
	StartedAtMs             int64           `json:"started_at_ms"`
}

func (w *claimedWire) claimed() rota.ClaimedRun {
	started := w.StartedAt.Time
	if w.StartedAtMs > 0 {
		started = time.UnixMilli(w.StartedAtMs).UTC()
	}
	return rota.ClaimedRun{
		TaskID: w.TaskID, RunID: w.RunID, Kind: w.Kind, Priority: w.Priority, Payload: w.Task,
		Attempt: w.Attempt, HeartbeatTimeoutSeconds: w.HeartbeatTimeoutSeconds,
		TimeoutSeconds: w.TimeoutSeconds, LeaseExpiresAt: w.LeaseExpiresAt.Time, StartedAt: started,
	}
}
