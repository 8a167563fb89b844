package mongostore

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Stats implements store.Store: one aggregation counts tasks by kind and
// status, another finds each kind's oldest due task.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	kinds, err := s.KindList(ctx)
	if err != nil {
		return store.Stats{}, err
	}
	byKind := map[string]*store.KindStats{}
	var order []string
	get := func(k string) *store.KindStats {
		if ks, ok := byKind[k]; ok {
			return ks
		}
		ks := &store.KindStats{Kind: k, Counts: map[rota.Status]int{}}
		byKind[k], order = ks, append(order, k)
		return ks
	}
	for _, k := range kinds {
		get(k.Name).Paused = k.Paused
	}
	type group struct {
		ID struct {
			Kind   string `bson:"k"`
			Status string `bson:"s"`
		} `bson:"_id"`
		N int `bson:"n"`
	}
	counts, err := aggregate[group](ctx, s.tasks, bson.A{bson.D{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: bson.D{{Key: "k", Value: "$kind"}, {Key: "s", Value: "$status"}}}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}}, "stats")
	if err != nil {
		return store.Stats{}, err
	}
	for _, c := range counts {
		get(c.ID.Kind).Counts[rota.Status(c.ID.Status)] = c.N
	}
	for _, k := range order {
		docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "kind", Value: k}, {Key: "avail", Value: true},
			{Key: "status", Value: string(rota.StatusScheduled)}, {Key: "run_at", Value: bson.D{{Key: "$lte", Value: store.Millis(now)}}}},
			"oldest waiting", options.Find().SetSort(bson.D{{Key: "run_at", Value: 1}}).SetLimit(1).SetProjection(bson.D{{Key: "run_at", Value: 1}}))
		if err != nil {
			return store.Stats{}, err
		}
		if len(docs) > 0 {
			byKind[k].OldestWaitingAge = now.Sub(store.FromMillis(docs[0].RunAt))
		}
	}
	var out store.Stats
	for _, k := range order {
		out.Kinds = append(out.Kinds, *byKind[k])
	}
	return out, nil
}

// TaskCleanup implements store.Store: fenced, then per kind with a
// retention, the oldest finished tasks past it are deleted (and their
// keys freed).
func (s *Store) TaskCleanup(ctx context.Context, p store.TaskCleanupParams) (int, error) {
	if err := s.fence(ctx, p.Term, p.Now); err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	kinds, err := findAll[kindDoc](ctx, s.kinds, bson.D{{Key: "retention", Value: bson.D{{Key: "$gt", Value: 0}}}}, "kinds",
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, k := range kinds {
		if deleted >= limit {
			break
		}
		cutoff := store.Millis(p.Now) - int64(k.Retention)*1000
		docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "done", Value: true}, {Key: "kind", Value: k.Name},
			{Key: "end", Value: bson.D{{Key: "$lt", Value: cutoff}}}}, "old tasks",
			options.Find().SetSort(bson.D{{Key: "end", Value: 1}}).SetLimit(int64(limit-deleted)).
				SetProjection(bson.D{{Key: "kind", Value: 1}, {Key: "key", Value: 1}}))
		if err != nil {
			return deleted, err
		}
		for i := range docs {
			s.deleteTask(ctx, &docs[i])
		}
		deleted += len(docs)
	}
	return deleted, nil
}
