package mysqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.ScheduleStore = (*Store)(nil)

func scanSchedule(sc scanner) (*rota.Schedule, error) {
	var r store.ScheduleRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Schedule()
}

const scheduleConfigSet = `name = ?, kind = ?, level = ?, payload = ?, cron_expr = ?, timezone = ?, plan = ?, enabled = ?,
	max_concurrency = ?, concurrency_policy = ?, overlap_action = ?, failure_action = ?, misfire_policy = ?,
	catchup_limit = ?, timeout_s = ?, target = ?, options = ?`

// stateSet and stateArgs are the state columns of a schedule.
const stateSet = store.ScheduleStateSet

func stateArgs(st *rota.ScheduleState) []any { return store.ScheduleStateArgs(st) }

// scheduleConfigArgs returns the configuration columns of s in the order of
// scheduleConfigSet.
func scheduleConfigArgs(s *rota.Schedule) ([]any, error) {
	args, err := store.ScheduleConfigArgs(s)
	return args, wrap("schedule", err)
}

// nextRev takes the next value of the store-wide schedule revision; the
// counter's row stays locked to the commit, so revisions commit in order.
func nextRev(t *txn) (int64, error) {
	res, err := t.exec(`UPDATE schedule_rev SET rev = LAST_INSERT_ID(rev + 1) WHERE one = 1`)
	if err != nil {
		return 0, wrap("schedule revision", err)
	}
	rev, err := res.LastInsertId()
	return rev, wrap("schedule revision", err)
}

// nameTaken is the conflict of a schedule name held by another undeleted
// schedule.
func nameTaken(err error, name string) error {
	if isDuplicate(err) {
		return conflict("a schedule named %q already exists", name)
	}
	return wrap("store schedule", err)
}

// ScheduleInsert implements store.ScheduleStore.
func (s *Store) ScheduleInsert(ctx context.Context, p store.ScheduleInsertParams) (*rota.Schedule, error) {
	sc := p.Schedule
	cfg, err := scheduleConfigArgs(&sc)
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, "insert schedule", func(t *txn) error {
		rev, err := nextRev(t)
		if err != nil {
			return err
		}
		args := append([]any{sc.ID, rev, ms(p.Now), ms(p.Now)}, cfg...)
		args = append(args, stateArgs(&sc.ScheduleState)...)
		_, err = t.exec(`INSERT INTO schedules SET id = ?, version = 1, rev = ?, created_at = ?, updated_at = ?, `+
			scheduleConfigSet+`, `+stateSet, args...)
		return nameTaken(err, sc.Name)
	})
	if err != nil {
		return nil, err
	}
	return s.ScheduleGet(ctx, sc.ID)
}

func getSchedule(ctx context.Context, q queryer, id string, lock bool) (*rota.Schedule, error) {
	query := `SELECT ` + store.ScheduleColumns + ` FROM schedules WHERE id = ? AND deleted = 0`
	if lock {
		query += ` FOR UPDATE`
	}
	sc, err := scanSchedule(q.QueryRowContext(ctx, query, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("schedule", id)
	}
	return sc, unavailable(wrap("get schedule "+id, err))
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, id string) (*rota.Schedule, error) {
	return getSchedule(ctx, s.r, id, false)
}

// ScheduleGetByName implements store.ScheduleStore.
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*rota.Schedule, error) {
	sc, err := scanSchedule(s.r.QueryRowContext(ctx, `SELECT `+store.ScheduleColumns+` FROM schedules WHERE live_name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rota.Errorf(rota.CodeNotFound, "schedule named %q not found", name)
	}
	return sc, unavailable(wrap("get schedule "+name, err))
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context, p store.ScheduleListParams) (store.ScheduleListResult, error) {
	q, args, limit := store.ScheduleListQuery(p, func(int) string { return "?" })
	rows, err := s.r.QueryContext(ctx, q, args...)
	scheds, err := collect(rows, err, "list schedules", func(sc scanner) (rota.Schedule, error) {
		s, err := scanSchedule(sc)
		if err != nil {
			return rota.Schedule{}, err
		}
		return *s, nil
	})
	if err != nil {
		return store.ScheduleListResult{}, unavailable(err)
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
	err = s.tx(ctx, "update schedule", func(t *txn) error {
		var version int64
		err := t.QueryRowContext(t.ctx, `SELECT version FROM schedules WHERE id = ? AND deleted = 0 FOR UPDATE`, sc.ID).Scan(&version)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notFound("schedule", sc.ID)
		case err != nil:
			return wrap("read schedule "+sc.ID, err)
		case version != sc.Version:
			return conflict("schedule %s changed meanwhile (version %d, not %d): read it again", sc.ID, version, sc.Version)
		}
		rev, err := nextRev(t)
		if err != nil {
			return err
		}
		args := append(cfg, ms(p.Now), rev)
		args = append(args, stateArgs(&sc.ScheduleState)...)
		_, err = t.exec(`UPDATE schedules SET `+scheduleConfigSet+`, updated_at = ?, rev = ?, version = version + 1, `+
			stateSet+` WHERE id = ?`, append(args, sc.ID)...)
		return nameTaken(err, sc.Name)
	})
	if err != nil {
		return nil, err
	}
	return s.ScheduleGet(ctx, sc.ID)
}

// ScheduleDelete implements store.ScheduleStore.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	return s.tx(ctx, "delete schedule", func(t *txn) error {
		now := ms(p.Now)
		rev, err := nextRev(t)
		if err != nil {
			return err
		}
		n, err := t.affected(`UPDATE schedules SET deleted = 1, enabled = 0, next_fire = 0, version = version + 1,
			rev = ?, updated_at = ? WHERE id = ? AND deleted = 0`, rev, now, p.ID)
		if err != nil {
			return wrap("delete schedule "+p.ID, err)
		}
		if n == 0 {
			return notFound("schedule", p.ID)
		}
		// Held runs, and the unstarted runs of a target schedule, which
		// only Rota's HTTP executor could run, end CANCELED.
		rows, err := t.QueryContext(t.ctx, `SELECT id FROM tasks WHERE schedule_id = ? AND done = 0
			AND (held = 1 OR status = 'SCHEDULED' AND worker_ids = ?) FOR UPDATE`, p.ID, workerIDsValue([]string{rota.HTTPWorkerID}))
		ids, err := strings1(rows, err, "unstarted runs")
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := t.exec(`UPDATE tasks SET status = 'CANCELED', done = 1, avail = 0, end_time = ?, updated_at = ?,
			message = CASE WHEN held = 1 THEN 'canceled: the schedule was deleted before the run was released'
				ELSE 'canceled: the schedule was deleted before its HTTP target was called' END, held = 0
			WHERE id IN (`+inList(len(ids))+`)`, append([]any{now, now}, anyList(ids)...)...); err != nil {
			return wrap("cancel runs of "+p.ID, err)
		}
		return cancelDependents(t, ids, now)
	})
}

// ScheduleLoad implements store.ScheduleStore.
func (s *Store) ScheduleLoad(ctx context.Context, sinceRev int64) (store.ScheduleLoadResult, error) {
	var res store.ScheduleLoadResult
	// The revision first: rows changed after it are loaded again next time,
	// which is harmless; the other order could miss a change.
	if err := s.r.QueryRowContext(ctx, `SELECT rev FROM schedule_rev WHERE one = 1`).Scan(&res.Rev); err != nil {
		return res, unavailable(wrap("schedule revision", err))
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.ScheduleColumns+`, deleted FROM schedules WHERE rev > ? AND rev <= ?`, sinceRev, res.Rev)
	type loaded struct {
		sc      *rota.Schedule
		deleted bool
	}
	got, err := collect(rows, err, "load schedules", func(sc scanner) (loaded, error) {
		var l loaded
		var err error
		l.sc, err = scanSchedule(scanFunc(func(dest ...any) error { return sc.Scan(append(dest, &l.deleted)...) }))
		return l, err
	})
	if err != nil {
		return res, unavailable(err)
	}
	for _, l := range got {
		switch {
		case !l.deleted:
			res.Schedules = append(res.Schedules, *l.sc)
		case sinceRev > 0:
			res.Deleted = append(res.Deleted, l.sc.ID)
		}
	}
	return res, nil
}

const schedRunCols = `id, schedule_id, fire_time, schedule_attempt, status, skip_reason, triggered, held,
	stop_requested, created_at, start_time, end_time, message`

func scanScheduleRun(sc scanner) (rota.ScheduleRun, error) {
	var (
		r                         rota.ScheduleRun
		fire, created, start, end int64
		reason                    string
	)
	if err := sc.Scan(&r.TaskID, &r.ScheduleID, &fire, &r.Attempt, &r.Status, &reason, &r.Triggered, &r.Held,
		&r.StopRequested, &created, &start, &end, &r.Message); err != nil {
		return r, err
	}
	r.Reason = rota.SkipReason(reason)
	r.FireTime, r.CreatedAt, r.StartTime, r.EndTime = tm(fire), tm(created), tm(start), tm(end)
	return r, nil
}

func schedRuns(ctx context.Context, q queryer, query string, args ...any) ([]rota.ScheduleRun, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	return collect(rows, err, "schedule runs", scanScheduleRun)
}

// runNamed returns the run id among open, else reads it.
func runNamed(t *txn, open []rota.ScheduleRun, id string) (*rota.ScheduleRun, error) {
	if r := store.OpenRun(open, id); r != nil || id == "" {
		return r, nil
	}
	runs, err := schedRuns(t.ctx, t, `SELECT `+schedRunCols+` FROM tasks WHERE id = ?`, id)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return &runs[0], nil
}

// ScheduleRuns implements store.ScheduleStore.
func (s *Store) ScheduleRuns(ctx context.Context, p store.ScheduleRunsParams) (store.ScheduleRunsResult, error) {
	q, args, limit, err := store.ScheduleRunsQuery(p, schedRunCols)
	if err != nil {
		return store.ScheduleRunsResult{}, err
	}
	runs, err := schedRuns(ctx, s.r, q, args...)
	if err != nil {
		return store.ScheduleRunsResult{}, unavailable(err)
	}
	return store.ScheduleRunsPage(runs, limit), nil
}

// ScheduleOpenRuns implements store.ScheduleStore.
func (s *Store) ScheduleOpenRuns(ctx context.Context, ids []string) (map[string][]rota.ScheduleRun, error) {
	out := map[string][]rota.ScheduleRun{}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		runs, err := schedRuns(ctx, s.r, `SELECT `+schedRunCols+` FROM tasks WHERE schedule_id IN (`+inList(len(chunk))+`)
			AND done = 0 AND schedule_id <> '' ORDER BY schedule_id, fire_time, id`, anyList(chunk)...)
		if err != nil {
			return nil, unavailable(err)
		}
		for _, r := range runs {
			out[r.ScheduleID] = append(out[r.ScheduleID], r)
		}
	}
	return out, nil
}

// ScheduleTargetKinds implements store.ScheduleStore.
func (s *Store) ScheduleTargetKinds(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT kind FROM schedules WHERE deleted = 0 AND target IS NOT NULL ORDER BY kind`)
	kinds, err := strings1(rows, err, "target kinds")
	return kinds, unavailable(err)
}
