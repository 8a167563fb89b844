package mysqlstore

import (
	"context"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// ScheduleFire implements store.ScheduleStore, in one transaction.
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	var out []store.ScheduleFireResult
	err := s.tx(ctx, "fire schedules", func(t *txn) error {
		out = make([]store.ScheduleFireResult, len(ps))
		for i := range ps {
			if i == 0 || ps[i].Term != ps[i-1].Term || !ps[i].Now.Equal(ps[i-1].Now) {
				if err := fence(t, ps[i].Term, ps[i].Now); err != nil {
					return err
				}
			}
			// An item fails (Err) before it writes anything.
			t.now = ps[i].Now
			r, err := s.fireOne(t, &ps[i])
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

// fire is a ScheduleFire's transaction as store.FireOne uses it.
type fire struct {
	s *Store
	t *txn
}

func (s *Store) fireOne(t *txn, p *store.ScheduleFireParams) (store.ScheduleFireResult, error) {
	return store.FireOne(fire{s, t}, p)
}

func (f fire) FireState(p *store.ScheduleFireParams) (*rota.Schedule, *store.ScheduleRunState, error) {
	return fireState(f.t, p)
}

func (f fire) FireApply(sc *rota.Schedule, dec store.ScheduleDecision, state *rota.ScheduleState, enabled bool, res *store.ScheduleFireResult) error {
	t, now := f.t, ms(f.t.now)
	if err := f.s.insertRuns(t, sc, dec.Runs, now, state, res); err != nil {
		return err
	}
	var err error
	if res.Released, err = releaseRuns(t, sc, dec.Release, now); err != nil {
		return err
	}
	args := append([]any{boolInt(enabled)}, stateArgs(state)...)
	if _, err := t.exec(`UPDATE schedules SET enabled = ?, `+stateSet+`, version = version + 1 WHERE id = ?`, append(args, sc.ID)...); err != nil {
		return wrap("advance schedule "+sc.ID, err)
	}
	return nil
}

// fireState locks the schedule of a fire and reads its live run state: a
// nil state with rota.ErrNotFound (deleted) or rota.ErrConflict (another
// Version).
func fireState(t *txn, p *store.ScheduleFireParams) (*rota.Schedule, *store.ScheduleRunState, error) {
	sc, err := getSchedule(t.ctx, t, p.ID, true)
	if err != nil {
		return nil, nil, err
	}
	if sc.Version != p.Version {
		return nil, nil, conflict("schedule %s changed meanwhile (version %d, not %d)", sc.ID, sc.Version, p.Version)
	}
	st := &store.ScheduleRunState{Schedule: *sc}
	if st.Open, err = schedRuns(t.ctx, t, `SELECT `+schedRunCols+` FROM tasks WHERE schedule_id = ? AND schedule_id <> ''
		AND done = 0 ORDER BY fire_time, id`, sc.ID); err != nil {
		return nil, nil, err
	}
	if st.Last, err = runNamed(t, st.Open, sc.LastRunID); err != nil {
		return nil, nil, err
	}
	if st.PlanRun, err = runNamed(t, st.Open, sc.PlanRunID); err != nil {
		return nil, nil, err
	}
	return sc, st, nil
}

const insertRunSQL = `INSERT IGNORE INTO tasks (id, kind, level, payload, status, done, avail, max_retries, workers,
	worker_ids, pinned, timeout_s, hb_timeout_s, created_at, run_at, end_time, message, schedule_id, fire_time,
	updated_at, schedule_attempt, skip_reason, triggered, held, run_message)
	VALUES (?, ?, ?, ?, ?, ?, ?, 0, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '')`

// insertRun stores one run of sc; inserted is false when its (schedule,
// fire time) already has one.
func insertRun(t *txn, sc *rota.Schedule, in *store.ScheduleRunInsert, now int64) (*rota.ScheduleRun, bool, error) {
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
	runAt := in.RunAtMillis(now)
	n, err := t.affected(insertRunSQL, in.TaskID, sc.Kind, sc.Priority.Level(), string(sc.Payload),
		string(r.Status), done, avail, workerIDsValue(workerIDs), boolInt(len(workerIDs) > 0), sc.TimeoutSeconds,
		store.DefaultHeartbeatTimeout, now, runAt, ms(r.EndTime), in.Message, sc.ID, ms(in.FireTime),
		now, in.Attempt, string(in.Skip), boolInt(in.Triggered), boolInt(r.Held))
	if err != nil {
		return nil, false, wrap("insert run of schedule "+sc.ID, err)
	}
	if n == 0 {
		return nil, false, nil
	}
	if avail == 1 {
		t.notify(sc.Kind, runAt, now)
	}
	return &r, true, nil
}

// insertRuns stores the runs of a decision; a fire time that already had
// a run is reported in res.Duplicates and state points at that run.
func (s *Store) insertRuns(t *txn, sc *rota.Schedule, runs []store.ScheduleRunInsert, now int64, state *rota.ScheduleState, res *store.ScheduleFireResult) error {
	if len(runs) > 0 {
		if err := s.ensureKind(t, sc.Kind); err != nil {
			return err
		}
	}
	for i := range runs {
		in := &runs[i]
		r, ok, err := insertRun(t, sc, in, now)
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
		if err := t.QueryRowContext(t.ctx, `SELECT id FROM tasks WHERE schedule_id = ? AND fire_key = ?`,
			sc.ID, ms(in.FireTime)).Scan(&existing); err != nil {
			return wrap("find duplicate run", err)
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

// releaseRuns makes the held runs ids of schedule sc claimable from now
// and returns those released.
func releaseRuns(t *txn, sc *rota.Schedule, ids []string, now int64) ([]string, error) {
	var out []string
	for _, rid := range ids {
		n, err := t.affected(`UPDATE tasks SET held = 0, avail = 1, run_at = ?, message = '', updated_at = ?
			WHERE id = ? AND schedule_id = ? AND held = 1 AND done = 0`, now, now, rid, sc.ID)
		if err != nil {
			return nil, wrap("release run "+rid, err)
		}
		if n == 1 {
			out = append(out, rid)
			t.notify(sc.Kind, now, now)
		}
	}
	return out, nil
}

// ScheduleTrigger implements store.ScheduleStore.
func (s *Store) ScheduleTrigger(ctx context.Context, p store.ScheduleTriggerParams) (*rota.ScheduleRun, error) {
	var out *rota.ScheduleRun
	err := s.tx(ctx, "trigger schedule", func(t *txn) error {
		sc, err := getSchedule(t.ctx, t, p.ID, true)
		if err != nil {
			return err
		}
		if err := s.ensureKind(t, sc.Kind); err != nil {
			return err
		}
		now := ms(p.Now)
		r, ok, err := insertRun(t, sc, &store.ScheduleRunInsert{TaskID: p.TaskID, FireTime: tm(now), Attempt: 1, Triggered: true}, now)
		if err != nil {
			return err
		}
		if !ok {
			return conflict("task %s already exists", p.TaskID)
		}
		if _, err := t.exec(`UPDATE schedules SET last_run_id = ?, version = version + 1 WHERE id = ?`, r.TaskID, sc.ID); err != nil {
			return wrap("trigger schedule "+sc.ID, err)
		}
		out = r
		return nil
	})
	return out, err
}
