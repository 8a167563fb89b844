package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// kindDoc is a kind with its claim state: the weighted round's position,
// the rate bucket and the claim lock.
type kindDoc struct {
	Name       string  `bson:"_id"`
	PF         int     `bson:"pf"`
	Paused     bool    `bson:"paused"`
	MaxRunning int     `bson:"max_running"`
	Rate       float64 `bson:"rate"`
	Retention  int     `bson:"retention"`
	Dispatch   string  `bson:"dispatch,omitempty"` // "" = rota.DispatchPull
}

// kindState is a kind's claim state, written only under its claim lock
// (a document apart from the settings, which KindUpsert writes).
type kindState struct {
	Name     string  `bson:"_id"`
	Pos      int     `bson:"pos"`
	Tokens   float64 `bson:"tokens"`
	TokensAt int64   `bson:"tokens_at"`
}

func (k *kindDoc) kind() rota.Kind {
	out := rota.Kind{Name: k.Name, PriorityFactor: k.PF, Paused: k.Paused, MaxRunning: k.MaxRunning, Rate: k.Rate,
		RetentionSeconds: k.Retention, Dispatch: k.Dispatch}
	if out.Dispatch == "" {
		out.Dispatch = rota.DispatchPull
	}
	return out
}

// ensureKind creates the kind with default settings if unknown (once per
// kind and process: kinds are never deleted).
func (s *Store) ensureKind(ctx context.Context, name string) error {
	s.mu.Lock()
	known := s.known[name]
	s.mu.Unlock()
	if known {
		return nil
	}
	_, err := s.kinds.UpdateOne(ctx, id(name), bson.D{{Key: "$setOnInsert", Value: bson.D{
		{Key: "pf", Value: rota.DefaultPriorityFactor}, {Key: "paused", Value: false}, {Key: "max_running", Value: 0},
		{Key: "rate", Value: 0.0}, {Key: "retention", Value: 0},
	}}}, options.UpdateOne().SetUpsert(true))
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return wrap("create kind "+name, err)
	}
	s.mu.Lock()
	s.known[name] = true
	s.mu.Unlock()
	return nil
}

func (s *Store) getKind(ctx context.Context, name string) (*kindDoc, error) {
	var k kindDoc
	err := s.kinds.FindOne(ctx, id(name)).Decode(&k)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, store.NotFoundError("kind", name)
	}
	if err != nil {
		return nil, wrap("read kind", err)
	}
	return &k, nil
}

// KindList implements store.Store.
func (s *Store) KindList(ctx context.Context) ([]rota.Kind, error) {
	docs, err := findAll[kindDoc](ctx, s.kinds, bson.D{}, "kinds", options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	out := make([]rota.Kind, len(docs))
	for i := range docs {
		out[i] = docs[i].kind()
	}
	return out, nil
}

// KindGet implements store.Store.
func (s *Store) KindGet(ctx context.Context, name string) (*rota.Kind, error) {
	k, err := s.getKind(ctx, name)
	if err != nil {
		return nil, err
	}
	out := k.kind()
	return &out, nil
}

// KindUpsert implements store.Store: one update of the kind's document
// ($set of the fields given; a resumed kind wakes its claimers).
func (s *Store) KindUpsert(ctx context.Context, p store.KindUpsertParams) (*rota.Kind, error) {
	if err := s.ensureKind(ctx, p.Name); err != nil {
		return nil, err
	}
	set := bson.D{}
	if p.PriorityFactor != nil {
		set = append(set, bson.E{Key: "pf", Value: *p.PriorityFactor})
	}
	if p.Paused != nil {
		set = append(set, bson.E{Key: "paused", Value: *p.Paused})
	}
	if p.MaxRunning != nil {
		set = append(set, bson.E{Key: "max_running", Value: *p.MaxRunning})
	}
	if p.Rate != nil {
		set = append(set, bson.E{Key: "rate", Value: *p.Rate})
	}
	if p.RetentionSeconds != nil {
		set = append(set, bson.E{Key: "retention", Value: *p.RetentionSeconds})
	}
	if p.Dispatch != nil {
		set = append(set, bson.E{Key: "dispatch", Value: *p.Dispatch})
	}
	if len(set) > 0 {
		if _, err := s.kinds.UpdateOne(ctx, id(p.Name), bson.D{{Key: "$set", Value: set}}); err != nil {
			return nil, wrap("update kind", err)
		}
	}
	if p.Paused != nil && !*p.Paused || p.MaxRunning != nil || p.Rate != nil {
		s.bump(ctx, p.Name)
	}
	return s.KindGet(ctx, p.Name)
}

// Claim lock timings: a claim holds its kind's lock for at most
// claimLockTTL (a claimer that died frees it then); a claimer that finds
// it held retries every claimLockRetry.
const (
	claimLockTTL   = 5 * time.Second
	claimLockRetry = 2 * time.Millisecond
)

// lockKind takes the claim lock of a kind (a document of the cas
// collection: _id uniqueness makes it exclusive on every server) and
// returns the kind and its claim state; a nil kind when it does not exist
// (the lock is then already free).
func (s *Store) lockKind(ctx context.Context, name string) (*kindDoc, *kindState, error) {
	lock := "lock/kind/" + name
	if err := s.lock(ctx, lock, claimLockTTL); err != nil {
		return nil, nil, err
	}
	k, err := s.getKind(ctx, name)
	if err != nil {
		s.dropTicket(ctx, lock)
		if errors.Is(err, rota.ErrNotFound) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	st := kindState{Name: name}
	if err := s.state.FindOne(ctx, id(name)).Decode(&st); err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		s.dropTicket(ctx, lock)
		return nil, nil, wrap("read kind state", err)
	}
	return k, &st, nil
}

// unlockKind stores the claim state st (when changed) and frees the lock.
func (s *Store) unlockKind(ctx context.Context, st *kindState, changed bool) error {
	defer s.dropTicket(ctx, "lock/kind/"+st.Name)
	if !changed {
		return nil
	}
	_, err := s.state.ReplaceOne(context.WithoutCancel(ctx), id(st.Name), st, options.Replace().SetUpsert(true))
	return wrap("store claim state of "+st.Name, err)
}
