package mongostore

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// sortFields are the task document fields of store.TaskSortFields.
var sortFields = map[string]string{"created": "created", "run_at": "run_at", "finished": "end"}

// timeFilter is p's schedule and time-range filters (as
// store.TaskListParams renders them in SQL).
func timeFilter(p store.TaskListParams) bson.D {
	var f bson.D
	if p.ScheduleID != "" {
		f = append(f, bson.E{Key: "sched", Value: p.ScheduleID})
	}
	for _, r := range []struct {
		field         string
		after, before int64
	}{
		{"created", store.Millis(p.CreatedAfter), store.Millis(p.CreatedBefore)},
		{"run_at", store.Millis(p.RunAfter), store.Millis(p.RunBefore)},
		{"end", store.Millis(p.FinishedAfter), store.Millis(p.FinishedBefore)},
	} {
		cond := bson.D{}
		if r.after != 0 {
			cond = append(cond, bson.E{Key: "$gte", Value: r.after})
		}
		if r.before != 0 {
			cond = append(cond, bson.E{Key: "$lt", Value: r.before})
		}
		if r.field == "end" && (r.after != 0 || r.before != 0) {
			cond = append(cond, bson.E{Key: "$gt", Value: int64(0)}) // unfinished tasks have none
		}
		if len(cond) > 0 {
			f = append(f, bson.E{Key: r.field, Value: cond})
		}
	}
	return f
}

// listOrder is the sort and cursor filter of p.
func listOrder(p store.TaskListParams) (sort, after bson.D) {
	if p.Sort.Field == "" {
		if p.Cursor != "" {
			after = bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: p.Cursor}}}}
		}
		return bson.D{{Key: "_id", Value: -1}}, after
	}
	field, dir, cmp := sortFields[p.Sort.Field], -1, "$lt"
	if p.Sort.Asc {
		dir, cmp = 1, "$gt"
	}
	sort = bson.D{{Key: field, Value: dir}, {Key: "_id", Value: dir}}
	if p.Cursor != "" {
		v, tid, err := store.ParseSortCursor(p.Cursor)
		if err != nil {
			return sort, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{}}}}} // matches nothing
		}
		after = bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: field, Value: bson.D{{Key: cmp, Value: v}}}},
			bson.D{{Key: field, Value: v}, {Key: "_id", Value: bson.D{{Key: cmp, Value: tid}}}}}}}
	}
	return sort, after
}

// TaskList implements store.Store.
func (s *Store) TaskList(ctx context.Context, p store.TaskListParams) (store.TaskListResult, error) {
	f := taskFilter(p, true)
	sort, after := listOrder(p)
	f = append(f, after...)
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultTaskListLimit
	}
	docs, err := findAll[taskDoc](ctx, s.tasks, f, "tasks",
		options.Find().SetSort(sort).SetLimit(int64(limit+1)).SetProjection(bson.D{{Key: "runs", Value: 0}}))
	if err != nil {
		return store.TaskListResult{}, err
	}
	tasks := make([]rota.Task, len(docs))
	for i := range docs {
		tasks[i] = docs[i].task(false)
		tasks[i].DependsOn = nil
	}
	return p.Page(tasks, limit), nil
}

// TaskHistory implements store.Store: the finished tasks of the range are
// read (their times only) and added up by store.HistoryAdd.
func (s *Store) TaskHistory(ctx context.Context, p store.HistoryParams) ([]store.HistoryBucket, error) {
	from, bucket := p.From.UnixMilli(), p.Bucket.Milliseconds()
	to := from + bucket*int64(p.Buckets)
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "end", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}}},
		"task history", options.Find().SetProjection(bson.D{{Key: "status", Value: 1}, {Key: "start", Value: 1},
			{Key: "run_at", Value: 1}, {Key: "end", Value: 1}}))
	if err != nil {
		return nil, err
	}
	out := store.NewHistory(p)
	for _, t := range docs {
		r := store.HistoryRow{Bucket: (t.End - from) / bucket, Status: rota.Status(t.Status), Count: 1}
		if t.Start > 0 {
			wait, dur := t.Start-t.RunAt, t.End-t.Start
			r.Started, r.WaitSum, r.WaitMax, r.DurationSum, r.DurationMax = 1, wait, wait, dur, dur
		}
		store.HistoryAdd(out, r)
	}
	return out, nil
}

// TaskDeleteFinished implements store.Store: the runs go with their
// document; a dependent's link to a deleted task counts as met.
func (s *Store) TaskDeleteFinished(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "done", Value: true}},
		"finished tasks", options.Find().SetProjection(bson.D{{Key: "kind", Value: 1}, {Key: "key", Value: 1}}))
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range docs {
		res, err := s.tasks.DeleteOne(ctx, bson.D{{Key: "_id", Value: docs[i].ID}, {Key: "done", Value: true}})
		if err != nil {
			return n, wrap("delete task", err)
		}
		if res.DeletedCount == 1 {
			n++
			if docs[i].Key != "" {
				_, _ = s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: keyID(docs[i].Kind, docs[i].Key)}, {Key: "task", Value: docs[i].ID}})
			}
		}
	}
	return n, nil
}
