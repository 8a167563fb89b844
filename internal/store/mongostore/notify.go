package mongostore

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// eventsNote is the notify document of the event log (kind names cannot
// start with a NUL).
const eventsNote = "\x00events"

// SupportsNotify is true: nodes sharing the database hear of each other's
// changes through the notify collection.
func (s *Store) SupportsNotify() bool { return true }

// bump tells the other nodes that tasks of kind may be claimable: one
// $inc of the kind's counter document. A failed bump is logged, not
// returned: the change it announces is stored, and receivers also poll.
func (s *Store) bump(ctx context.Context, kind string) {
	_, err := s.notify.UpdateOne(context.WithoutCancel(ctx), id(kind), bson.D{{Key: "$inc", Value: bson.D{{Key: "seq", Value: int64(1)}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		s.log.Warn("mongostore: wake-up not sent", "kind", kind, "err", err)
	}
}

type noteDoc struct {
	ID  string `bson:"_id"`
	Seq int64  `bson:"seq"`
}

func note(kind string) store.Notification {
	if kind == eventsNote {
		return store.Notification{Events: true}
	}
	return store.Notification{Kind: kind}
}

// Subscribe implements store.Store: a change stream on the notify
// collection where the server offers one, else a poll of it every
// PollInterval (one find of a document per kind). A counter that moved
// since the last look calls fn once for its kind (coalesced), with a zero
// RunAt: receivers look for what is claimable. After an error it
// resumes with every kind notified once, as notifications may have been
// missed.
func (s *Store) Subscribe(ctx context.Context, fn func(store.Notification)) error {
	ctx, cancel := context.WithCancel(storecost.Async(ctx)) // the wake-up poll is the store's own work
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	if s.streams {
		if err := s.watch(ctx, fn); err != nil && ctx.Err() == nil {
			s.log.Warn("mongostore: change stream failed; polling instead", "err", err)
		}
	}
	return s.pollNotes(ctx, fn)
}

// watch calls fn for every change of the notify collection until ctx
// ends or the stream fails.
func (s *Store) watch(ctx context.Context, fn func(store.Notification)) error {
	cs, err := s.notify.Watch(ctx, mongo.Pipeline{}, options.ChangeStream())
	if err != nil {
		return wrap("watch", err)
	}
	defer cs.Close(context.WithoutCancel(ctx))
	for cs.Next(ctx) {
		var ev struct {
			Key struct {
				ID string `bson:"_id"`
			} `bson:"documentKey"`
		}
		if err := cs.Decode(&ev); err == nil && ev.Key.ID != "" {
			fn(note(ev.Key.ID))
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return wrap("watch", cs.Err())
}

// pollNotes polls the counters until ctx ends.
func (s *Store) pollNotes(ctx context.Context, fn func(store.Notification)) error {
	seen := map[string]int64{}
	first, failed := true, false
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		docs, err := findAll[noteDoc](ctx, s.notify, bson.D{}, "wake-ups")
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Debug("mongostore: wake-up poll failed", "err", err)
			failed = true
		default:
			for _, d := range docs {
				if old, ok := seen[d.ID]; (!first && (!ok || old != d.Seq)) || failed {
					fn(note(d.ID))
				}
				seen[d.ID] = d.Seq
			}
			first, failed = false, false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
