package redisstore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// listSources are the sorted sets (members: task ids) that hold every
// task matching p's filters, the narrowest the filters allow; ids is set
// instead when the filters name at most one task (kind and key).
func (s *Store) listSources(ctx context.Context, p store.TaskListParams, withStatus bool) (keys, ids []string, err error) {
	sts := p.Statuses
	if p.Status != "" {
		sts = []rota.Status{p.Status}
	}
	if !withStatus || len(sts) == 0 {
		sts = nil
	}
	switch {
	case p.Key != "" && p.Kind != "":
		var holder string
		err := s.readDocs(ctx, []string{s.kKeyHolder(p.Kind, p.Key)}, func(_ int, b []byte) error {
			return json.Unmarshal(b, &holder)
		})
		if holder != "" {
			ids = []string{holder}
		}
		return nil, ids, err
	case p.DependsOn != "":
		return []string{s.kChildren(p.DependsOn)}, nil, nil
	case p.WorkerID != "":
		return []string{s.kWorkerTasks(p.WorkerID)}, nil, nil
	case len(sts) > 0:
		for _, st := range sts {
			if p.Kind != "" {
				keys = append(keys, s.kKindStatus(p.Kind, st))
			} else {
				keys = append(keys, s.kStatus(st))
			}
		}
		return keys, nil, nil
	case p.Kind != "":
		for _, st := range statuses {
			keys = append(keys, s.kKindStatus(p.Kind, st))
		}
		return keys, nil, nil
	}
	return []string{s.kIDs()}, nil, nil
}

// scanTasks reads the tasks of source key, newest first, below cursor
// ("" = from the newest), calling keep with each until it returns false
// or the source ends.
func (s *Store) scanTasks(ctx context.Context, key, cursor string, keep func(*taskDoc) bool) error {
	max := "+"
	if cursor != "" {
		max = "(" + cursor
	}
	const batch = 200
	for {
		ids, err := s.rdb.ZRevRangeByLex(ctx, key, &redis.ZRangeBy{Min: "-", Max: max, Count: batch}).Result()
		if err != nil || len(ids) == 0 {
			return err
		}
		more, err := s.eachTask(ctx, ids, keep)
		if err != nil || !more || len(ids) < batch {
			return err
		}
		max = "(" + ids[len(ids)-1]
	}
}

// eachTask reads tasks ids in one round trip and calls keep with each
// present one until it returns false (more is then false).
func (s *Store) eachTask(ctx context.Context, ids []string, keep func(*taskDoc) bool) (more bool, err error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.kTask(id)
	}
	more = true
	err = s.readDocs(ctx, keys, func(_ int, b []byte) error {
		if !more {
			return nil
		}
		var d taskDoc
		if err := json.Unmarshal(b, &d); err != nil {
			return err
		}
		more = keep(&d)
		return nil
	})
	return more, err
}

// TaskList implements store.Store: each source read newest first from
// the cursor, filtered as read, merged.
func (s *Store) TaskList(ctx context.Context, p store.TaskListParams) (store.TaskListResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultTaskListLimit
	}
	keys, ids, err := s.listSources(ctx, p, true)
	if err != nil {
		return store.TaskListResult{}, s.wrap("list tasks", err)
	}
	var tasks []rota.Task
	collect := func(d *taskDoc) bool {
		t := d.task()
		if store.TaskMatches(p, t, d.Ran, true) && (p.Cursor == "" || d.ID < p.Cursor) {
			tasks = append(tasks, *t)
		}
		return true
	}
	if ids != nil {
		_, err = s.eachTask(ctx, ids, collect)
	}
	for _, k := range keys {
		n := len(tasks)
		err = s.scanTasks(ctx, k, p.Cursor, func(d *taskDoc) bool {
			collect(d)
			return len(tasks)-n <= limit
		})
		if err != nil {
			break
		}
	}
	if err != nil {
		return store.TaskListResult{}, s.wrap("list tasks", err)
	}
	slices.SortFunc(tasks, func(a, b rota.Task) int { return strings.Compare(b.ID, a.ID) })
	tasks = slices.CompactFunc(tasks, func(a, b rota.Task) bool { return a.ID == b.ID })
	if len(tasks) > limit+1 {
		tasks = tasks[:limit+1]
	}
	return store.TaskListPage(tasks, limit), nil
}

// TaskCountByStatus implements store.Store: the sizes of the status sets
// when only the kind filters, else a filtered read of the narrowest
// source.
func (s *Store) TaskCountByStatus(ctx context.Context, p store.TaskListParams) (map[rota.Status]int, error) {
	out := map[rota.Status]int{}
	if p.Key == "" && p.Priority == "" && p.WorkerID == "" && p.Search == "" && p.DependsOn == "" {
		cmds := make([]*redis.IntCmd, len(statuses))
		_, err := s.rdb.Pipelined(ctx, func(pp redis.Pipeliner) error {
			for i, st := range statuses {
				if p.Kind != "" {
					cmds[i] = pp.ZCard(ctx, s.kKindStatus(p.Kind, st))
				} else {
					cmds[i] = pp.ZCard(ctx, s.kStatus(st))
				}
			}
			return nil
		})
		if err != nil {
			return nil, s.wrap("count tasks", err)
		}
		for i, st := range statuses {
			if n := cmds[i].Val(); n > 0 {
				out[st] = int(n)
			}
		}
		return out, nil
	}
	keys, ids, err := s.listSources(ctx, p, false)
	if err != nil {
		return nil, s.wrap("count tasks", err)
	}
	count := func(d *taskDoc) bool {
		if store.TaskMatches(p, d.task(), d.Ran, false) {
			out[d.Status]++
		}
		return true
	}
	if ids != nil {
		_, err = s.eachTask(ctx, ids, count)
	}
	for _, k := range keys {
		if err = s.scanTasks(ctx, k, "", count); err != nil {
			break
		}
	}
	return out, s.wrap("count tasks", err)
}
