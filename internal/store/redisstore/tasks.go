package redisstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// TaskInsert implements store.Store.
func (s *Store) TaskInsert(ctx context.Context, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	return store.InsertOne(ctx, p, s.TaskInsertMany)
}

// TaskInsertMany implements store.Store: all items in one commit.
func (s *Store) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	var out []store.TaskInsertResult
	err := s.update(ctx, "insert tasks", func(t *tx) error {
		out = make([]store.TaskInsertResult, len(ps))
		for i, p := range ps {
			r, err := t.insertTask(p, i, out[:i])
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

// insertTask inserts item i of an insert (prior: the earlier results).
func (t *tx) insertTask(p store.TaskInsertParams, i int, prior []store.TaskInsertResult) (store.TaskInsertResult, error) {
	s := t.s
	if p.Key != "" {
		var holder string
		found, err := t.get(s.kKeyHolder(p.Kind, p.Key), &holder)
		if err != nil {
			return store.TaskInsertResult{}, err
		}
		if found {
			d, err := t.getTask(holder)
			if err != nil {
				return store.TaskInsertResult{}, err
			}
			if d.Done && p.RerunIfFinished {
				return t.rerun(d, p)
			}
			return store.TaskInsertResult{Task: d.task(), Existing: true}, nil
		}
		if err := t.put(s.kKeyHolder(p.Kind, p.Key), p.ID); err != nil {
			return store.TaskInsertResult{}, err
		}
	}
	if err := t.ensureKind(p.Kind); err != nil {
		return store.TaskInsertResult{}, err
	}
	now := ms(p.Now)
	d := &taskDoc{
		ID: p.ID, Kind: p.Kind, Level: p.Priority.Level(), Payload: p.Payload, Key: p.Key, Status: rota.StatusScheduled,
		Avail: true, MaxRetries: p.MaxRetries, Workers: p.Workers, WorkerIDs: p.WorkerIDs, TimeoutS: p.TimeoutSeconds,
		HBS: p.HeartbeatTimeoutSeconds, Created: now, RunAt: ms(p.RunAt), Sched: p.ScheduleID, Fire: ms(p.FireTime),
	}
	if d.RunAt == 0 {
		d.RunAt = now
	}
	t.guard(s.kTask(p.ID), 0)
	if len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0 {
		if err := t.linkDeps(d, p, i, prior); err != nil {
			return store.TaskInsertResult{}, err
		}
	}
	if err := t.putTask(nil, d); err != nil {
		return store.TaskInsertResult{}, err
	}
	if d.Avail {
		t.notify(store.Notification{Kind: d.Kind, RunAt: tm(d.RunAt)})
	}
	return store.TaskInsertResult{Task: d.task()}, nil
}

// linkDeps records the dependencies of the new task d and starts it
// WAITING, or CANCELED when one has already failed.
func (t *tx) linkDeps(d *taskDoc, p store.TaskInsertParams, i int, prior []store.TaskInsertResult) error {
	ids, err := store.DepIDs(p, i, prior)
	if err != nil {
		return err
	}
	status := make(map[string]rota.Status, len(ids))
	for _, id := range ids {
		pd, err := t.getTask(id)
		if errors.Is(err, rota.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		status[id] = pd.Status
		old := pd.clone()
		pd.Children++
		if err := t.putTask(old, pd); err != nil {
			return err
		}
		t.zadd(t.s.kChildren(id), 0, d.ID)
	}
	st, err := store.StartWithDeps(i, ids, status)
	if err != nil {
		return err
	}
	d.Parents = ids
	switch {
	case st.Failed != "":
		d.Status, d.Done, d.Avail, d.End, d.Msg = rota.StatusCanceled, true, false, d.Created, st.Failed
	case st.Waiting > 0:
		d.Status, d.Avail, d.Waiting = rota.StatusWaiting, false, st.Waiting
	}
	return nil
}

// rerun makes the finished task d claimable again under its id for
// insert p (RerunIfFinished): its runs are cleared and it starts afresh.
func (t *tx) rerun(d *taskDoc, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	old := d.clone()
	now := ms(p.Now)
	d.Status, d.Done, d.Avail, d.Held, d.Waiting = rota.StatusScheduled, false, true, false, 0
	d.Attempt, d.Failures, d.Successes, d.Running, d.Stop = 0, 0, 0, 0, false
	d.RunAt, d.Start, d.End, d.Addr, d.Msg, d.Result, d.Skip = ms(p.RunAt), 0, 0, "", "", nil, ""
	if d.RunAt == 0 {
		d.RunAt = now
	}
	if err := t.forgetRuns(d); err != nil {
		return store.TaskInsertResult{}, err
	}
	d.Runs, d.Hist, d.Ran = nil, 0, nil
	t.del(t.s.kHist(d.ID))
	if err := t.putTask(old, d); err != nil {
		return store.TaskInsertResult{}, err
	}
	t.notify(store.Notification{Kind: d.Kind, RunAt: tm(d.RunAt)})
	return store.TaskInsertResult{Task: d.task(), Existing: true, Rerun: true}, nil
}

// TaskGet implements store.Store.
func (s *Store) TaskGet(ctx context.Context, id string) (*rota.Task, error) {
	var d taskDoc
	found := false
	err := s.readDocs(ctx, []string{s.kTask(id)}, func(_ int, b []byte) error {
		found = true
		return jsonUnmarshal(b, &d)
	})
	if err != nil {
		return nil, s.wrap("get task", err)
	}
	if !found {
		return nil, store.NotFoundError("task", id)
	}
	t, err := s.withRuns(ctx, &d, true)
	return t, s.wrap("get task", err)
}

// withRuns is task d with its runs (history, then the record's) and,
// when it has any, its dependents (always with all; else once ended).
func (s *Store) withRuns(ctx context.Context, d *taskDoc, all bool) (*rota.Task, error) {
	t := d.task()
	var hist *redis.StringSliceCmd
	var children *redis.StringSliceCmd
	if d.Hist > 0 || (d.Children > 0 && (all || d.Done)) {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if d.Hist > 0 {
				hist = p.LRange(ctx, s.kHist(d.ID), 0, -1)
			}
			if d.Children > 0 && (all || d.Done) {
				children = p.ZRange(ctx, s.kChildren(d.ID), 0, -1)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if hist != nil {
		for _, h := range hist.Val() {
			var r runDoc
			if err := jsonUnmarshal([]byte(h), &r); err != nil {
				return nil, err
			}
			t.Runs = append(t.Runs, r.run(d.ID))
		}
	}
	for _, r := range d.Runs {
		t.Runs = append(t.Runs, r.run(d.ID))
	}
	if children != nil {
		t.Dependents = children.Val()
	}
	if !all {
		t.DependsOn = nil
	}
	return t, nil
}

// TaskUpdate implements store.Store.
func (s *Store) TaskUpdate(ctx context.Context, p store.TaskUpdateParams) (*rota.Task, error) {
	err := s.update(ctx, "update task", func(t *tx) error {
		d, err := t.getTask(p.ID)
		if err != nil {
			return err
		}
		old := d.clone()
		row := d.row()
		stopDisallowed, err := p.ApplyTo(&row)
		if err != nil {
			return err
		}
		d.fromRow(&row)
		if stopDisallowed {
			for i, r := range d.Runs {
				if r.Status == rota.StatusRunning && !slices.Contains(d.WorkerIDs, r.Worker) {
					d.Runs[i].Stop = true
				}
			}
		}
		return t.putTask(old, d)
	})
	if err != nil {
		return nil, err
	}
	return s.TaskGet(ctx, p.ID)
}

// TaskStop implements store.Store.
func (s *Store) TaskStop(ctx context.Context, p store.TaskStopParams) (*rota.Task, error) {
	err := s.update(ctx, "stop task", func(t *tx) error {
		d, err := t.getTask(p.ID)
		if err != nil {
			return err
		}
		old := d.clone()
		row := d.row()
		msg, err := p.MessageFor(&row)
		if err != nil {
			return err
		}
		d.Stop, d.Avail, d.Msg = true, false, msg
		if d.Running == 0 {
			d.Status, d.Done, d.End = rota.StatusCanceled, true, ms(p.Now)
			if err := t.putTask(old, d); err != nil {
				return err
			}
			return t.settleChildren(d, ms(p.Now))
		}
		for i := range d.Runs {
			if d.Runs[i].Status == rota.StatusRunning {
				d.Runs[i].Stop = true
			}
		}
		return t.putTask(old, d)
	})
	if err != nil {
		return nil, err
	}
	return s.TaskGet(ctx, p.ID)
}

// TaskNextRunAt implements store.Store: the first entry after now of the
// kinds' ready sets (which hold delayed work too, scored by RunAt).
func (s *Store) TaskNextRunAt(ctx context.Context, kinds []string, now time.Time) (time.Time, bool, error) {
	var cmds []*redis.ZSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range kinds {
			for lvl := range 3 {
				for _, pinned := range []bool{false, true} {
					cmds = append(cmds, p.ZRangeByScoreWithScores(ctx, s.kReady(k, lvl, pinned),
						&redis.ZRangeBy{Min: "(" + itoa(ms(now)), Max: "+inf", Count: 1}))
				}
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, false, s.wrap("next run at", err)
	}
	var best int64
	for _, c := range cmds {
		for _, z := range c.Val() {
			if v := int64(z.Score); best == 0 || v < best {
				best = v
			}
		}
	}
	return tm(best), best != 0, nil
}
