package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// ScheduleJSONValues returns the plan and target columns of s: JSON text,
// or nil (NULL) when s has none.
func ScheduleJSONValues(s *rota.Schedule) (plan, target any, err error) {
	if s.Plan != nil {
		b, err := json.Marshal(s.Plan)
		if err != nil {
			return nil, nil, fmt.Errorf("encode plan: %w", err)
		}
		plan = string(b)
	}
	if s.Target != nil {
		b, err := json.Marshal(s.Target)
		if err != nil {
			return nil, nil, fmt.Errorf("encode target: %w", err)
		}
		target = string(b)
	}
	return plan, target, nil
}

// DefaultScheduleListLimit is the page size of ScheduleList and
// ScheduleRuns when the caller gives none.
const DefaultScheduleListLimit = 100

// ScheduleListLimit is the page size of a requested limit: limit, or
// DefaultScheduleListLimit when it is not positive.
func ScheduleListLimit(limit int) int {
	if limit <= 0 {
		return DefaultScheduleListLimit
	}
	return limit
}

// ScheduleListQuery is the statement of a ScheduleList page: the
// undeleted schedules in p's state, newest (highest id) first, after p's
// cursor, reading ScheduleColumns plus one row past the page so that
// ScheduleListPage can tell whether another page follows. placeholder
// renders the n-th argument (from 1) in the backend's dialect. limit is
// the page size to hand to ScheduleListPage.
func ScheduleListQuery(p ScheduleListParams, placeholder func(n int) string) (query string, args []any, limit int) {
	limit = ScheduleListLimit(p.Limit)
	query = `SELECT ` + ScheduleColumns + ` FROM schedules WHERE NOT deleted` + ScheduleStateFilter(p.State)
	if p.Cursor != "" {
		args = append(args, p.Cursor)
		query += ` AND id < ` + placeholder(len(args))
	}
	args = append(args, limit+1)
	query += ` ORDER BY id DESC LIMIT ` + placeholder(len(args))
	return query, args, limit
}

// ScheduleListPage makes the page of a ScheduleList from the rows read
// (up to limit+1, newest first): at most limit schedules, and the cursor
// of the next page when there are more.
func ScheduleListPage(scheds []rota.Schedule, limit int) ScheduleListResult {
	res := ScheduleListResult{Schedules: scheds}
	if len(scheds) > limit {
		res.Schedules = scheds[:limit]
		res.NextCursor = res.Schedules[limit-1].ID
	}
	return res
}

// ScheduleRunsPage makes the page of a ScheduleRuns from the rows read (up
// to limit+1, latest fire time first): at most limit runs, and the cursor
// of the next page when there are more.
func ScheduleRunsPage(runs []rota.ScheduleRun, limit int) ScheduleRunsResult {
	res := ScheduleRunsResult{Runs: runs}
	if len(runs) > limit {
		res.Runs = runs[:limit]
		res.NextCursor = scheduleRunsCursor(&res.Runs[limit-1])
	}
	return res
}

// scheduleRunsCursor encodes a position of ScheduleRuns: fire time (unix
// ms) and task id.
func scheduleRunsCursor(r *rota.ScheduleRun) string {
	return strconv.FormatInt(Millis(r.FireTime), 10) + "-" + r.TaskID
}

// ParseScheduleRunsCursor decodes the cursor of a ScheduleRuns page into
// its fire time (unix ms) and task id; a clear rota.ErrInvalid on the
// field cursor when it is not one.
func ParseScheduleRunsCursor(c string) (fireTime int64, taskID string, err error) {
	f, id, ok := strings.Cut(c, "-")
	n, err := strconv.ParseInt(f, 10, 64)
	if !ok || err != nil || !rota.ValidID(id) {
		return 0, "", rota.Invalid("cursor", "must be the next_cursor of a previous page, got %q", c)
	}
	return n, id, nil
}

// OpenRun returns a copy of the run id among open; nil if it is not there
// (or id is empty).
func OpenRun(open []rota.ScheduleRun, id string) *rota.ScheduleRun {
	if id == "" {
		return nil
	}
	for i := range open {
		if open[i].TaskID == id {
			r := open[i]
			return &r
		}
	}
	return nil
}

// RunAtMillis is when the run becomes claimable (unix ms): RunAt, or now
// when it is zero.
func (in *ScheduleRunInsert) RunAtMillis(now int64) int64 {
	if in.RunAt.IsZero() {
		return now
	}
	return Millis(in.RunAt)
}

// NewScheduleRun is the run stored for in, of schedule id, at now (unix
// ms): skipped runs are stored SKIPPED, ended at max(now, fire time), and
// never held.
func NewScheduleRun(id string, in *ScheduleRunInsert, now int64) rota.ScheduleRun {
	r := rota.ScheduleRun{
		TaskID: in.TaskID, ScheduleID: id, FireTime: FromMillis(Millis(in.FireTime)), Attempt: in.Attempt,
		Status: rota.StatusScheduled, Reason: in.Skip, Triggered: in.Triggered, Held: in.Held,
		CreatedAt: FromMillis(now), Message: in.Message,
	}
	if in.Skip != "" {
		r.Status, r.Held, r.EndTime = rota.StatusSkipped, false, FromMillis(max(now, Millis(in.FireTime)))
	}
	return r
}

// DecideOn runs p.Decide on the live state a backend read for item p (readErr:
// the error of that read). ok is false when the item ends there: its
// result's Err holds a conflict, a missing schedule or Decide's error (err
// nil), or err is a store error that fails the whole call.
func (p *ScheduleFireParams) DecideOn(st *ScheduleRunState, readErr error) (dec ScheduleDecision, res ScheduleFireResult, ok bool, err error) {
	if readErr != nil || st == nil {
		if errors.Is(readErr, rota.ErrNotFound) || errors.Is(readErr, rota.ErrConflict) {
			res.Err, readErr = readErr, nil
		}
		return dec, res, false, readErr
	}
	dec, err = p.Decide(*st)
	if err != nil {
		res.Err = err
		return dec, res, false, nil
	}
	return dec, res, true, nil
}
