package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/rotahq/rota"
)

// This file holds what the database/sql backends (sqlitestore,
// mysqlstore) write alike: the columns of a schedule row as statement
// arguments, the fire of one schedule around the backend's reads and
// writes, and a kind's settings after an upsert.

// ScheduleConfigArgs returns the configuration columns of s as statement
// arguments, in the order name, kind, level, payload, cron_expr, timezone,
// plan, enabled, max_concurrency, concurrency_policy, overlap_action,
// failure_action, misfire_policy, catchup_limit, timeout_s, target,
// options (flags as 0/1).
func ScheduleConfigArgs(s *rota.Schedule) ([]any, error) {
	plan, target, err := ScheduleJSONValues(s)
	if err != nil {
		return nil, err
	}
	return []any{s.Name, s.Kind, s.Priority.Level(), string(s.Payload), s.CronExpr, s.Timezone, plan,
		flag(s.Enabled), s.MaxConcurrency, string(s.ConcurrencyPolicy), string(s.OverlapAction),
		string(s.FailureAction), string(s.MisfirePolicy), s.CatchupLimit, s.TimeoutSeconds, target, ScheduleOptionsValue(s)}, nil
}

// ScheduleStateSet assigns the state columns of a schedule, with "?"
// placeholders in the order of ScheduleStateArgs.
const ScheduleStateSet = `high_water = ?, next_fire = ?, last_run_id = ?, plan_seq = ?, plan_at = ?, plan_run_id = ?,
	plan_retry = ?, real_repet = ?, ended = ?, ended_at = ?, misfire_dropped = ?, ext_state = ?, error_message = ?`

// ScheduleStateArgs returns the state columns of st in the order of
// ScheduleStateSet.
func ScheduleStateArgs(st *rota.ScheduleState) []any {
	return []any{Millis(st.HighWater), Millis(st.NextFire), st.LastRunID, st.PlanSeq, Millis(st.PlanAt), st.PlanRunID,
		flag(st.PlanRetry), st.RealRepet, flag(st.Ended), Millis(st.EndedAt), st.MisfireDropped,
		ScheduleExtStateValue(st), st.ErrorMessage}
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FireBackend is what FireOne asks of a backend, inside the transaction
// of a ScheduleFire.
type FireBackend interface {
	// FireState loads the schedule and its live run state (a nil state
	// with rota.ErrNotFound for a deleted schedule or rota.ErrConflict
	// for another Version).
	FireState(p *ScheduleFireParams) (*rota.Schedule, *ScheduleRunState, error)
	// FireApply stores the decision: the new runs (into res.Inserted and
	// res.Duplicates, state pointing at the runs that exist), the
	// released runs (res.Released) and the schedule's new state, enabled
	// flag and Version.
	FireApply(sc *rota.Schedule, dec ScheduleDecision, state *rota.ScheduleState, enabled bool, res *ScheduleFireResult) error
}

// FireOne applies the engine's decision to one schedule (an item of
// ScheduleFire) through b: a missing or changed schedule, or an error of
// Decide, is the item's Err (nothing applied); a store error is returned.
func FireOne(b FireBackend, p *ScheduleFireParams) (ScheduleFireResult, error) {
	var res ScheduleFireResult
	sc, st, err := b.FireState(p)
	if err != nil || st == nil {
		if errors.Is(err, rota.ErrNotFound) || errors.Is(err, rota.ErrConflict) {
			res.Err, err = err, nil
		}
		return res, err
	}
	dec, err := p.Decide(*st)
	if err != nil {
		res.Err = err
		return res, nil
	}
	state := dec.State
	enabled := sc.Enabled && !dec.Disable
	if err := b.FireApply(sc, dec, &state, enabled, &res); err != nil {
		return res, err
	}
	sc.Enabled = enabled
	sc.ScheduleState = state
	sc.Version++
	res.Schedule = sc
	res.Cancel = dec.Cancel
	return res, nil
}

// Apply sets the fields of p on k (nil fields keep their value).
func (p KindUpsertParams) Apply(k *rota.Kind) {
	if p.PriorityFactor != nil {
		k.PriorityFactor = *p.PriorityFactor
	}
	if p.Paused != nil {
		k.Paused = *p.Paused
	}
	if p.MaxRunning != nil {
		k.MaxRunning = *p.MaxRunning
	}
	if p.Rate != nil {
		k.Rate = *p.Rate
	}
	if p.RetentionSeconds != nil {
		k.RetentionSeconds = *p.RetentionSeconds
	}
	if p.Dispatch != nil {
		k.Dispatch = *p.Dispatch
	}
}

// InsertOne is TaskInsert through a backend's TaskInsertMany.
func InsertOne(ctx context.Context, p TaskInsertParams,
	many func(context.Context, []TaskInsertParams) ([]TaskInsertResult, error)) (TaskInsertResult, error) {
	res, err := many(ctx, []TaskInsertParams{p})
	if err != nil {
		return TaskInsertResult{}, err
	}
	return res[0], nil
}

// ScheduleRunsQuery is the statement of a ScheduleRuns page with "?"
// placeholders: the runs of p's schedule (reading cols), of p's status,
// after p's cursor, newest fire first, one row past the page. limit is the
// page size to hand to ScheduleRunsPage; a bad cursor is rota.ErrInvalid.
func ScheduleRunsQuery(p ScheduleRunsParams, cols string) (query string, args []any, limit int, err error) {
	limit = ScheduleListLimit(p.Limit)
	query = `SELECT ` + cols + ` FROM tasks WHERE schedule_id = ? AND schedule_id <> ''`
	args = []any{p.ScheduleID}
	if p.Status != "" {
		query += ` AND status = ?`
		args = append(args, string(p.Status))
	}
	if p.Cursor != "" {
		f, id, err := ParseScheduleRunsCursor(p.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		query += ` AND (fire_time < ? OR fire_time = ? AND id < ?)`
		args = append(args, f, f, id)
	}
	return query + ` ORDER BY fire_time DESC, id DESC LIMIT ?`, append(args, limit+1), limit, nil
}

// NewTask is the task insert p stores (a new one, not a keyed answer).
func (p TaskInsertParams) NewTask() *rota.Task {
	now := Millis(p.Now)
	runAt := Millis(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	return &rota.Task{
		ID: p.ID, Kind: p.Kind, Priority: p.Priority, Payload: p.Payload, Key: p.Key,
		Status: rota.StatusScheduled, MaxRetries: p.MaxRetries, Workers: p.Workers, WorkerIDs: p.WorkerIDs,
		TimeoutSeconds: p.TimeoutSeconds, HeartbeatTimeoutSeconds: p.HeartbeatTimeoutSeconds,
		CreatedAt: FromMillis(now), RunAt: FromMillis(runAt), ScheduleID: p.ScheduleID, FireTime: FromMillis(Millis(p.FireTime)),
	}
}

// PendingMigrations returns the migrations (files *.sql of dir in fsys,
// versioned by their position in name order) a database at schema version
// have lacks, in order. A database of a newer version than the files know
// is refused with an error that says to upgrade.
func PendingMigrations(fsys fs.FS, dir string, have int) ([]string, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	if have > len(names) {
		return nil, fmt.Errorf("the database has schema version %d but this rota binary knows only up to %d: upgrade rota (or use the binary that wrote it)", have, len(names))
	}
	return names[have:], nil
}
