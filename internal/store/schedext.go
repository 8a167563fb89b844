package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rotahq/rota"
)

// The schedule fields added after the first schedule schema are kept by
// both backends in two JSON text columns, options (configuration) and
// ext_state (engine state), plus an error_message column of their own
// (it is filtered on). These helpers encode and decode them the same way
// for every backend.

// scheduleOptions is the options column.
type scheduleOptions struct {
	BackoffSeconds    int `json:"backoff_s,omitempty"`
	BackoffMaxSeconds int `json:"backoff_max_s,omitempty"`
	FailureThreshold  int `json:"failure_threshold,omitempty"`
	CooldownSeconds   int `json:"cooldown_s,omitempty"`
	JitterSeconds     int `json:"jitter_s,omitempty"`
}

// scheduleExtState is the ext_state column.
type scheduleExtState struct {
	EndReason           string `json:"end_reason,omitempty"`
	ConsecutiveFailures int    `json:"failures,omitempty"`
	Circuit             string `json:"circuit,omitempty"`
	NextAllowedAt       int64  `json:"next_allowed_ms,omitempty"`
	CountedRunID        string `json:"counted_run,omitempty"`
}

// ScheduleOptionsValue returns the options column of s.
func ScheduleOptionsValue(s *rota.Schedule) string {
	b, _ := json.Marshal(scheduleOptions{
		BackoffSeconds: s.BackoffSeconds, BackoffMaxSeconds: s.BackoffMaxSeconds,
		FailureThreshold: s.FailureThreshold, CooldownSeconds: s.CooldownSeconds, JitterSeconds: s.JitterSeconds,
	})
	return string(b)
}

// ScheduleExtStateValue returns the ext_state column of st.
func ScheduleExtStateValue(st *rota.ScheduleState) string {
	var allowed int64
	if !st.NextAllowedAt.IsZero() {
		allowed = st.NextAllowedAt.UnixMilli()
	}
	b, _ := json.Marshal(scheduleExtState{
		EndReason: st.EndReason, ConsecutiveFailures: st.ConsecutiveFailures, Circuit: string(st.Circuit),
		NextAllowedAt: allowed, CountedRunID: st.CountedRunID,
	})
	return string(b)
}

// ScheduleDecodeExt sets the fields of s kept in the options and ext_state
// columns and in error_message.
func ScheduleDecodeExt(s *rota.Schedule, options, extState, errorMessage string) error {
	var o scheduleOptions
	if options != "" {
		if err := json.Unmarshal([]byte(options), &o); err != nil {
			return fmt.Errorf("schedule %s: decode options: %w", s.ID, err)
		}
	}
	var x scheduleExtState
	if extState != "" {
		if err := json.Unmarshal([]byte(extState), &x); err != nil {
			return fmt.Errorf("schedule %s: decode state: %w", s.ID, err)
		}
	}
	s.BackoffSeconds, s.BackoffMaxSeconds = o.BackoffSeconds, o.BackoffMaxSeconds
	s.FailureThreshold, s.CooldownSeconds, s.JitterSeconds = o.FailureThreshold, o.CooldownSeconds, o.JitterSeconds
	s.EndReason, s.ConsecutiveFailures, s.Circuit, s.CountedRunID = x.EndReason, x.ConsecutiveFailures, rota.Circuit(x.Circuit), x.CountedRunID
	s.NextAllowedAt = time.Time{}
	if x.NextAllowedAt != 0 {
		s.NextAllowedAt = time.UnixMilli(x.NextAllowedAt).UTC()
	}
	s.ErrorMessage = errorMessage
	return nil
}

// ScheduleStateFilter returns the SQL condition (both backends' dialects
// agree on it) of a ScheduleListParams.State value; "" for any state.
func ScheduleStateFilter(state string) string {
	switch state {
	case rota.StateError:
		return ` AND error_message <> ''`
	case rota.StateEnded:
		return ` AND error_message = '' AND ended`
	case rota.StatePaused:
		return ` AND error_message = '' AND NOT ended AND NOT enabled`
	case rota.StateActive:
		return ` AND error_message = '' AND NOT ended AND enabled`
	}
	return ""
}

// ScheduleColumns are the schedule columns both backends select, in the
// order of ScheduleRow.Dest.
const ScheduleColumns = `id, name, kind, level, payload, cron_expr, timezone, plan, enabled, max_concurrency,
	concurrency_policy, overlap_action, failure_action, misfire_policy, catchup_limit, timeout_s, target,
	version, created_at, updated_at, high_water, next_fire, last_run_id, plan_seq, plan_at, plan_run_id,
	plan_retry, real_repet, ended, ended_at, misfire_dropped, options, ext_state, error_message`

// ScheduleRow receives a row of ScheduleColumns (instants in unix ms,
// JSON columns as bytes, NULL as nil) and decodes it into a
// rota.Schedule, the same way for every backend.
type ScheduleRow struct {
	s                                         rota.Schedule
	level                                     int
	payload, plan, target                     []byte
	options, extState, errMsg                 string
	created, updated, hw, next, planAt, endAt int64
}

// Dest returns the scan destinations of ScheduleColumns.
func (r *ScheduleRow) Dest() []any {
	s := &r.s
	return []any{&s.ID, &s.Name, &s.Kind, &r.level, &r.payload, &s.CronExpr, &s.Timezone, &r.plan, &s.Enabled,
		&s.MaxConcurrency, &s.ConcurrencyPolicy, &s.OverlapAction, &s.FailureAction, &s.MisfirePolicy,
		&s.CatchupLimit, &s.TimeoutSeconds, &r.target, &s.Version, &r.created, &r.updated, &r.hw, &r.next, &s.LastRunID,
		&s.PlanSeq, &r.planAt, &s.PlanRunID, &s.PlanRetry, &s.RealRepet, &s.Ended, &r.endAt, &s.MisfireDropped,
		&r.options, &r.extState, &r.errMsg}
}

// Schedule decodes the scanned row.
func (r *ScheduleRow) Schedule() (*rota.Schedule, error) {
	s := r.s
	if err := ScheduleDecodeExt(&s, r.options, r.extState, r.errMsg); err != nil {
		return nil, err
	}
	s.Priority = rota.PriorityOfLevel(r.level)
	if r.payload != nil {
		s.Payload = json.RawMessage(r.payload)
	}
	if r.plan != nil {
		s.Plan = new(rota.PlanSpec)
		if err := json.Unmarshal(r.plan, s.Plan); err != nil {
			return nil, fmt.Errorf("schedule %s: decode plan: %w", s.ID, err)
		}
	}
	if r.target != nil {
		s.Target = new(rota.Target)
		if err := json.Unmarshal(r.target, s.Target); err != nil {
			return nil, fmt.Errorf("schedule %s: decode target: %w", s.ID, err)
		}
	}
	s.CreatedAt, s.UpdatedAt, s.HighWater, s.NextFire = FromMillis(r.created), FromMillis(r.updated), FromMillis(r.hw), FromMillis(r.next)
	s.PlanAt, s.EndedAt = FromMillis(r.planAt), FromMillis(r.endAt)
	return &s, nil
}
