package mongostore

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// ScheduleFire implements store.Store: fenced once for the call, then each
// item under its schedule's lock (see schedules.go).
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	for _, p := range ps {
		if err := s.fence(ctx, p.Term, p.Now); err != nil {
			return nil, err
		}
	}
	out := make([]store.ScheduleFireResult, len(ps))
	for i := range ps {
		p := &ps[i]
		err := s.withSchedLock(ctx, p.ID, func() error {
			r, err := s.fireOne(ctx, p)
			out[i] = r
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fireOne applies one item (its lock held).
func (s *Store) fireOne(ctx context.Context, p *store.ScheduleFireParams) (store.ScheduleFireResult, error) {
	sc, st, err := s.fireState(ctx, p)
	dec, res, ok, err := p.DecideOn(st, err)
	if !ok {
		return res, err
	}
	now := store.Millis(p.Now)
	state := dec.State
	if err := s.insertRuns(ctx, sc, dec.Runs, now, &state, &res); err != nil {
		return res, err
	}
	if res.Released, err = s.releaseRuns(ctx, sc.ID, dec.Release, now); err != nil {
		return res, err
	}
	if len(res.Released) > 0 || len(res.Inserted) > 0 {
		s.bump(ctx, sc.Kind)
	}
	old := sc.Version
	sc.Enabled = sc.Enabled && !dec.Disable
	sc.ScheduleState = state
	sc.Version++
	if err := s.writeSched(ctx, sc, old, 0, false); err != nil {
		return res, err
	}
	res.Schedule = sc
	res.Cancel = dec.Cancel
	return res, nil
}

// fireState reads what Decide decides on.
func (s *Store) fireState(ctx context.Context, p *store.ScheduleFireParams) (*rota.Schedule, *store.ScheduleRunState, error) {
	d, sc, err := s.getSched(ctx, p.ID)
	if err != nil {
		return nil, nil, err
	}
	if sc.Version != p.Version {
		return nil, nil, store.ConflictError("schedule %s changed meanwhile (version %d, not %d)", sc.ID, sc.Version, p.Version)
	}
	st := &store.ScheduleRunState{Schedule: *sc}
	if st.Open, err = s.schedRuns(ctx, bson.D{{Key: "sched", Value: d.ID}, {Key: "done", Value: false}}, fireOrder, 0); err != nil {
		return nil, nil, err
	}
	if st.Last, err = s.runNamed(ctx, st.Open, sc.LastRunID); err != nil {
		return nil, nil, err
	}
	if st.PlanRun, err = s.runNamed(ctx, st.Open, sc.PlanRunID); err != nil {
		return nil, nil, err
	}
	return sc, st, nil
}

// runNamed is the run tid, among open or read; nil when none.
func (s *Store) runNamed(ctx context.Context, open []rota.ScheduleRun, tid string) (*rota.ScheduleRun, error) {
	if r := store.OpenRun(open, tid); r != nil || tid == "" {
		return r, nil
	}
	t, found, err := s.getTask(ctx, id(tid))
	if err != nil || !found {
		return nil, err
	}
	r := t.scheduleRun()
	return &r, nil
}

// fireKey is the schedule_fires document of one (schedule, fire time).
func fireKey(sid string, fire int64) string { return fmt.Sprintf("%s/%d", sid, fire) }

// insertRuns inserts a decision's runs; a fire time already run is
// reported in res.Duplicates and the state's run ids point to the run
// that exists.
func (s *Store) insertRuns(ctx context.Context, sc *rota.Schedule, runs []store.ScheduleRunInsert, now int64, state *rota.ScheduleState, res *store.ScheduleFireResult) error {
	if len(runs) > 0 {
		if err := s.ensureKind(ctx, sc.Kind); err != nil {
			return err
		}
	}
	for i := range runs {
		in := &runs[i]
		r, existing, err := s.insertRun(ctx, sc, in, now)
		if err != nil {
			return err
		}
		if r != nil {
			res.Inserted = append(res.Inserted, *r)
			continue
		}
		res.Duplicates = append(res.Duplicates, store.FromMillis(store.Millis(in.FireTime)))
		if state.LastRunID == in.TaskID {
			state.LastRunID = existing
		}
		if state.PlanRunID == in.TaskID {
			state.PlanRunID = existing
		}
	}
	return nil
}

// insertRun inserts the task of one run; nil and the existing run's id
// when its (schedule, fire time) already has one (triggered runs are
// outside the series: only their task id must be new).
func (s *Store) insertRun(ctx context.Context, sc *rota.Schedule, in *store.ScheduleRunInsert, now int64) (*rota.ScheduleRun, string, error) {
	fire := store.Millis(in.FireTime)
	if !in.Triggered {
		key := fireKey(sc.ID, fire)
		_, err := s.fires.InsertOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "task", Value: in.TaskID}})
		if mongo.IsDuplicateKeyError(err) {
			var f struct {
				Task string `bson:"task"`
			}
			if err := s.fires.FindOne(ctx, id(key)).Decode(&f); err != nil {
				return nil, "", wrap("read fire", err)
			}
			if n, err := s.tasks.CountDocuments(ctx, id(f.Task)); err != nil || n > 0 {
				return nil, f.Task, wrap("read fire", err)
			}
			// A fire whose task never came (an interrupted fire): it is ours now.
			if _, err := s.fires.ReplaceOne(ctx, id(key), bson.D{{Key: "_id", Value: key}, {Key: "task", Value: in.TaskID}}); err != nil {
				return nil, "", wrap("take over fire", err)
			}
		} else if err != nil {
			return nil, "", wrap("insert fire", err)
		}
	}
	r := store.NewScheduleRun(sc.ID, in, now)
	t := &taskDoc{
		ID: in.TaskID, Kind: sc.Kind, Level: sc.Priority.Level(), Payload: string(sc.Payload), Status: string(r.Status),
		Avail: true, Workers: 1, TimeoutS: sc.TimeoutSeconds, HBTimeoutS: store.DefaultHeartbeatTimeout, Created: now,
		RunAt: in.RunAtMillis(now), End: store.Millis(r.EndTime), Message: in.Message, Sched: sc.ID, Fire: fire,
		SAttempt: in.Attempt, Skip: string(in.Skip), Triggered: in.Triggered, Held: r.Held,
	}
	switch {
	case in.Skip != "":
		t.Done, t.Avail = true, false
	case in.Held:
		t.Avail = false
	}
	if sc.Target != nil {
		t.WorkerIDs = []string{rota.HTTPWorkerID}
	}
	t.derive()
	if _, _, err := s.stageReady(ctx, t); err != nil {
		return nil, "", err
	}
	if _, err := s.tasks.InsertOne(ctx, t); mongo.IsDuplicateKeyError(err) {
		return nil, "", store.ConflictError("task %s already exists", in.TaskID)
	} else if err != nil {
		return nil, "", wrap("insert run of schedule "+sc.ID, err)
	}
	return &r, "", nil
}

// releaseRuns makes the named held runs of schedule sid claimable at now.
func (s *Store) releaseRuns(ctx context.Context, sid string, ids []string, now int64) ([]string, error) {
	var out []string
	for _, rid := range ids {
		released := false
		_, _, err := s.mutateTask(ctx, id(rid), func(t *taskDoc) error {
			released = false
			if t.Sched != sid || !t.Held || t.Done {
				return errNoWrite
			}
			t.Held, t.Avail, t.RunAt, t.Message, released = false, true, now, "", true
			return nil
		})
		if err != nil {
			return nil, err
		}
		if released {
			out = append(out, rid)
		}
	}
	return out, nil
}

// ScheduleTrigger implements store.Store.
func (s *Store) ScheduleTrigger(ctx context.Context, p store.ScheduleTriggerParams) (*rota.ScheduleRun, error) {
	var out *rota.ScheduleRun
	err := s.withSchedLock(ctx, p.ID, func() error {
		_, sc, err := s.getSched(ctx, p.ID)
		if err != nil {
			return err
		}
		if err := s.ensureKind(ctx, sc.Kind); err != nil {
			return err
		}
		now := store.Millis(p.Now)
		r, _, err := s.insertRun(ctx, sc, &store.ScheduleRunInsert{TaskID: p.TaskID, FireTime: store.FromMillis(now), Attempt: 1, Triggered: true}, now)
		if err != nil {
			return err
		}
		s.bump(ctx, sc.Kind)
		old := sc.Version
		sc.LastRunID, sc.Version = r.TaskID, old+1
		out = r
		return s.writeSched(ctx, sc, old, 0, false)
	})
	return out, err
}
