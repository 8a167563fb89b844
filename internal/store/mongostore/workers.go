package mongostore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// workerDoc is a worker as stored; its running runs are counted from the
// tasks' rw arrays.
type workerDoc struct {
	ID     string   `bson:"_id"`
	Addr   string   `bson:"addr"`
	Kinds  []string `bson:"kinds"`
	First  int64    `bson:"first"`
	Last   int64    `bson:"last"`
	WaitMS int64    `bson:"wait"`
	Stop   bool     `bson:"stop"`
	Dereg  bool     `bson:"dereg"`
	// A push worker's registration (store.PushStore): it goes with the
	// worker when the worker is pruned.
	Push       bool   `bson:"push,omitempty"`
	PushAddr   string `bson:"push_addr,omitempty"`
	PushCap    int    `bson:"push_cap,omitempty"`
	Registered int64  `bson:"registered,omitempty"`
}

func (w *workerDoc) worker(running int, now time.Time) rota.Worker {
	kinds := slices.Clone(w.Kinds)
	slices.Sort(kinds)
	out := rota.Worker{ID: w.ID, Address: w.Addr, Kinds: kinds, Running: running, FirstSeen: store.FromMillis(w.First),
		LastSeen: store.FromMillis(w.Last), StopRequested: w.Stop}
	if out.Kinds == nil {
		out.Kinds = []string{}
	}
	out.Status = store.WorkerStatusAt(out.LastSeen, time.Duration(w.WaitMS)*time.Millisecond, w.Stop || w.Dereg, running, now)
	return out
}

// workerSeen records a claiming worker (one upsert returning it) and
// reports whether it was asked to stop. Its kinds accumulate up to
// store.MaxWorkerKinds, past which it keeps the claim's kinds.
func (s *Store) workerSeen(ctx context.Context, p store.TaskClaimParams, now int64) (bool, error) {
	kinds := p.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	var w workerDoc
	err := s.workers.FindOneAndUpdate(ctx, id(p.WorkerID), bson.D{
		{Key: "$set", Value: bson.D{{Key: "addr", Value: p.WorkerAddress}, {Key: "last", Value: now},
			{Key: "wait", Value: p.Wait.Milliseconds()}, {Key: "dereg", Value: false}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "first", Value: now}, {Key: "stop", Value: false}}},
		{Key: "$addToSet", Value: bson.D{{Key: "kinds", Value: bson.D{{Key: "$each", Value: kinds}}}}},
	}, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&w)
	if err != nil {
		return false, wrap("record worker "+p.WorkerID, err)
	}
	if len(w.Kinds) > store.MaxWorkerKinds {
		if _, err := s.workers.UpdateOne(ctx, id(p.WorkerID), bson.D{{Key: "$set", Value: bson.D{{Key: "kinds", Value: kinds}}}}); err != nil {
			return false, wrap("record worker kinds", err)
		}
	}
	return w.Stop, nil
}

// runningBy counts the running runs of each worker of ids (all when ids
// is nil).
func (s *Store) runningBy(ctx context.Context, ids []string) (map[string]int, error) {
	f := bson.D{{Key: "running", Value: bson.D{{Key: "$gt", Value: 0}}}}
	if ids != nil {
		f = bson.D{{Key: "rw", Value: bson.D{{Key: "$in", Value: ids}}}}
	}
	docs, err := findAll[struct {
		RW []string `bson:"rw"`
	}](ctx, s.tasks, f, "running runs", options.Find().SetProjection(bson.D{{Key: "rw", Value: 1}}))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, d := range docs {
		for _, w := range d.RW {
			out[w]++
		}
	}
	return out, nil
}

// findWorkers reads the worker documents matching f, by id, with the
// count of each one's running runs (by worker id); what names the read in
// errors.
func (s *Store) findWorkers(ctx context.Context, f bson.D, what string) ([]workerDoc, map[string]int, error) {
	docs, err := findAll[workerDoc](ctx, s.workers, f, what, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(docs))
	for i := range docs {
		ids[i] = docs[i].ID
	}
	running, err := s.runningBy(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	return docs, running, nil
}

// listWorkers reads the workers matching f, by id, with their running runs.
func (s *Store) listWorkers(ctx context.Context, f bson.D, now time.Time) ([]rota.Worker, error) {
	docs, running, err := s.findWorkers(ctx, f, "workers")
	if err != nil {
		return nil, err
	}
	out := make([]rota.Worker, len(docs))
	for i := range docs {
		out[i] = docs[i].worker(running[docs[i].ID], now)
	}
	return out, nil
}

// WorkerList implements store.Store.
func (s *Store) WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error) {
	return s.listWorkers(ctx, bson.D{}, now)
}

// WorkerListPage implements store.Store: the status filter is applied to
// the workers read (statuses are computed at Now, as WorkerStatusAt does).
func (s *Store) WorkerListPage(ctx context.Context, p store.WorkerListParams) (store.WorkerListResult, error) {
	f := bson.D{}
	if p.Cursor != "" {
		f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.Cursor}}})
	}
	if p.Kind != "" {
		f = append(f, bson.E{Key: "kinds", Value: p.Kind})
	}
	ws, err := s.listWorkers(ctx, f, p.Now)
	if err != nil {
		return store.WorkerListResult{}, err
	}
	if p.Status != "" {
		ws = slices.DeleteFunc(ws, func(w rota.Worker) bool { return w.Status != p.Status })
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultWorkerListLimit
	}
	if len(ws) > limit+1 {
		ws = ws[:limit+1]
	}
	return store.WorkerListPage(ws, limit), nil
}

// setWorker applies set to a worker and returns it; rota.ErrNotFound for
// an unknown worker.
func (s *Store) setWorker(ctx context.Context, wid string, set bson.D, now time.Time) (*rota.Worker, error) {
	var w workerDoc
	err := s.workers.FindOneAndUpdate(ctx, id(wid), bson.D{{Key: "$set", Value: set}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&w)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, store.NotFoundError("worker", wid)
	}
	if err != nil {
		return nil, wrap("update worker", err)
	}
	running, err := s.runningBy(ctx, []string{wid})
	if err != nil {
		return nil, err
	}
	out := w.worker(running[wid], now)
	return &out, nil
}

// WorkerStop implements store.Store.
func (s *Store) WorkerStop(ctx context.Context, wid string, now time.Time) (*rota.Worker, error) {
	return s.setWorker(ctx, wid, bson.D{{Key: "stop", Value: true}}, now)
}

// WorkerDeregister implements store.Store.
func (s *Store) WorkerDeregister(ctx context.Context, wid string, now time.Time) (*rota.Worker, error) {
	var w workerDoc
	if err := s.workers.FindOne(ctx, id(wid)).Decode(&w); errors.Is(err, mongo.ErrNoDocuments) {
		return nil, store.NotFoundError("worker", wid)
	} else if err != nil {
		return nil, wrap("read worker", err)
	}
	return s.setWorker(ctx, wid, bson.D{{Key: "dereg", Value: true}, {Key: "last", Value: max(w.Last, store.Millis(now))},
		{Key: "wait", Value: int64(0)}}, now)
}

// WorkerRunsActive implements store.Store.
func (s *Store) WorkerRunsActive(ctx context.Context, workerIDs []string) (map[string][]rota.WorkerRun, error) {
	out := map[string][]rota.WorkerRun{}
	if len(workerIDs) == 0 {
		return out, nil
	}
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "rw", Value: bson.D{{Key: "$in", Value: workerIDs}}}}, "worker runs",
		options.Find().SetProjection(bson.D{{Key: "kind", Value: 1}, {Key: "runs", Value: 1}}))
	if err != nil {
		return nil, err
	}
	for _, t := range docs {
		for _, r := range t.Runs {
			if r.Status == string(rota.StatusRunning) && slices.Contains(workerIDs, r.Worker) {
				out[r.Worker] = append(out[r.Worker], rota.WorkerRun{RunID: r.ID, TaskID: t.ID, Kind: t.Kind, StartedAt: store.FromMillis(r.Start)})
			}
		}
	}
	for _, runs := range out {
		slices.SortFunc(runs, func(a, b rota.WorkerRun) int {
			if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
				return c
			}
			return strings.Compare(a.RunID, b.RunID)
		})
	}
	return out, nil
}

// TaskPinnedWaiting implements store.Store.
func (s *Store) TaskPinnedWaiting(ctx context.Context, now time.Time) ([]store.PinnedWaiting, error) {
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "pinned", Value: true}, {Key: "avail", Value: true},
		{Key: "run_at", Value: bson.D{{Key: "$lte", Value: store.Millis(now)}}}}, "pinned tasks",
		options.Find().SetProjection(bson.D{{Key: "kind", Value: 1}, {Key: "worker_ids", Value: 1}, {Key: "run_at", Value: 1}}))
	if err != nil {
		return nil, err
	}
	in := make([]store.PinnedWaiting, len(docs))
	for i, t := range docs {
		in[i] = store.PinnedWaiting{Kind: t.Kind, WorkerIDs: t.WorkerIDs, Oldest: store.FromMillis(t.RunAt)}
	}
	out := store.MergePinned(in)
	if len(out) > store.MaxPinnedGroups {
		out = out[:store.MaxPinnedGroups]
	}
	return out, nil
}

// WorkerPrune implements store.Store.
func (s *Store) WorkerPrune(ctx context.Context, p store.WorkerPruneParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	before := store.Millis(p.SeenBefore)
	docs, err := findAll[workerDoc](ctx, s.workers, bson.D{{Key: "last", Value: bson.D{{Key: "$lt", Value: before}}}}, "stale workers",
		options.Find().SetSort(bson.D{{Key: "last", Value: 1}}))
	if err != nil {
		return 0, err
	}
	running, err := s.runningBy(ctx, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, w := range docs {
		if n >= limit {
			break
		}
		if w.Last+w.WaitMS >= before || running[w.ID] > 0 {
			continue
		}
		res, err := s.workers.DeleteOne(ctx, bson.D{{Key: "_id", Value: w.ID}, {Key: "last", Value: w.Last}})
		if err != nil {
			return n, wrap("prune worker", err)
		}
		n += int(res.DeletedCount)
	}
	return n, nil
}
