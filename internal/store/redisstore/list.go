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
	if p.Sort.Field != "" {
		return s.sortedList(ctx, p, keys, ids, limit)
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
	if kindOnly(p) {
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

// sortedList is a TaskList in another order than by id: the sources'
// matching tasks, all read, sorted (store.SortTasks) and cut after the
// cursor. It reads every task the filters' narrowest source holds.
func (s *Store) sortedList(ctx context.Context, p store.TaskListParams, keys, ids []string, limit int) (store.TaskListResult, error) {
	var tasks []rota.Task
	seen := map[string]bool{}
	collect := func(d *taskDoc) bool {
		if t := d.task(); !seen[t.ID] && store.TaskMatches(p, t, d.Ran, true) {
			seen[t.ID] = true
			tasks = append(tasks, *t)
		}
		return true
	}
	var err error
	if ids != nil {
		_, err = s.eachTask(ctx, ids, collect)
	}
	for _, k := range keys {
		if err = s.scanTasks(ctx, k, "", collect); err != nil {
			break
		}
	}
	if err != nil {
		return store.TaskListResult{}, s.wrap("list tasks", err)
	}
	tasks = store.SortTasks(p, tasks)
	if len(tasks) > limit+1 {
		tasks = tasks[:limit+1]
	}
	return p.Page(tasks, limit), nil
}

// TaskHistory implements store.Store: the finished sets of every kind
// over p's range, aggregated with the shared rows (store.HistoryAdd).
func (s *Store) TaskHistory(ctx context.Context, p store.HistoryParams) ([]store.HistoryBucket, error) {
	out := store.NewHistory(p)
	kinds, err := s.rdb.ZRange(ctx, s.kKinds(), 0, -1).Result()
	if err != nil {
		return nil, s.wrap("task history", err)
	}
	from, bucket := p.From.UnixMilli(), p.Bucket.Milliseconds()
	to := from + bucket*int64(p.Buckets)
	for _, kind := range kinds {
		ids, err := s.rdb.ZRangeByScore(ctx, s.kDone(kind), &redis.ZRangeBy{Min: itoa(from), Max: "(" + itoa(to)}).Result()
		if err != nil {
			return nil, s.wrap("task history", err)
		}
		_, err = s.eachTask(ctx, ids, func(d *taskDoc) bool {
			r := store.HistoryRow{Bucket: (d.End - from) / bucket, Status: d.Status, Count: 1}
			if d.Start > 0 {
				r.Started = 1
				r.WaitSum, r.DurationSum = d.Start-d.RunAt, d.End-d.Start
				r.WaitMax, r.DurationMax = r.WaitSum, r.DurationSum
			}
			store.HistoryAdd(out, r)
			return true
		})
		if err != nil {
			return nil, s.wrap("task history", err)
		}
	}
	return out, nil
}

// kindOnly: p filters by kind at most (statuses, sort, cursor and limit
// aside), so that the status sets' sizes count it.
func kindOnly(p store.TaskListParams) bool {
	return p.Key == "" && p.Priority == "" && p.WorkerID == "" && p.Search == "" && p.DependsOn == "" &&
		p.ScheduleID == "" && p.CreatedAfter.IsZero() && p.CreatedBefore.IsZero() && p.RunAfter.IsZero() &&
		p.RunBefore.IsZero() && p.FinishedAfter.IsZero() && p.FinishedBefore.IsZero()
}
