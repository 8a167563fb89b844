package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// ownedRun loads the task of run runID for a report by worker at now and
// the run's index in its record. It returns rota.ErrNotFound, or a
// lease-lost error, possibly after expiring the run on the spot (then
// wrapped in keepError so that the expiry commits).
func (t *tx) ownedRun(runID, worker string, now int64, backoff func(int) time.Duration) (*taskDoc, int, error) {
	d, err := t.readRun(runID, "")
	if err != nil {
		return nil, 0, err
	}
	i := d.runIndex(runID)
	if i < 0 {
		return nil, 0, store.LeaseLostError(runID, "a newer attempt replaced it")
	}
	r := d.Runs[i]
	if r.Worker != worker {
		return nil, 0, store.LeaseLostError(runID, fmt.Sprintf("it belongs to worker %s", r.Worker))
	}
	if r.Status != rota.StatusRunning {
		return nil, 0, store.LeaseLostError(runID, fmt.Sprintf("it already ended %s", r.Status))
	}
	if r.expires() <= now {
		why := "its lease expired"
		if r.Deadline != 0 && r.Deadline <= now {
			why = "its timeout passed"
		}
		if err := t.expireRun(d, i, now, backoff); err != nil {
			return nil, 0, err
		}
		return nil, 0, keepError{&store.ExpiredError{Kind: d.Kind, TaskID: d.ID, Err: store.LeaseLostError(runID, why)}}
	}
	return d, i, nil
}

// readRun reads the task of run runID (guarded) with runread.lua, and
// the worker's record into t.worker when workerKey is not "".
func (t *tx) readRun(runID, workerKey string) (*taskDoc, error) {
	if d, ok := t.tasks[t.runTasks[runID]]; ok {
		return d, nil
	}
	vals, err := runReadScript.Run(t.ctx, t.s.rdb, []string{t.s.kRunTasks(), workerKey}, runID, t.s.p+"t:").Slice()
	if err != nil {
		return nil, err
	}
	if workerKey != "" {
		if t.worker, err = parseWorker(vals[3:7]); err != nil {
			return nil, err
		}
	}
	taskID, _ := vals[0].(string)
	dc := parseDoc(vals[1:3])
	if taskID == "" || dc.v == 0 {
		return nil, store.NotFoundError("run", runID)
	}
	if d, ok := t.tasks[taskID]; ok {
		return d, nil
	}
	var d taskDoc
	if err := json.Unmarshal(dc.d, &d); err != nil {
		return nil, fmt.Errorf("decode task %s: %w", taskID, err)
	}
	t.guard(t.s.kTask(taskID), dc.v)
	t.tasks[taskID] = &d
	if t.runTasks == nil {
		t.runTasks = map[string]string{}
	}
	t.runTasks[runID] = taskID
	return &d, nil
}

// RunHeartbeat implements store.Store: one write of the task record.
func (s *Store) RunHeartbeat(ctx context.Context, p store.RunHeartbeatParams) (store.RunHeartbeatResult, error) {
	var res store.RunHeartbeatResult
	err := s.update(ctx, "heartbeat", func(t *tx) error {
		now := ms(p.Now)
		if _, err := t.readRun(p.RunID, s.kWorker(p.WorkerID)); err != nil {
			return err
		}
		d, i, err := t.ownedRun(p.RunID, p.WorkerID, now, nil)
		if err != nil {
			return err
		}
		old := d.clone()
		r := &d.Runs[i]
		r.Lease = now + int64(d.HBS)*1000
		if p.Message != "" {
			r.Msg = p.Message
		}
		w := t.worker
		if w != nil {
			t.hset(s.kWorker(p.WorkerID), "seen", now)
		}
		res = store.RunHeartbeatResult{Stop: r.Stop, Drain: w != nil && w.Stop, LeaseExpiresAt: tm(r.Lease),
			HeartbeatTimeoutSeconds: d.HBS}
		return t.putTask(old, d)
	})
	return res, err
}

// RunComplete implements store.Store: one write of the task record
// (plus its dependents', when it ends and has any).
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	var d *taskDoc
	err := s.update(ctx, "complete", func(t *tx) error {
		now := ms(p.Now)
		var i int
		var err error
		if d, i, err = t.ownedRun(p.RunID, p.WorkerID, now, p.Backoff); err != nil {
			return err
		}
		old := d.clone()
		status, run := store.ReportSettle(p, d.Runs[i].Stop)
		t.endRun(d, i, status, p.Message, now)
		return t.settle(old, d, run)
	})
	if err != nil {
		return nil, err
	}
	task, err := s.withRuns(ctx, d, false)
	return task, s.wrap("complete", err)
}

// endRun ends the RUNNING run i of d.
func (t *tx) endRun(d *taskDoc, i int, status rota.Status, msg string, now int64) {
	r := &d.Runs[i]
	r.Status, r.End, r.Lease, r.Msg = status, now, 0, msg
}

// expireRun ends run i of d, whose lease or deadline passed at now, as
// TIMEOUT, and settles the task.
func (t *tx) expireRun(d *taskDoc, i int, now int64, backoff func(int) time.Duration) error {
	old := d.clone()
	msg, run := store.ExpirySettle(tm(d.Runs[i].Deadline), tm(now), d.Runs[i].Stop, backoff)
	t.endRun(d, i, rota.StatusTimeout, msg, now)
	return t.settle(old, d, run)
}

// settle applies the end of one of d's runs (already ended in d; old is
// d as read) with the rules every backend shares (store.Settle), and
// writes d.
func (t *tx) settle(old, d *taskDoc, run store.SettleRun) error {
	d.Running = max(d.Running-1, 0)
	if c, ok := t.s.caps.Load(d.Kind); ok && c.(int) > 0 {
		t.notifySelf(store.Notification{Kind: d.Kind}) // a place freed under the cap
	}
	if d.Done {
		// A straggler of a task that already ended: only the counter moves.
		return t.putTask(old, d)
	}
	row := d.row()
	row.Running = d.Running
	st := row.Settle(run)
	d.fromRow(&row)
	if st.StopOthers {
		for j := range d.Runs {
			if d.Runs[j].Status == rota.StatusRunning {
				d.Runs[j].Stop = true
			}
		}
	}
	if err := t.putTask(old, d); err != nil {
		return err
	}
	if d.Avail {
		t.notifySelf(store.Notification{Kind: d.Kind, RunAt: tm(d.RunAt)})
	}
	if d.Done {
		return t.settleChildren(d, ms(run.Now))
	}
	return nil
}

// settleChildren applies the end of d to the tasks that wait for it: a
// success releases those it was the last wait of; any other end cancels
// the WAITING ones, and theirs in turn.
func (t *tx) settleChildren(d *taskDoc, now int64) error {
	if d.Children == 0 {
		return nil
	}
	ids, err := t.s.rdb.ZRange(t.ctx, t.s.kChildren(d.ID), 0, -1).Result()
	if err != nil {
		return err
	}
	for _, id := range ids {
		c, err := t.getTask(id)
		if err != nil {
			continue // deleted meanwhile
		}
		if c.Status != rota.StatusWaiting {
			continue
		}
		old := c.clone()
		if d.Status == rota.StatusSuccess {
			if c.Waiting--; c.Waiting == 0 {
				c.Status, c.Avail = rota.StatusScheduled, true
				t.notify(store.Notification{Kind: c.Kind, RunAt: tm(c.RunAt)})
			}
			if err := t.putTask(old, c); err != nil {
				return err
			}
			continue
		}
		c.Status, c.Done, c.Avail, c.End = rota.StatusCanceled, true, false, now
		c.Msg = store.DepFailedMessage(d.ID, d.Status)
		if err := t.putTask(old, c); err != nil {
			return err
		}
		if err := t.settleChildren(c, now); err != nil {
			return err
		}
	}
	return nil
}

// RunExpire implements store.Store: a leader duty, fenced in the commit.
func (s *Store) RunExpire(ctx context.Context, p store.RunExpireParams) (store.RunExpireResult, error) {
	var res store.RunExpireResult
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	err := s.update(ctx, "expire runs", func(t *tx) error {
		res = store.RunExpireResult{}
		t.fenced(p.Term, p.Now)
		now := ms(p.Now)
		ids, err := s.rdb.ZRangeByScore(ctx, s.kRunning(), &redis.ZRangeBy{Min: "-inf", Max: itoa(now), Count: int64(limit)}).Result()
		if err != nil || len(ids) == 0 {
			return err
		}
		taskIDs, err := s.rdb.HMGet(ctx, s.kRunTasks(), ids...).Result()
		if err != nil {
			return err
		}
		for j, id := range ids {
			d, err := t.getTask(str(taskIDs[j]))
			if err != nil {
				return err
			}
			i := d.runIndex(id)
			if i < 0 || d.Runs[i].Status != rota.StatusRunning {
				return fmt.Errorf("run %s indexed as running but is not: %w", id, errConflict)
			}
			if err := t.expireRun(d, i, now, p.Backoff); err != nil {
				return err
			}
			res.Add(d.ID, d.Kind)
		}
		return nil
	})
	return res, err
}

// RunNextExpiry implements store.Store: the first entry of the running
// set, scored by expiry.
func (s *Store) RunNextExpiry(ctx context.Context) (time.Time, bool, error) {
	z, err := s.rdb.ZRangeWithScores(ctx, s.kRunning(), 0, 0).Result()
	if err != nil || len(z) == 0 {
		return time.Time{}, false, s.wrap("next expiry", err)
	}
	return tm(int64(z[0].Score)), true, nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
