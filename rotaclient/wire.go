package rotaclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// The client decodes the shapes of package rotaapi, and their instants
// leniently, as it always has: unix seconds, integer or fractional (kept to
// the nanosecond), 0 or null for unset. Each xxxIn type below is a rotaapi
// shape whose instants are overlaid by unixTime fields of the same JSON
// names (encoding/json decodes a name into the shallowest field that has
// it); TestLenientShapes checks that every xxxIn has exactly the JSON
// fields of its rotaapi shape, and overlays only its instants.

// unixTime decodes an instant leniently.
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

// convert converts each item of in.
func convert[W, T any](in []W, conv func(*W) T) []T {
	out := make([]T, len(in))
	for i := range in {
		out[i] = conv(&in[i])
	}
	return out
}

// nullToNil maps an absent or null JSON value to nil.
func nullToNil(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || bytes.Equal(bytes.TrimSpace(m), []byte("null")) {
		return nil
	}
	return m
}

// taskIn is a rotaapi.Task.
type taskIn struct {
	rotaapi.Task
	CreatedAt unixTime `json:"created_at"`
	RunAt     unixTime `json:"run_at"`
	StartTime unixTime `json:"start_time"`
	EndTime   unixTime `json:"end_time"`
	FireTime  unixTime `json:"fire_time"`
}

func (w *taskIn) task() rota.Task {
	return rota.Task{
		ID: w.TaskID, Kind: w.Kind, Priority: w.Priority, Payload: w.Task.Task, Key: w.Key,
		Status: w.Status, Attempt: w.Attempt, MaxRetries: w.MaxRetries, Workers: w.Workers,
		WorkerIDs: w.WorkerIDs, TimeoutSeconds: w.TimeoutSeconds, HeartbeatTimeoutSeconds: w.HeartbeatTimeoutSeconds,
		CreatedAt: w.CreatedAt.Time, RunAt: w.RunAt.Time, StartTime: w.StartTime.Time, EndTime: w.EndTime.Time,
		WorkerAddress: w.WorkerAddress, IsSucceed: w.IsSucceed, Message: w.Message, Result: nullToNil(w.Result),
		ScheduleID: w.ScheduleID, FireTime: w.FireTime.Time,
	}
}

// taskDetailIn is a rotaapi.TaskDetail.
type taskDetailIn struct {
	taskIn
	Runs       []runIn  `json:"runs"`
	DependsOn  []string `json:"depends_on"`
	Dependents []string `json:"dependents"`
}

func (w *taskDetailIn) task() rota.Task {
	t := w.taskIn.task()
	if len(w.DependsOn) > 0 {
		t.DependsOn = w.DependsOn
	}
	if len(w.Dependents) > 0 {
		t.Dependents = w.Dependents
	}
	for i := range w.Runs {
		t.Runs = append(t.Runs, w.Runs[i].run(w.TaskID))
	}
	return t
}

// runIn is a rotaapi.Run.
type runIn struct {
	rotaapi.Run
	StartTime      unixTime `json:"start_time"`
	EndTime        unixTime `json:"end_time"`
	LeaseExpiresAt unixTime `json:"lease_expires_at"`
	Deadline       unixTime `json:"deadline"`
}

// run returns the run, of task taskID unless it names its own.
func (r *runIn) run(taskID string) rota.Run {
	if r.TaskID != "" {
		taskID = r.TaskID
	}
	return rota.Run{
		ID: r.RunID, TaskID: taskID, WorkerID: r.WorkerID, WorkerAddress: r.WorkerAddress,
		Attempt: r.Attempt, Status: r.Status, StartTime: r.StartTime.Time, EndTime: r.EndTime.Time,
		LeaseExpiresAt: r.LeaseExpiresAt.Time, Deadline: r.Deadline.Time, StopRequested: r.StopRequested,
		Message: r.Message,
	}
}

// taskListIn is a rotaapi.TaskList.
type taskListIn struct {
	rotaapi.TaskList
	Tasks []taskIn `json:"tasks"`
}

func kindOf(w *rotaapi.Kind) rota.Kind {
	return rota.Kind{
		Name: w.Kind, PriorityFactor: w.PriorityFactor, Paused: w.Paused, MaxRunning: w.MaxRunning,
		Rate: w.Rate, RetentionSeconds: w.RetentionSeconds, Dispatch: w.Dispatch,
	}
}

// workerIn is a rotaapi.Worker.
type workerIn struct {
	rotaapi.Worker
	FirstSeen unixTime      `json:"first_seen"`
	LastSeen  unixTime      `json:"last_seen"`
	Runs      []workerRunIn `json:"runs"`
}

// workerRunIn is a rotaapi.WorkerRun.
type workerRunIn struct {
	rotaapi.WorkerRun
	StartedAt unixTime `json:"started_at"`
}

func (w *workerIn) worker() rota.Worker {
	out := rota.Worker{
		ID: w.WorkerID, Address: w.Address, Kinds: w.Kinds, Running: w.Running,
		FirstSeen: w.FirstSeen.Time, LastSeen: w.LastSeen.Time, Status: w.Status, StopRequested: w.StopRequested,
		Capacity: w.Capacity,
	}
	for _, r := range w.Runs {
		out.Runs = append(out.Runs, rota.WorkerRun{RunID: r.RunID, TaskID: r.TaskID, Kind: r.Kind, StartedAt: r.StartedAt.Time})
	}
	return out
}

// workerListIn is a rotaapi.WorkerList.
type workerListIn struct {
	rotaapi.WorkerList
	Workers []workerIn `json:"workers"`
}

// claimedIn is a rotaapi.ClaimedRun.
type claimedIn struct {
	rotaapi.ClaimedRun
	LeaseExpiresAt unixTime `json:"lease_expires_at"`
	StartedAt      unixTime `json:"started_at"`
	FireTime       unixTime `json:"fire_time"`
}

func (w *claimedIn) claimed() rota.ClaimedRun {
	started := w.StartedAt.Time
	if w.StartedAtMs > 0 {
		started = time.UnixMilli(w.StartedAtMs).UTC()
	}
	return rota.ClaimedRun{
		TaskID: w.TaskID, RunID: w.RunID, Kind: w.Kind, Priority: w.Priority, Payload: w.Task,
		Attempt: w.Attempt, HeartbeatTimeoutSeconds: w.HeartbeatTimeoutSeconds,
		TimeoutSeconds: w.TimeoutSeconds, LeaseExpiresAt: w.LeaseExpiresAt.Time, StartedAt: started,
		ScheduleID: w.ScheduleID, FireTime: w.FireTime.Time,
	}
}

// claimResponseIn is a rotaapi.ClaimResponse.
type claimResponseIn struct {
	rotaapi.ClaimResponse
	Tasks []claimedIn `json:"tasks"`
}

// heartbeatIn is a rotaapi.HeartbeatResponse.
type heartbeatIn struct {
	rotaapi.HeartbeatResponse
	LeaseExpiresAt unixTime `json:"lease_expires_at"`
}

// scheduleIn is a rotaapi.Schedule.
type scheduleIn struct {
	rotaapi.Schedule
	Plan         *schedulePlanIn `json:"plan"`
	CreatedAt    unixTime        `json:"created_at"`
	UpdatedAt    unixTime        `json:"updated_at"`
	NextFireTime unixTime        `json:"next_fire_time"`
	HighWater    unixTime        `json:"high_water"`
	EndedAt      unixTime        `json:"ended_at"`
	NextAllowed  unixTime        `json:"next_allowed_at"`
}

// schedulePlanIn is a rotaapi.SchedulePlan.
type schedulePlanIn struct {
	rotaapi.SchedulePlan
	PlanAt unixTime `json:"plan_at"`
}

func (w *scheduleIn) schedule() rota.Schedule {
	s := rota.Schedule{
		ID: w.ScheduleID, Name: w.Name, Kind: w.Kind, Priority: w.Priority, Payload: nullToNil(w.Task),
		CronExpr: w.CronExpr, Timezone: w.Timezone, Enabled: w.Enabled, MaxConcurrency: w.MaxConcurrency,
		ConcurrencyPolicy: w.ConcurrencyPolicy, OverlapAction: w.OverlapAction,
		FailureAction: w.FailureAction, MisfirePolicy: w.MisfirePolicy,
		CatchupLimit: w.CatchupLimit, TimeoutSeconds: w.TimeoutSeconds, Version: w.Version,
		CreatedAt: w.CreatedAt.Time, UpdatedAt: w.UpdatedAt.Time,
		BackoffSeconds: w.BackoffSeconds, BackoffMaxSeconds: w.BackoffMaxSeconds,
		FailureThreshold: w.FailureThreshold, CooldownSeconds: w.CooldownSeconds, JitterSeconds: w.JitterSeconds,
		ScheduleState: rota.ScheduleState{
			HighWater: w.HighWater.Time, NextFire: w.NextFireTime.Time, LastRunID: w.LastRunID,
			Ended: w.Ended, EndedAt: w.EndedAt.Time, MisfireDropped: w.MisfireDropped,
			ErrorMessage: w.ErrorMessage, EndReason: w.EndReason, ConsecutiveFailures: w.ConsecutiveFailures,
			Circuit: w.Circuit, NextAllowedAt: w.NextAllowed.Time,
		},
	}
	if p := w.Plan; p != nil {
		s.Plan = &rota.PlanSpec{Type: p.PlanType, Value: p.PlanValue, Repeat: p.PlanRepet, Time: p.PlanTime, NoKeep: p.NoKeep}
		s.PlanSeq, s.PlanAt, s.RealRepet = p.Seq, p.PlanAt.Time, p.RealRepet
	}
	if t := w.Target; t != nil {
		s.Target = &rota.Target{URL: t.URL, Method: t.Method, Headers: t.Headers}
	}
	return s
}

// scheduleListIn is a rotaapi.ScheduleList.
type scheduleListIn struct {
	rotaapi.ScheduleList
	Schedules []scheduleIn `json:"schedules"`
}

// scheduleRunIn is a rotaapi.ScheduleRun.
type scheduleRunIn struct {
	rotaapi.ScheduleRun
	FireTime  unixTime `json:"fire_time"`
	CreatedAt unixTime `json:"created_at"`
	StartTime unixTime `json:"start_time"`
	EndTime   unixTime `json:"end_time"`
}

func (w *scheduleRunIn) run() rota.ScheduleRun {
	return rota.ScheduleRun{
		TaskID: w.TaskID, FireTime: w.FireTime.Time, Attempt: w.Attempt, Status: w.Status,
		Reason: w.Reason, Triggered: w.Triggered, Held: w.Held, CreatedAt: w.CreatedAt.Time,
		StartTime: w.StartTime.Time, EndTime: w.EndTime.Time, Message: w.Message,
	}
}

// scheduleRunListIn is a rotaapi.ScheduleRunList.
type scheduleRunListIn struct {
	rotaapi.ScheduleRunList
	Runs []scheduleRunIn `json:"runs"`
}

// triggerIn is a rotaapi.TriggerResponse.
type triggerIn struct {
	rotaapi.TriggerResponse
	FireTime unixTime `json:"fire_time"`
}
