package redisstore

import (
	"context"
	"errors"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// ScheduleFire implements store.ScheduleStore: every item in one commit,
// fenced by the items' term.
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	var out []store.ScheduleFireResult
	err := s.update(ctx, "fire schedules", func(t *tx) error {
		out = make([]store.ScheduleFireResult, len(ps))
		if len(ps) > 0 {
			t.fenced(ps[0].Term, ps[0].Now)
		}
		for i := range ps {
			t.fireNow = ms(ps[i].Now)
			r, err := store.FireOne(fireTx{t}, &ps[i])
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

// fireTx is a ScheduleFire transaction as store.FireOne sees it.
type fireTx struct{ t *tx }

// FireState implements store.FireBackend.
func (f fireTx) FireState(p *store.ScheduleFireParams) (*rota.Schedule, *store.ScheduleRunState, error) {
	return f.t.fireState(p)
}

// FireApply implements store.FireBackend: the new runs, the released
// ones and the schedule's new state, in the transaction's commit.
func (f fireTx) FireApply(sc *rota.Schedule, dec store.ScheduleDecision, state *rota.ScheduleState, enabled bool,
	res *store.ScheduleFireResult) error {
	t := f.t
	now := t.fireNow
	for i := range dec.Runs {
		if err := t.insertRun(sc, &dec.Runs[i], now, state, res); err != nil {
			return err
		}
	}
	for _, id := range dec.Release {
		d, err := t.getTask(id)
		if err != nil || !d.Held || d.Done || d.Sched != sc.ID {
			continue
		}
		old := d.clone()
		d.Held, d.Avail, d.RunAt, d.Msg = false, true, now, ""
		if err := t.putTask(old, d); err != nil {
			return err
		}
		t.notify(store.Notification{Kind: d.Kind})
		res.Released = append(res.Released, id)
	}
	var cur schedDoc
	if _, err := t.get(t.s.kSched(sc.ID), &cur); err != nil {
		return err
	}
	next := *sc
	next.Enabled, next.ScheduleState = enabled, *state
	next.Version++
	return t.putSched(&next, false, false, cur.Rev)
}

// fireState reads the live state Decide is given.
func (t *tx) fireState(p *store.ScheduleFireParams) (*rota.Schedule, *store.ScheduleRunState, error) {
	sc, _, err := t.getSched(p.ID)
	if err != nil {
		return nil, nil, err
	}
	if sc.Version != p.Version {
		return nil, nil, store.ConflictError("schedule %s changed meanwhile (version %d, not %d)", sc.ID, sc.Version, p.Version)
	}
	st := &store.ScheduleRunState{Schedule: *sc}
	open, err := t.openRuns(sc.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range open {
		st.Open = append(st.Open, d.scheduleRun())
	}
	named := func(id string) (*rota.ScheduleRun, error) {
		if r := store.OpenRun(st.Open, id); r != nil || id == "" {
			return r, nil
		}
		d, err := t.getTask(id)
		if errors.Is(err, rota.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		r := d.scheduleRun()
		return &r, nil
	}
	if st.Last, err = named(sc.LastRunID); err != nil {
		return nil, nil, err
	}
	if st.PlanRun, err = named(sc.PlanRunID); err != nil {
		return nil, nil, err
	}
	return sc, st, nil
}

// insertRun stores one run of a decision, or records it as a duplicate
// when its (schedule, fire time) already has one.
func (t *tx) insertRun(sc *rota.Schedule, in *store.ScheduleRunInsert, now int64, state *rota.ScheduleState, res *store.ScheduleFireResult) error {
	if !in.Triggered {
		var existing string
		found, err := t.get(t.s.kFire(sc.ID, ms(in.FireTime)), &existing)
		if err != nil {
			return err
		}
		if found {
			res.Duplicates = append(res.Duplicates, tm(ms(in.FireTime)))
			if state.LastRunID == in.TaskID {
				state.LastRunID = existing
			}
			if state.PlanRunID == in.TaskID {
				state.PlanRunID = existing
			}
			return nil
		}
		if err := t.put(t.s.kFire(sc.ID, ms(in.FireTime)), in.TaskID); err != nil {
			return err
		}
	}
	r, err := t.newRun(sc, in, now)
	if err != nil {
		return err
	}
	res.Inserted = append(res.Inserted, r)
	return nil
}

// newRun writes the task of a schedule run.
func (t *tx) newRun(sc *rota.Schedule, in *store.ScheduleRunInsert, now int64) (rota.ScheduleRun, error) {
	r := store.NewScheduleRun(sc.ID, in, now)
	if err := t.ensureKind(sc.Kind); err != nil {
		return r, err
	}
	d := &taskDoc{
		ID: in.TaskID, Kind: sc.Kind, Level: sc.Priority.Level(), Payload: sc.Payload, Status: r.Status,
		Done: in.Skip != "", Avail: in.Skip == "" && !r.Held, Held: r.Held, Workers: 1, TimeoutS: sc.TimeoutSeconds,
		HBS: store.DefaultHeartbeatTimeout, Created: now, RunAt: in.RunAtMillis(now), End: ms(r.EndTime),
		Msg: in.Message, Sched: sc.ID, Fire: ms(in.FireTime), SAttempt: in.Attempt, Skip: string(in.Skip),
		Triggered: in.Triggered,
	}
	if sc.Target != nil {
		d.WorkerIDs = []string{rota.HTTPWorkerID}
	}
	t.guard(t.s.kTask(d.ID), 0)
	if err := t.putTask(nil, d); err != nil {
		return r, err
	}
	if d.Avail {
		t.notify(store.Notification{Kind: d.Kind, RunAt: tm(d.RunAt)})
	}
	return r, nil
}

// ScheduleTrigger implements store.ScheduleStore.
func (s *Store) ScheduleTrigger(ctx context.Context, p store.ScheduleTriggerParams) (*rota.ScheduleRun, error) {
	var out rota.ScheduleRun
	err := s.update(ctx, "trigger schedule", func(t *tx) error {
		sc, d, err := t.getSched(p.ID)
		if err != nil {
			return err
		}
		if ds, err := t.peekMany([]string{s.kTask(p.TaskID)}); err != nil {
			return err
		} else if ds[0].v != 0 {
			return store.ConflictError("task %s already exists", p.TaskID)
		}
		now := ms(p.Now)
		if out, err = t.newRun(sc, &store.ScheduleRunInsert{TaskID: p.TaskID, FireTime: tm(now), Attempt: 1, Triggered: true}, now); err != nil {
			return err
		}
		sc.LastRunID = out.TaskID
		sc.Version++
		return t.putSched(sc, false, false, d.Rev)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
