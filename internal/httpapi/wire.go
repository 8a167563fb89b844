package httpapi

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/schedule/firetime"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// Conversions from the domain types to the API's JSON shapes (package
// rotaapi). Instants are unix seconds, 0 when unset; lists are [] rather
// than null; an absent JSON value is null.

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

// convertAll converts each item of in, giving [] for none.
func convertAll[T, W any](in []T, conv func(*T) W) []W {
	out := make([]W, len(in))
	for i := range in {
		out[i] = conv(&in[i])
	}
	return out
}

func toTask(t *rota.Task) rotaapi.Task {
	return rotaapi.Task{
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
		CreatedAt:               rotaapi.Unix(t.CreatedAt),
		RunAt:                   rotaapi.Unix(t.RunAt),
		WorkerAddress:           t.WorkerAddress,
		StartTime:               rotaapi.Unix(t.StartTime),
		EndTime:                 rotaapi.Unix(t.EndTime),
		IsSucceed:               t.IsSucceed,
		Message:                 t.Message,
		Result:                  rawOrNull(t.Result),
		ScheduleID:              t.ScheduleID,
		FireTime:                rotaapi.Unix(t.FireTime),
	}
}

func toRun(r *rota.Run) rotaapi.Run {
	return rotaapi.Run{
		RunID:          r.ID,
		TaskID:         r.TaskID,
		WorkerID:       r.WorkerID,
		WorkerAddress:  r.WorkerAddress,
		Attempt:        r.Attempt,
		Status:         r.Status,
		StartTime:      rotaapi.Unix(r.StartTime),
		EndTime:        rotaapi.Unix(r.EndTime),
		LeaseExpiresAt: rotaapi.Unix(r.LeaseExpiresAt),
		Deadline:       rotaapi.Unix(r.Deadline),
		StopRequested:  r.StopRequested,
		Message:        r.Message,
	}
}

func toTaskDetail(t *rota.Task) *rotaapi.TaskDetail {
	return &rotaapi.TaskDetail{Task: toTask(t), Runs: convertAll(t.Runs, toRun),
		DependsOn: nonNil(t.DependsOn), Dependents: nonNil(t.Dependents)}
}

func toClaimedRun(c *rota.ClaimedRun) rotaapi.ClaimedRun { return rotaapi.ClaimedRunOf(c) }

func toKind(k *rota.Kind) rotaapi.Kind {
	return rotaapi.Kind{
		Kind:             k.Name,
		PriorityFactor:   k.PriorityFactor,
		Paused:           k.Paused,
		MaxRunning:       k.MaxRunning,
		Rate:             k.Rate,
		RetentionSeconds: k.RetentionSeconds,
		Dispatch:         cmp.Or(k.Dispatch, rota.DispatchPull),
	}
}

func toWorker(w *rota.Worker) rotaapi.Worker {
	return rotaapi.Worker{
		WorkerID:      w.ID,
		Address:       w.Address,
		Kinds:         nonNil(w.Kinds),
		Running:       w.Running,
		FirstSeen:     rotaapi.Unix(w.FirstSeen),
		LastSeen:      rotaapi.Unix(w.LastSeen),
		Status:        w.Status,
		StopRequested: w.StopRequested,
		Capacity:      w.Capacity,
		Runs:          convertAll(w.Runs, toWorkerRun),
	}
}

// toWorkerRun converts a run a worker holds.
func toWorkerRun(r *rota.WorkerRun) rotaapi.WorkerRun {
	return rotaapi.WorkerRun{RunID: r.RunID, TaskID: r.TaskID, Kind: r.Kind, StartedAt: rotaapi.Unix(r.StartedAt)}
}

// statusCounts returns a count for every status, zeros included.
func statusCounts(counts map[rota.Status]int) map[rota.Status]int {
	out := make(map[rota.Status]int, len(rota.Statuses()))
	for _, s := range rota.Statuses() {
		out[s] = counts[s]
	}
	return out
}

func toKindStats(k *store.KindStats) rotaapi.KindStats {
	return rotaapi.KindStats{
		Kind:                 k.Kind,
		Counts:               statusCounts(k.Counts),
		OldestWaitingSeconds: float64(max(k.OldestWaitingAge, 0) / time.Second),
		Paused:               k.Paused,
	}
}

func toNode(n *rota.Node) rotaapi.Node {
	return rotaapi.Node{
		NodeID: n.ID, Address: n.Address, Version: n.Version,
		StartedAt: rotaapi.Unix(n.StartedAt), LastHeartbeat: rotaapi.Unix(n.LastHeartbeat), Leader: n.Leader,
	}
}

func toPlan(p *rota.PlanSpec) rotaapi.Plan {
	return rotaapi.Plan{PlanType: p.Type, PlanValue: p.Value, PlanRepet: p.Repeat, PlanTime: p.Time, NoKeep: p.NoKeep}
}

// orDefault returns v, or def when v ≤ 0.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func toSchedule(s *rota.Schedule) rotaapi.Schedule {
	out := rotaapi.Schedule{
		ScheduleID: s.ID, Name: s.Name, Kind: s.Kind, Priority: s.Priority, Task: rawOrNull(s.Payload),
		CronExpr: s.CronExpr, Timezone: s.Timezone, Enabled: s.Enabled, MaxConcurrency: s.MaxConcurrency,
		ConcurrencyPolicy: s.ConcurrencyPolicy, OverlapAction: s.OverlapAction,
		FailureAction: s.FailureAction, MisfirePolicy: s.MisfirePolicy, CatchupLimit: s.CatchupLimit,
		TimeoutSeconds: s.TimeoutSeconds, Version: s.Version, CreatedAt: rotaapi.Unix(s.CreatedAt), UpdatedAt: rotaapi.Unix(s.UpdatedAt),
		HighWater: rotaapi.Unix(s.HighWater), LastRunID: s.LastRunID, MisfireDropped: s.MisfireDropped,
		Ended: s.Ended, EndedAt: rotaapi.Unix(s.EndedAt),
		State: s.State(), ErrorMessage: s.ErrorMessage, EndReason: s.EndReason,
		EffectiveTimeoutSeconds: s.TimeoutSeconds,
		BackoffSeconds:          orDefault(s.BackoffSeconds, schedule.DefaultBackoffSeconds),
		BackoffMaxSeconds:       orDefault(s.BackoffMaxSeconds, schedule.DefaultBackoffMaxSeconds),
		FailureThreshold:        orDefault(s.FailureThreshold, schedule.DefaultFailureThreshold),
		CooldownSeconds:         orDefault(s.CooldownSeconds, schedule.DefaultCooldownSeconds),
		JitterSeconds:           s.JitterSeconds,
		ConsecutiveFailures:     s.ConsecutiveFailures, Circuit: s.Circuit, NextAllowedAt: rotaapi.Unix(s.NextAllowedAt),
	}
	if out.Circuit == "" {
		out.Circuit = rota.CircuitClosed
	}
	if s.Enabled && !s.Ended {
		out.NextFireTime = rotaapi.Unix(s.NextFire)
	}
	if p := s.Plan; p != nil {
		remaining := int64(-1)
		if p.Repeat >= 0 {
			remaining = max(int64(max(p.Repeat, 1))-s.PlanSeq+1, 0)
			if s.Ended {
				remaining = 0
			}
		}
		out.Plan = &rotaapi.SchedulePlan{
			Plan: toPlan(p), Seq: s.PlanSeq, PlanAt: rotaapi.Unix(s.PlanAt), RealRepet: s.RealRepet, Remaining: remaining,
		}
	}
	if t := s.Target; t != nil {
		// Header values are secrets (tokens): stored, never shown.
		out.Target = &rotaapi.Target{URL: t.URL, Method: t.Method, Headers: make(map[string]string, len(t.Headers))}
		for k := range t.Headers {
			out.Target.Headers[k] = maskedValue
		}
	}
	return out
}

func toScheduleRun(r *rota.ScheduleRun) rotaapi.ScheduleRun {
	return rotaapi.ScheduleRun{
		TaskID: r.TaskID, FireTime: rotaapi.Unix(r.FireTime), Attempt: r.Attempt, Status: r.Status, Reason: r.Reason,
		Triggered: r.Triggered, Held: r.Held, CreatedAt: rotaapi.Unix(r.CreatedAt), StartTime: rotaapi.Unix(r.StartTime),
		EndTime: rotaapi.Unix(r.EndTime), Message: r.Message,
	}
}

// toFireTimes lists fire times ts of s with the instants their runs
// become claimable (the jitter added).
func toFireTimes(s *rota.Schedule, ts []time.Time) *rotaapi.FireTimes {
	out := &rotaapi.FireTimes{FireTimes: make([]int64, len(ts)), RunTimes: make([]int64, len(ts))}
	for i, t := range ts {
		out.FireTimes[i] = t.Unix()
		out.RunTimes[i] = t.Add(firetime.Jitter(s.ID, t, s.JitterSeconds)).UnixMilli()
	}
	return out
}
