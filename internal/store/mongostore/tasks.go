package mongostore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// TaskInsert implements store.Store.
func (s *Store) TaskInsert(ctx context.Context, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	return store.InsertOne(ctx, p, s.TaskInsertMany)
}

// TaskInsertMany implements store.Store. Without transactions, "all or
// none" is kept by undoing: when an item fails, the tasks (and keys) the
// earlier items inserted are deleted before the error returns. Reruns of
// finished keyed tasks are applied last, when every new task is in.
func (s *Store) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	out := make([]store.TaskInsertResult, len(ps))
	var inserted []*taskDoc
	undo := func(err error) ([]store.TaskInsertResult, error) {
		for _, t := range inserted {
			s.deleteTask(context.WithoutCancel(ctx), t)
		}
		return nil, err
	}
	kinds := map[string]bool{}
	for i, p := range ps {
		t, r, err := s.insertOne(ctx, p, i, out[:i])
		if err != nil {
			return undo(err)
		}
		out[i] = r
		if t != nil {
			inserted = append(inserted, t)
			kinds[t.Kind] = t.Status == string(rota.StatusScheduled) || kinds[t.Kind]
		}
		if r.Rerun {
			kinds[r.Task.Kind] = true
		}
	}
	for k, claimable := range kinds {
		if claimable {
			s.bump(ctx, k)
		}
	}
	return out, nil
}

// insertOne inserts item i (prior: the earlier items' results); t is the
// new document (nil when an existing task answers).
func (s *Store) insertOne(ctx context.Context, p store.TaskInsertParams, i int, prior []store.TaskInsertResult) (*taskDoc, store.TaskInsertResult, error) {
	if err := s.ensureKind(ctx, p.Kind); err != nil {
		return nil, store.TaskInsertResult{}, err
	}
	t := newTaskDoc(p)
	if len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0 {
		if err := s.startWithDeps(ctx, t, p, i, prior); err != nil {
			return nil, store.TaskInsertResult{}, err
		}
	}
	if p.Key != "" {
		existing, err := s.holdKey(ctx, p)
		if err != nil {
			return nil, store.TaskInsertResult{}, err
		}
		if existing != nil {
			r, err := s.answerKey(ctx, existing, p)
			return nil, r, err
		}
	}
	t.derive()
	if _, _, err := s.stageReady(ctx, t); err != nil {
		return nil, store.TaskInsertResult{}, err
	}
	if _, err := s.tasks.InsertOne(ctx, t); err != nil {
		if p.Key != "" {
			_, _ = s.keys.DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: keyID(p.Kind, p.Key)}, {Key: "task", Value: p.ID}})
		}
		return nil, store.TaskInsertResult{}, wrap("insert task", err)
	}
	if len(t.Deps) > 0 {
		if err := s.recheckDeps(ctx, t.ID, p.Now); err != nil {
			return t, store.TaskInsertResult{}, err
		}
	}
	task := t.task(false)
	return t, store.TaskInsertResult{Task: &task}, nil
}

func newTaskDoc(p store.TaskInsertParams) *taskDoc {
	now := store.Millis(p.Now)
	runAt := store.Millis(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	return &taskDoc{
		ID: p.ID, Kind: p.Kind, Level: p.Priority.Level(), Payload: string(p.Payload), Key: p.Key,
		Status: string(rota.StatusScheduled), Avail: true, MaxRetries: p.MaxRetries, Workers: p.Workers,
		WorkerIDs: slices.Clone(p.WorkerIDs), TimeoutS: p.TimeoutSeconds, HBTimeoutS: p.HeartbeatTimeoutSeconds,
		Created: now, RunAt: runAt, Sched: p.ScheduleID, Fire: store.Millis(p.FireTime),
	}
}

func keyID(kind, key string) string { return kind + "\x00" + key }

// holdKey takes the key of p for p.ID (a document of task_keys whose _id
// is kind+key: the server's _id uniqueness decides concurrent inserts),
// or returns the task that holds it. A key whose task is gone (an insert
// that failed half way) is taken over.
func (s *Store) holdKey(ctx context.Context, p store.TaskInsertParams) (*taskDoc, error) {
	kid := keyID(p.Kind, p.Key)
	for range maxCASAttempts {
		_, err := s.keys.InsertOne(ctx, bson.D{{Key: "_id", Value: kid}, {Key: "task", Value: p.ID}, {Key: "at", Value: time.Now().UnixMilli()}})
		if err == nil {
			return nil, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return nil, wrap("hold key", err)
		}
		var k struct {
			Task string `bson:"task"`
			At   int64  `bson:"at"`
		}
		if err := s.keys.FindOne(ctx, id(kid)).Decode(&k); errors.Is(err, mongo.ErrNoDocuments) {
			continue
		} else if err != nil {
			return nil, wrap("read key", err)
		}
		t, found, err := s.getTask(ctx, id(k.Task))
		if err != nil || found {
			return t, err
		}
		if time.Now().UnixMilli()-k.At < staleTicket.Milliseconds() { // its insert is under way
			time.Sleep(claimLockRetry)
			continue
		}
		res, err := s.keys.UpdateOne(ctx, bson.D{{Key: "_id", Value: kid}, {Key: "task", Value: k.Task}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "task", Value: p.ID}, {Key: "at", Value: time.Now().UnixMilli()}}}})
		if err != nil {
			return nil, wrap("take over key", err)
		}
		if res.ModifiedCount == 1 {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("mongostore: key %q: too many concurrent inserts", p.Key)
}

// answerKey answers a keyed insert with the task holding the key,
// rerunning it when it is finished and p asks so.
func (s *Store) answerKey(ctx context.Context, t *taskDoc, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	if !t.Done || !p.RerunIfFinished {
		task := t.task(false)
		return store.TaskInsertResult{Task: &task, Existing: true}, nil
	}
	rerun := false
	t, _, err := s.mutateTask(ctx, id(t.ID), func(t *taskDoc) error {
		rerun = t.Done
		if !t.Done {
			return errNoWrite
		}
		runAt := store.Millis(p.RunAt)
		if runAt == 0 {
			runAt = store.Millis(p.Now)
		}
		t.Status, t.Done, t.Avail, t.Held, t.DepsWait, t.Attempt = string(rota.StatusScheduled), false, true, false, 0, 0
		t.Failures, t.Successes, t.Running, t.Stop, t.RunAt, t.Start, t.End = 0, 0, 0, false, runAt, 0, 0
		t.WorkerAddr, t.Message, t.Result, t.HasResult, t.Skip, t.Runs, t.DepsDone = "", "", "", false, "", nil, false
		return nil
	})
	if err != nil {
		return store.TaskInsertResult{}, err
	}
	task := t.task(false)
	return store.TaskInsertResult{Task: &task, Existing: true, Rerun: rerun}, nil
}

// deleteTask deletes a task and frees its key (best effort: undo and
// cleanup).
func (s *Store) deleteTask(ctx context.Context, t *taskDoc) {
	if _, err := s.tasks.DeleteOne(ctx, id(t.ID)); err != nil {
		s.log.Warn("mongostore: delete task", "task", t.ID, "err", err)
		return
	}
	if t.Key != "" {
		_, _ = s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: keyID(t.Kind, t.Key)}, {Key: "task", Value: t.ID}})
	}
}

// TaskGet implements store.Store.
func (s *Store) TaskGet(ctx context.Context, tid string) (*rota.Task, error) {
	t, found, err := s.getTask(ctx, id(tid))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, store.NotFoundError("task", tid)
	}
	return s.fullTask(ctx, t)
}

// fullTask is t with its runs and its dependents.
func (s *Store) fullTask(ctx context.Context, t *taskDoc) (*rota.Task, error) {
	out := t.task(true)
	if !t.HasDeps {
		// A dependent's insert marks its parents hasdeps first: none
		// (one query saved, an index-less scan on FerretDB).
		return &out, nil
	}
	kids, err := s.dependents(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	out.Dependents = kids
	return &out, nil
}

// dependents returns the ids of the tasks depending on tid, sorted.
func (s *Store) dependents(ctx context.Context, tid string) ([]string, error) {
	docs, err := findAll[struct {
		ID string `bson:"_id"`
	}](ctx, s.tasks, bson.D{{Key: "deps", Value: tid}}, "dependents",
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID)
	}
	return ids, nil
}

// taskFilter is the filter of p (its statuses when withStatus).
func taskFilter(p store.TaskListParams, withStatus bool) bson.D {
	f := bson.D{}
	add := func(k string, v any) { f = append(f, bson.E{Key: k, Value: v}) }
	if p.Kind != "" {
		add("kind", p.Kind)
	}
	if withStatus && p.Status != "" {
		add("status", string(p.Status))
	}
	if withStatus && len(p.Statuses) > 0 {
		in := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			in[i] = string(st)
		}
		f = append(f, bson.E{Key: "status", Value: bson.D{{Key: "$in", Value: in}}})
	}
	if p.Key != "" {
		add("key", p.Key)
	}
	if p.Priority != "" {
		add("level", p.Priority.Level())
	}
	if p.WorkerID != "" {
		add("ws", p.WorkerID)
	}
	if p.DependsOn != "" {
		add("deps", p.DependsOn)
	}
	if p.Search != "" {
		re := bson.Regex{Pattern: regexp.QuoteMeta(p.Search), Options: "i"}
		add("$or", bson.A{bson.D{{Key: "_id", Value: strings.ToLower(p.Search)}},
			bson.D{{Key: "key", Value: re}}, bson.D{{Key: "msg", Value: re}}})
	}
	return append(f, timeFilter(p)...)
}

// TaskCountByStatus implements store.Store.
func (s *Store) TaskCountByStatus(ctx context.Context, p store.TaskListParams) (map[rota.Status]int, error) {
	rows, err := aggregate[struct {
		ID    string `bson:"_id"`
		Count int    `bson:"n"`
	}](ctx, s.tasks, bson.A{
		bson.D{{Key: "$match", Value: taskFilter(p, false)}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$status"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	}, "count tasks")
	if err != nil {
		return nil, err
	}
	out := map[rota.Status]int{}
	for _, r := range rows {
		out[rota.Status(r.ID)] = r.Count
	}
	return out, nil
}

// aggregate decodes every document of a pipeline.
func aggregate[T any](ctx context.Context, c *mongo.Collection, pipeline bson.A, what string) ([]T, error) {
	cur, err := c.Aggregate(ctx, pipeline)
	if err != nil {
		return nil, wrap(what, err)
	}
	var out []T
	if err := cur.All(ctx, &out); err != nil {
		return nil, wrap(what, err)
	}
	return out, nil
}

// TaskUpdate implements store.Store: one write of the task document.
func (s *Store) TaskUpdate(ctx context.Context, p store.TaskUpdateParams) (*rota.Task, error) {
	t, found, err := s.mutateTask(ctx, id(p.ID), func(t *taskDoc) error {
		row := t.row()
		stopDisallowed, err := p.ApplyTo(&row)
		if err != nil {
			return err
		}
		t.setRow(&row)
		for i := range t.Runs {
			r := &t.Runs[i]
			if stopDisallowed && r.Status == string(rota.StatusRunning) && !slices.Contains(t.WorkerIDs, r.Worker) {
				r.Stop = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, store.NotFoundError("task", p.ID)
	}
	return s.fullTask(ctx, t)
}

// TaskStop implements store.Store: one write of the task document, then
// (when it ended) its dependents.
func (s *Store) TaskStop(ctx context.Context, p store.TaskStopParams) (*rota.Task, error) {
	now := store.Millis(p.Now)
	t, found, err := s.mutateTask(ctx, id(p.ID), func(t *taskDoc) error {
		row := t.row()
		msg, err := p.MessageFor(&row)
		if err != nil {
			return err
		}
		t.Stop, t.Avail, t.Message = true, false, msg
		if t.Running == 0 {
			t.Status, t.Done, t.End = string(rota.StatusCanceled), true, now
			return nil
		}
		for i := range t.Runs {
			if t.Runs[i].Status == string(rota.StatusRunning) {
				t.Runs[i].Stop = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, store.NotFoundError("task", p.ID)
	}
	if t.Done {
		if err := s.settleDependents(ctx, t, p.Now); err != nil {
			return nil, err
		}
	}
	return s.fullTask(ctx, t)
}
