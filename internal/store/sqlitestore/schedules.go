package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.ScheduleStore = (*Store)(nil)

const scheduleCols = store.ScheduleColumns

func scanSchedule(sc scanner) (*rota.Schedule, error) {
	var r store.ScheduleRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Schedule()
}

// scheduleConfigArgs returns the configuration columns of s in the order of
// the insert and update statements.
func scheduleConfigArgs(s *rota.Schedule) ([]any, error) {
	args, err := store.ScheduleConfigArgs(s)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	return args, nil
}

// stateSet and stateArgs are the state columns of a schedule.
const stateSet = store.ScheduleStateSet

func stateArgs(st *rota.ScheduleState) []any { return store.ScheduleStateArgs(st) }

const nextRev = `(SELECT COALESCE(MAX(rev), 0) + 1 FROM schedules)`

// nameTaken reports whether an undeleted schedule other than id is named name.
func nameTaken(ctx context.Context, tx *wtx, name, id string) (bool, error) {
	var other string
	err := tx.QueryRowContext(ctx, `SELECT id FROM schedules WHERE name = ? AND deleted = 0 AND id <> ?`, name, id).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sqlitestore: look up schedule name: %w", err)
	}
	return true, nil
}

// ScheduleInsert implements store.ScheduleStore.
func (s *Store) ScheduleInsert(ctx context.Context, p store.ScheduleInsertParams) (*rota.Schedule, error) {
	sc := p.Schedule
	sc.Version = 1
	sc.CreatedAt, sc.UpdatedAt = tm(ms(p.Now)), tm(ms(p.Now))
	cfg, err := scheduleConfigArgs(&sc)
	if err != nil {
		return nil, err
	}
	err = s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if taken, err := nameTaken(ctx, tx, sc.Name, sc.ID); err != nil {
			return err
		} else if taken {
			return conflict("a schedule named %q already exists", sc.Name)
		}
		args := append([]any{sc.ID}, cfg...)
		args = append(args, ms(p.Now), ms(p.Now))
		args = append(args, stateArgs(&sc.ScheduleState)...)
		_, err := tx.ExecContext(ctx, `INSERT INTO schedules (id, name, kind, level, payload, cron_expr, timezone, plan,
			enabled, max_concurrency, concurrency_policy, overlap_action, failure_action, misfire_policy,
			catchup_limit, timeout_s, target, options, version, rev, created_at, updated_at, high_water, next_fire,
			last_run_id, plan_seq, plan_at, plan_run_id, plan_retry, real_repet, ended, ended_at, misfire_dropped,
			ext_state, error_message)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, `+nextRev+`, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
		if err != nil {
			return fmt.Errorf("sqlitestore: insert schedule: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.ScheduleGet(ctx, sc.ID)
}

func getSchedule(ctx context.Context, q queryer, id string) (*rota.Schedule, error) {
	sc, err := scanSchedule(q.QueryRowContext(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE id = ? AND deleted = 0`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("schedule", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get schedule %s: %w", id, err)
	}
	return sc, nil
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, id string) (*rota.Schedule, error) {
	return getSchedule(ctx, s.r, id)
}

// ScheduleGetByName implements store.ScheduleStore.
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*rota.Schedule, error) {
	sc, err := scanSchedule(s.r.QueryRowContext(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE name = ? AND deleted = 0`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rota.Errorf(rota.CodeNotFound, "schedule named %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get schedule %q: %w", name, err)
	}
	return sc, nil
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context, p store.ScheduleListParams) (store.ScheduleListResult, error) {
	q, args, limit := store.ScheduleListQuery(p, func(int) string { return "?" })
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.ScheduleListResult{}, fmt.Errorf("sqlitestore: list schedules: %w", err)
	}
	defer rows.Close()
	var scheds []rota.Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return store.ScheduleListResult{}, fmt.Errorf("sqlitestore: scan schedule: %w", err)
		}
		scheds = append(scheds, *sc)
	}
	if err := rows.Err(); err != nil {
		return store.ScheduleListResult{}, fmt.Errorf("sqlitestore: list schedules: %w", err)
	}
	return store.ScheduleListPage(scheds, limit), nil
}

// ScheduleUpdate implements store.ScheduleStore.
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleUpdateParams) (*rota.Schedule, error) {
	sc := p.Schedule
	cfg, err := scheduleConfigArgs(&sc)
	if err != nil {
		return nil, err
	}
	err = s.write(ctx, func(ctx context.Context, tx *wtx) error {
		var version int64
		err := tx.QueryRowContext(ctx, `SELECT version FROM schedules WHERE id = ? AND deleted = 0`, sc.ID).Scan(&version)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notFound("schedule", sc.ID)
		case err != nil:
			return fmt.Errorf("sqlitestore: read schedule %s: %w", sc.ID, err)
		case version != sc.Version:
			return conflict("schedule %s changed meanwhile (version %d, not %d): read it again", sc.ID, version, sc.Version)
		}
		if taken, err := nameTaken(ctx, tx, sc.Name, sc.ID); err != nil {
			return err
		} else if taken {
			return conflict("a schedule named %q already exists", sc.Name)
		}
		args := append(cfg, ms(p.Now))
		args = append(args, stateArgs(&sc.ScheduleState)...)
		args = append(args, sc.ID)
		if _, err := tx.ExecContext(ctx, `UPDATE schedules SET name = ?, kind = ?, level = ?, payload = ?, cron_expr = ?,
			timezone = ?, plan = ?, enabled = ?, max_concurrency = ?, concurrency_policy = ?, overlap_action = ?,
			failure_action = ?, misfire_policy = ?, catchup_limit = ?, timeout_s = ?, target = ?, options = ?, updated_at = ?,
			`+stateSet+`, version = version + 1, rev = `+nextRev+` WHERE id = ?`, args...); err != nil {
			return fmt.Errorf("sqlitestore: update schedule %s: %w", sc.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.ScheduleGet(ctx, sc.ID)
}

// ScheduleDelete implements store.ScheduleStore.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		now := ms(p.Now)
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET deleted = 1, enabled = 0, next_fire = 0, version = version + 1,
			rev = `+nextRev+`, updated_at = ? WHERE id = ? AND deleted = 0`, now, p.ID)
		if err != nil {
			return fmt.Errorf("sqlitestore: delete schedule %s: %w", p.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("schedule", p.ID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'CANCELED', dep_status = 'CANCELED', done = 1, avail = 0, held = 0, end_time = ?,
			message = 'canceled: the schedule was deleted before the run was released', updated_at = ?
			WHERE schedule_id = ? AND held = 1 AND done = 0`, now, now, p.ID); err != nil {
			return fmt.Errorf("sqlitestore: cancel held runs of %s: %w", p.ID, err)
		}
		// Runs of a target schedule that never started: only Rota's HTTP
		// executor may run them, and it runs the kinds of live target
		// schedules only, so they would wait for ever.
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'CANCELED', dep_status = 'CANCELED', done = 1, avail = 0, end_time = ?,
			message = 'canceled: the schedule was deleted before its HTTP target was called', updated_at = ?
			WHERE schedule_id = ? AND status = 'SCHEDULED' AND worker_ids = ?`,
			now, now, p.ID, workerIDsValue([]string{rota.HTTPWorkerID})); err != nil {
			return fmt.Errorf("sqlitestore: cancel target runs of %s: %w", p.ID, err)
		}
		return nil
	})
}

// ScheduleLoad implements store.ScheduleStore.
func (s *Store) ScheduleLoad(ctx context.Context, sinceRev int64) (store.ScheduleLoadResult, error) {
	var res store.ScheduleLoadResult
	// The revision first: rows changed after it are loaded again next time,
	// which is harmless; the other order could miss a change.
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(rev), 0) FROM schedules`).Scan(&res.Rev); err != nil {
		return res, fmt.Errorf("sqlitestore: schedule revision: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+scheduleCols+`, deleted FROM schedules WHERE rev > ?`, sinceRev)
	if err != nil {
		return res, fmt.Errorf("sqlitestore: load schedules: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var deleted int
		sc, err := scanSchedule(scanFunc(func(dest ...any) error { return rows.Scan(append(dest, &deleted)...) }))
		if err != nil {
			return res, fmt.Errorf("sqlitestore: scan schedule: %w", err)
		}
		if deleted == 1 {
			if sinceRev > 0 {
				res.Deleted = append(res.Deleted, sc.ID)
			}
			continue
		}
		res.Schedules = append(res.Schedules, *sc)
	}
	return res, rows.Err()
}

const schedRunCols = `id, schedule_id, fire_time, schedule_attempt, status, skip_reason, triggered, held,
	stop_requested, created_at, start_time, end_time, message`

func scanScheduleRun(sc scanner) (*rota.ScheduleRun, error) {
	var (
		r                              rota.ScheduleRun
		fire, created, start, end      int64
		triggered, held, stopRequested int
		reason                         string
	)
	if err := sc.Scan(&r.TaskID, &r.ScheduleID, &fire, &r.Attempt, &r.Status, &reason, &triggered, &held,
		&stopRequested, &created, &start, &end, &r.Message); err != nil {
		return nil, err
	}
	r.Reason = rota.SkipReason(reason)
	r.Triggered, r.Held, r.StopRequested = triggered == 1, held == 1, stopRequested == 1
	r.FireTime, r.CreatedAt, r.StartTime, r.EndTime = tm(fire), tm(created), tm(start), tm(end)
	return &r, nil
}

func getScheduleRun(ctx context.Context, q queryer, id string) (*rota.ScheduleRun, error) {
	r, err := scanScheduleRun(q.QueryRowContext(ctx, `SELECT `+schedRunCols+` FROM tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get run %s: %w", id, err)
	}
	return r, nil
}

func openRuns(ctx context.Context, q queryer, scheduleID string) ([]rota.ScheduleRun, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+schedRunCols+` FROM tasks WHERE schedule_id = ? AND schedule_id <> '' AND done = 0
		ORDER BY fire_time, id`, scheduleID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open runs of %s: %w", scheduleID, err)
	}
	defer rows.Close()
	var out []rota.ScheduleRun
	for rows.Next() {
		r, err := scanScheduleRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: scan run: %w", err)
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// runNamed returns the run id among open, else reads it.
func runNamed(ctx context.Context, tx *wtx, open []rota.ScheduleRun, id string) (*rota.ScheduleRun, error) {
	if r := store.OpenRun(open, id); r != nil || id == "" {
		return r, nil
	}
	return getScheduleRun(ctx, tx, id)
}

// ScheduleFire implements store.ScheduleStore.
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	out := make([]store.ScheduleFireResult, len(ps))
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if err := fenceFire(ctx, tx, ps); err != nil {
			return err
		}
		for i := range ps {
			r, err := fireOne(ctx, tx, &ps[i])
			if err != nil {
				return err
			}
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const insertRunSQL = `INSERT INTO tasks (id, kind, level, payload, status, done, avail, max_retries, workers,
	worker_ids, pinned, timeout_s, hb_timeout_s, created_at, run_at, end_time, message, schedule_id, fire_time,
	updated_at, schedule_attempt, skip_reason, triggered, held)
	VALUES (?, ?, ?, ?, ?, ?, ?, 0, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

// insertRun stores one run of sc; inserted is false when its (schedule,
// fire time) already has one.
func insertRun(ctx context.Context, tx *wtx, sc *rota.Schedule, in *store.ScheduleRunInsert, now int64) (*rota.ScheduleRun, bool, error) {
	r := store.NewScheduleRun(sc.ID, in, now)
	done, avail := 0, 1
	switch {
	case in.Skip != "":
		done, avail = 1, 0
	case in.Held:
		avail = 0
	}
	var workerIDs []string
	if sc.Target != nil {
		workerIDs = []string{rota.HTTPWorkerID}
	}
	res, err := tx.ExecContext(ctx, insertRunSQL, in.TaskID, sc.Kind, sc.Priority.Level(), string(sc.Payload),
		string(r.Status), done, avail, workerIDsValue(workerIDs), boolInt(len(workerIDs) > 0), sc.TimeoutSeconds,
		store.DefaultHeartbeatTimeout, now, in.RunAtMillis(now), ms(r.EndTime), in.Message, sc.ID, ms(in.FireTime),
		now, in.Attempt, string(in.Skip), boolInt(in.Triggered), boolInt(r.Held))
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: insert run of schedule %s: %w", sc.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, false, nil
	}
	return &r, true, nil
}

// fire is a ScheduleFire's transaction as store.FireOne uses it.
type fire struct {
	ctx context.Context
	tx  *wtx
	now int64
}

func fireOne(ctx context.Context, tx *wtx, p *store.ScheduleFireParams) (store.ScheduleFireResult, error) {
	return store.FireOne(fire{ctx, tx, ms(p.Now)}, p)
}

func (f fire) FireState(p *store.ScheduleFireParams) (*rota.Schedule, *store.ScheduleRunState, error) {
	return fireState(f.ctx, f.tx, p)
}

func (f fire) FireApply(sc *rota.Schedule, dec store.ScheduleDecision, state *rota.ScheduleState, enabled bool, res *store.ScheduleFireResult) error {
	if err := insertRuns(f.ctx, f.tx, sc, dec.Runs, f.now, state, res); err != nil {
		return err
	}
	var err error
	if res.Released, err = releaseRuns(f.ctx, f.tx, sc.ID, dec.Release, f.now); err != nil {
		return err
	}
	args := append([]any{boolInt(enabled)}, stateArgs(state)...)
	args = append(args, sc.ID)
	if _, err := f.tx.ExecContext(f.ctx, `UPDATE schedules SET enabled = ?, `+stateSet+`, version = version + 1 WHERE id = ?`, args...); err != nil {
		return fmt.Errorf("sqlitestore: advance schedule %s: %w", sc.ID, err)
	}
	return nil
}

// fireState reads the schedule of a fire and its live run state: a nil
// state with rota.ErrNotFound (deleted) or rota.ErrConflict (another
// Version).
func fireState(ctx context.Context, tx *wtx, p *store.ScheduleFireParams) (*rota.Schedule, *store.ScheduleRunState, error) {
	sc, err := getSchedule(ctx, tx, p.ID)
	if err != nil {
		return nil, nil, err
	}
	if sc.Version != p.Version {
		return nil, nil, conflict("schedule %s changed meanwhile (version %d, not %d)", sc.ID, sc.Version, p.Version)
	}
	st := &store.ScheduleRunState{Schedule: *sc}
	if st.Open, err = openRuns(ctx, tx, sc.ID); err != nil {
		return nil, nil, err
	}
	if st.Last, err = runNamed(ctx, tx, st.Open, sc.LastRunID); err != nil {
		return nil, nil, err
	}
	if st.PlanRun, err = runNamed(ctx, tx, st.Open, sc.PlanRunID); err != nil {
		return nil, nil, err
	}
	return sc, st, nil
}

// insertRuns stores the runs of a decision; a fire time that already had
// a run is reported in res.Duplicates and state points at that run.
func insertRuns(ctx context.Context, tx *wtx, sc *rota.Schedule, runs []store.ScheduleRunInsert, now int64, state *rota.ScheduleState, res *store.ScheduleFireResult) error {
	if len(runs) > 0 {
		if err := ensureKind(ctx, tx, sc.Kind); err != nil {
			return err
		}
	}
	for i := range runs {
		in := &runs[i]
		r, ok, err := insertRun(ctx, tx, sc, in, now)
		if err != nil {
			return err
		}
		if ok {
			res.Inserted = append(res.Inserted, *r)
			continue
		}
		res.Duplicates = append(res.Duplicates, tm(ms(in.FireTime)))
		// Point the state at the run that exists instead.
		var existing string
		if err := tx.QueryRowContext(ctx, `SELECT id FROM tasks WHERE schedule_id = ? AND fire_time = ? AND schedule_id <> '' AND triggered = 0`,
			sc.ID, ms(in.FireTime)).Scan(&existing); err != nil {
			return fmt.Errorf("sqlitestore: find duplicate run: %w", err)
		}
		if state.LastRunID == in.TaskID {
			state.LastRunID = existing
		}
		if state.PlanRunID == in.TaskID {
			state.PlanRunID = existing
		}
	}
	return nil
}

// releaseRuns makes the held runs ids of schedule id claimable from now
// and returns those released.
func releaseRuns(ctx context.Context, tx *wtx, id string, ids []string, now int64) ([]string, error) {
	var out []string
	for _, rid := range ids {
		r, err := tx.ExecContext(ctx, `UPDATE tasks SET held = 0, avail = 1, run_at = ?, message = '', updated_at = ?
			WHERE id = ? AND schedule_id = ? AND held = 1 AND done = 0`, now, now, rid, id)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: release run %s: %w", rid, err)
		}
		if n, _ := r.RowsAffected(); n == 1 {
			out = append(out, rid)
		}
	}
	return out, nil
}

// ScheduleTrigger implements store.ScheduleStore.
func (s *Store) ScheduleTrigger(ctx context.Context, p store.ScheduleTriggerParams) (*rota.ScheduleRun, error) {
	var out *rota.ScheduleRun
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		sc, err := getSchedule(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if err := ensureKind(ctx, tx, sc.Kind); err != nil {
			return err
		}
		now := ms(p.Now)
		r, ok, err := insertRun(ctx, tx, sc, &store.ScheduleRunInsert{TaskID: p.TaskID, FireTime: tm(now), Attempt: 1, Triggered: true}, now)
		if err != nil {
			return err
		}
		if !ok {
			return conflict("task %s already exists", p.TaskID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schedules SET last_run_id = ?, version = version + 1 WHERE id = ?`, r.TaskID, sc.ID); err != nil {
			return fmt.Errorf("sqlitestore: trigger schedule %s: %w", sc.ID, err)
		}
		out = r
		return nil
	})
	return out, err
}

// ScheduleRuns implements store.ScheduleStore.
func (s *Store) ScheduleRuns(ctx context.Context, p store.ScheduleRunsParams) (store.ScheduleRunsResult, error) {
	q, args, limit, err := store.ScheduleRunsQuery(p, schedRunCols)
	if err != nil {
		return store.ScheduleRunsResult{}, err
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.ScheduleRunsResult{}, fmt.Errorf("sqlitestore: schedule runs: %w", err)
	}
	defer rows.Close()
	var runs []rota.ScheduleRun
	for rows.Next() {
		r, err := scanScheduleRun(rows)
		if err != nil {
			return store.ScheduleRunsResult{}, fmt.Errorf("sqlitestore: scan run: %w", err)
		}
		runs = append(runs, *r)
	}
	if err := rows.Err(); err != nil {
		return store.ScheduleRunsResult{}, fmt.Errorf("sqlitestore: schedule runs: %w", err)
	}
	return store.ScheduleRunsPage(runs, limit), nil
}

// ScheduleOpenRuns implements store.ScheduleStore.
func (s *Store) ScheduleOpenRuns(ctx context.Context, ids []string) (map[string][]rota.ScheduleRun, error) {
	out := map[string][]rota.ScheduleRun{}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		s.cfg.Cost.Add(ctx, oneStatement)
		rows, err := s.rdb.QueryContext(ctx, `SELECT `+schedRunCols+` FROM tasks WHERE schedule_id IN (`+inList(len(chunk))+`)
			AND done = 0 AND schedule_id <> '' ORDER BY schedule_id, fire_time, id`, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: open schedule runs: %w", err)
		}
		for rows.Next() {
			r, err := scanScheduleRun(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlitestore: scan run: %w", err)
			}
			out[r.ScheduleID] = append(out[r.ScheduleID], *r)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: open schedule runs: %w", err)
		}
	}
	return out, nil
}

// ScheduleTargetKinds implements store.ScheduleStore.
func (s *Store) ScheduleTargetKinds(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT kind FROM schedules WHERE deleted = 0 AND target IS NOT NULL ORDER BY kind`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: target kinds: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}
