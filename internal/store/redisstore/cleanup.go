package redisstore

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// TaskCleanup implements store.Store: per kind with a retention, the
// oldest entries of its finished set; each task goes with its history,
// its index entries and its key. A leader duty, fenced in the commit.
func (s *Store) TaskCleanup(ctx context.Context, p store.TaskCleanupParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	deleted := 0
	err := s.update(ctx, "cleanup", func(t *tx) error {
		deleted = 0
		t.fenced(p.Term, p.Now)
		kinds, err := s.KindList(ctx)
		if err != nil {
			return err
		}
		for _, k := range kinds {
			if k.RetentionSeconds <= 0 || deleted >= limit {
				continue
			}
			cutoff := ms(p.Now) - int64(k.RetentionSeconds)*1000
			ids, err := s.rdb.ZRangeByScore(ctx, s.kDone(k.Name), &redis.ZRangeBy{Min: "-inf", Max: "(" + itoa(cutoff),
				Count: int64(limit - deleted)}).Result()
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := t.deleteTask(id); err != nil {
					return err
				}
				deleted++
			}
		}
		return nil
	})
	return deleted, err
}

// TaskDeleteFinished implements store.Store: the finished tasks of ids,
// each with everything that refers to it, in one commit.
func (s *Store) TaskDeleteFinished(ctx context.Context, ids []string) (int, error) {
	n := 0
	err := s.update(ctx, "delete tasks", func(t *tx) error {
		n = 0
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			d, err := t.getTask(id)
			if errors.Is(err, rota.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if !d.Done {
				continue
			}
			if err := t.deleteTask(id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// deleteTask removes a finished task with everything that refers to it.
func (t *tx) deleteTask(id string) error {
	d, err := t.getTask(id)
	if err != nil {
		return err
	}
	if !d.Done {
		return errConflict // it was rerun meanwhile
	}
	s := t.s
	if err := t.forgetRuns(d); err != nil {
		return err
	}
	t.reindex(d, nil)
	t.del(s.kTask(id))
	t.del(s.kHist(id))
	t.del(s.kChildren(id))
	if d.Key != "" {
		t.del(s.kKeyHolder(d.Kind, d.Key))
	}
	if d.Sched != "" && !d.Triggered {
		t.del(s.kFire(d.Sched, d.Fire))
	}
	for _, parent := range d.Parents {
		t.zrem(s.kChildren(parent), id)
	}
	return nil
}

// RunKinds implements store.AccessStore: the kind of each run's task.
func (s *Store) RunKinds(ctx context.Context, runIDs []string) (map[string]string, error) {
	out := map[string]string{}
	if len(runIDs) == 0 {
		return out, nil
	}
	tasks, err := s.rdb.HMGet(ctx, s.kRunTasks(), runIDs...).Result()
	if err != nil {
		return nil, s.wrap("run kinds", err)
	}
	var ids []string
	for _, id := range tasks {
		if str(id) != "" {
			ids = append(ids, str(id))
		}
	}
	byTask := map[string]*taskDoc{}
	_, err = s.eachTask(ctx, ids, func(d *taskDoc) bool {
		byTask[d.ID] = d
		return true
	})
	if err != nil {
		return nil, s.wrap("run kinds", err)
	}
	for i, r := range runIDs {
		if d := byTask[str(tasks[i])]; d != nil {
			out[r] = d.Kind
		}
	}
	return out, nil
}

// forgetRuns drops the run ids of d (its record's and its history's)
// from the run → task hash.
func (t *tx) forgetRuns(d *taskDoc) error {
	for _, r := range d.Runs {
		t.hdel(t.s.kRunTasks(), r.ID)
	}
	if d.Hist == 0 {
		return nil
	}
	hist, err := t.s.rdb.LRange(t.ctx, t.s.kHist(d.ID), 0, -1).Result()
	if err != nil {
		return err
	}
	for _, h := range hist {
		var r runDoc
		if err := json.Unmarshal([]byte(h), &r); err != nil {
			return err
		}
		t.hdel(t.s.kRunTasks(), r.ID)
	}
	return nil
}
