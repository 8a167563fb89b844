package mongostore

import (
	"context"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota/internal/store"
)

var _ store.PushStore = (*Store)(nil)

// pushWorker is the push view of a registered worker.
func (w *workerDoc) pushWorker(running int) store.PushWorker {
	kinds := slices.Clone(w.Kinds)
	slices.Sort(kinds)
	return store.PushWorker{WorkerID: w.ID, Address: w.PushAddr, Kinds: kinds, Capacity: w.PushCap, Running: running,
		Stopped: w.Stop || w.Dereg, RegisteredAt: store.FromMillis(w.Registered)}
}

// WorkerRegister implements store.PushStore: one upsert of the worker's
// document, which holds the registration.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*store.PushWorker, error) {
	now := store.Millis(p.Now)
	var w workerDoc
	err := s.workers.FindOneAndUpdate(ctx, id(p.WorkerID), bson.D{
		{Key: "$set", Value: bson.D{{Key: "addr", Value: p.Address}, {Key: "kinds", Value: p.Kinds}, {Key: "wait", Value: int64(0)},
			{Key: "dereg", Value: false}, {Key: "push", Value: true}, {Key: "push_addr", Value: p.Address},
			{Key: "push_cap", Value: p.Capacity}, {Key: "registered", Value: now}}},
		{Key: "$max", Value: bson.D{{Key: "last", Value: now}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "first", Value: now}, {Key: "stop", Value: false}}},
	}, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&w)
	if err != nil {
		return nil, wrap("register worker "+p.WorkerID, err)
	}
	running, err := s.runningBy(ctx, []string{p.WorkerID})
	if err != nil {
		return nil, err
	}
	out := w.pushWorker(running[p.WorkerID])
	return &out, nil
}

// PushWorkerList implements store.PushStore.
func (s *Store) PushWorkerList(ctx context.Context) ([]store.PushWorker, error) {
	docs, running, err := s.findWorkers(ctx, bson.D{{Key: "push", Value: true}}, "push workers")
	if err != nil {
		return nil, err
	}
	out := make([]store.PushWorker, len(docs))
	for i := range docs {
		out[i] = docs[i].pushWorker(running[docs[i].ID])
	}
	return out, nil
}

// PushWorkersSeen implements store.PushStore.
func (s *Store) PushWorkersSeen(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.workers.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, bson.D{
		{Key: "$max", Value: bson.D{{Key: "last", Value: store.Millis(now)}}}, {Key: "$set", Value: bson.D{{Key: "wait", Value: int64(0)}}}})
	return wrap("push workers seen", err)
}
