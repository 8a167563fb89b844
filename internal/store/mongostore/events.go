package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// The event log without transactions: one document per event, whose _id
// is the event's ID. An append reads the newest ID and inserts its events
// after it, in order (an ordered insertMany); _id uniqueness makes
// concurrent appends take turns (the loser reads the tail again and goes
// on with the events not yet stored), and an ID is only ever inserted
// once the one before it is readable, so IDs have no gaps and are readable
// in commit order. Under contention the events of one call may be
// interleaved with another call's (a transaction would keep them
// together). Cleanup first records the newest ID in the meta document
// "events" (floor), so that Last survives an empty log.
type eventDoc struct {
	ID   int64  `bson:"_id"`
	At   int64  `bson:"at"`
	Data string `bson:"data"`
}

type eventMeta struct {
	Base  int64 `bson:"base"`
	Floor int64 `bson:"floor"`
}

// eventMeta returns the first event ID of this database (its creation
// time in unix microseconds) and the floor cleanup recorded.
func (s *Store) eventMeta(ctx context.Context) (eventMeta, error) {
	var m eventMeta
	err := s.meta.FindOneAndUpdate(ctx, id("events"),
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "base", Value: time.Now().UnixMicro()}, {Key: "floor", Value: int64(0)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&m)
	if mongo.IsDuplicateKeyError(err) {
		err = s.meta.FindOne(ctx, id("events")).Decode(&m)
	}
	if err != nil {
		return m, wrap("event log", err)
	}
	return m, nil
}

// lastEvent is the ID of the last event appended (base − 1 when none).
func (s *Store) lastEvent(ctx context.Context) (int64, error) {
	var e eventDoc
	err := s.events.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}}).
		SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&e)
	if errors.Is(err, mongo.ErrNoDocuments) {
		m, err := s.eventMeta(ctx)
		return max(m.Base-1, m.Floor), err
	}
	if err != nil {
		return 0, wrap("last event", err)
	}
	return e.ID, nil
}

// EventAppend implements store.Store.
func (s *Store) EventAppend(ctx context.Context, evs []rota.Event) (uint64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	docs := make([]eventDoc, len(evs))
	for i, ev := range evs {
		data, err := store.EncodeEvent(ev)
		if err != nil {
			return 0, err
		}
		docs[i] = eventDoc{At: store.Millis(ev.Time), Data: string(data)}
	}
	for range maxCASAttempts {
		last, err := s.lastEvent(ctx)
		if err != nil {
			return 0, err
		}
		batch := make([]any, len(docs))
		for i := range docs {
			docs[i].ID = last + 1 + int64(i)
			batch[i] = docs[i]
		}
		res, err := s.events.InsertMany(ctx, batch, options.InsertMany().SetOrdered(true))
		if err == nil {
			s.bump(ctx, eventsNote)
			return uint64(docs[len(docs)-1].ID), nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return 0, wrap("append events", err)
		}
		if res != nil {
			docs = docs[len(res.InsertedIDs):]
		}
	}
	return 0, fmt.Errorf("mongostore: append events: too many concurrent appends")
}

// EventList implements store.Store.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]rota.Event, error) {
	docs, err := findAll[eventDoc](ctx, s.events, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: int64(p.After)}}}},
		"events", options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(max(p.Limit, 1))))
	if err != nil {
		return nil, err
	}
	out := make([]rota.Event, 0, len(docs))
	for _, e := range docs {
		ev, err := store.DecodeEvent(uint64(e.ID), e.At, []byte(e.Data))
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// EventBounds implements store.Store.
func (s *Store) EventBounds(ctx context.Context) (store.EventBounds, error) {
	last, err := s.lastEvent(ctx)
	if err != nil {
		return store.EventBounds{}, err
	}
	var e eventDoc
	err = s.events.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&e)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.EventBounds{Last: uint64(last)}, nil
	}
	if err != nil {
		return store.EventBounds{}, wrap("oldest event", err)
	}
	return store.EventBounds{Oldest: uint64(e.ID), Last: uint64(last)}, nil
}

// EventCleanup implements store.Store: the oldest events, below the first
// one at or after before.
func (s *Store) EventCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	last, err := s.lastEvent(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := s.meta.UpdateOne(ctx, id("events"), bson.D{{Key: "$max", Value: bson.D{{Key: "floor", Value: last}}}}); err != nil {
		return 0, wrap("clean events", err)
	}
	f := bson.D{}
	var bound eventDoc
	err = s.events.FindOne(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$gte", Value: store.Millis(before)}}}},
		options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}}).SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&bound)
	switch {
	case err == nil:
		f = bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: bound.ID}}}}
	case !errors.Is(err, mongo.ErrNoDocuments):
		return 0, wrap("clean events", err)
	}
	return s.deleteOldest(ctx, s.events, f, "_id", limit)
}
