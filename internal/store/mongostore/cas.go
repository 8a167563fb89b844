package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// errNoWrite tells mutateTask that fn decided to change nothing.
var errNoWrite = errors.New("mongostore: no write")

// maxCASAttempts bounds the retries of a compare-and-set that keeps
// losing to other writers.
const maxCASAttempts = 1000

// getTask reads the task matching filter; found false when there is none.
func (s *Store) getTask(ctx context.Context, filter bson.D) (*taskDoc, bool, error) {
	var t taskDoc
	err := s.tasks.FindOne(ctx, filter).Decode(&t)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrap("read task", err)
	}
	return &t, true, nil
}

// mutateTask is the one way a task document changes: it reads the task
// matching filter, lets fn change it (fn returns errNoWrite to change
// nothing, or its own error), and replaces the document where its _id and
// version still match; when another writer won it reads again and
// retries. It returns the document as written (or as read, on
// errNoWrite), found false when filter matches nothing.
func (s *Store) mutateTask(ctx context.Context, filter bson.D, fn func(t *taskDoc) error) (*taskDoc, bool, error) {
	for range maxCASAttempts {
		t, found, err := s.getTask(ctx, filter)
		if err != nil || !found {
			return nil, found, err
		}
		err = fn(t)
		if errors.Is(err, errNoWrite) {
			return t, true, nil
		}
		if err != nil {
			return t, true, err
		}
		ok, err := s.replaceTask(ctx, t)
		if err != nil {
			return nil, true, err
		}
		if ok {
			return t, true, nil
		}
	}
	return nil, true, fmt.Errorf("mongostore: task %v: too many concurrent writers", filter)
}

// replaceTask writes t over the stored version t.V (then t.V+1): false
// when another writer changed the document first. Its ready entry
// follows (see stageReady).
func (s *Store) replaceTask(ctx context.Context, t *taskDoc) (bool, error) {
	old := t.V
	t.V++
	t.derive()
	entry, undo, err := s.stageReady(ctx, t)
	if err != nil {
		t.V = old
		undo()
		return false, err
	}
	ok, err := s.replaceVersioned(ctx, s.tasks, t.ID, old, t)
	if !ok || err != nil {
		t.V = old
		undo()
		return ok, err
	}
	s.dropReady(ctx, entry, t)
	return true, nil
}

// replaceVersioned replaces document docID of c, stored at version old,
// with doc (at version old+1): false when another writer changed it
// first.
//
// On MongoDB that is one replaceOne whose filter names the version: the
// server applies it atomically. FerretDB v1 does not (its updates read,
// then write by _id: several writers whose filter matched the same
// version all "win"), but its inserts do keep _id unique; there each
// write first takes a ticket, the document "<collection>/<id>/<version>"
// of the collection cas, so that one writer only can write a given
// version; the winner deletes its ticket once the document moved on (a
// writer that read the old version can no longer match it). A ticket left
// by a crashed writer is taken over after staleTicket.
func (s *Store) replaceVersioned(ctx context.Context, c *mongo.Collection, docID string, old int64, doc any) (bool, error) {
	filter := bson.D{{Key: "_id", Value: docID}, {Key: "v", Value: old}}
	if s.tickets {
		ticket := fmt.Sprintf("%s/%s/%d", c.Name(), docID, old+1)
		ok, err := s.takeTicket(ctx, ticket)
		if !ok || err != nil {
			return false, err
		}
		defer s.dropTicket(ctx, ticket)
		// Holding the ticket of version old+1, nobody else can move the
		// document past old: check it is still there, then write by _id
		// alone (FerretDB reads only an {_id} filter by key; any other
		// filter scans the collection).
		var cur struct {
			V int64 `bson:"v"`
		}
		if err := c.FindOne(ctx, id(docID)).Decode(&cur); err != nil || cur.V != old {
			if errors.Is(err, mongo.ErrNoDocuments) {
				err = nil
			}
			return false, wrap("read "+c.Name()+" "+docID, err)
		}
		filter = id(docID)
	}
	res, err := c.ReplaceOne(ctx, filter, doc)
	if err != nil {
		return false, wrap("write "+c.Name()+" "+docID, err)
	}
	return res.MatchedCount == 1, nil
}

// staleTicket is when a ticket (or lock) of a writer that never finished
// is taken over.
const staleTicket = 10 * time.Second

type ticketDoc struct {
	ID    string `bson:"_id"`
	Until int64  `bson:"until"` // wall clock, unix ms
}

// takeTicket inserts ticket; false when another writer holds it (a stale
// one is removed, for the next attempt).
func (s *Store) takeTicket(ctx context.Context, ticket string) (bool, error) {
	return s.takeLock(ctx, ticket, staleTicket, true)
}

// takeLock inserts the document ticket of the cas collection, valid for
// ttl (wall clock: it guards round trips, not a scheduling rule); false
// when another holds it. With checkStale, a lock past its time is
// deleted, so that the next attempt can take it.
func (s *Store) takeLock(ctx context.Context, ticket string, ttl time.Duration, checkStale bool) (bool, error) {
	now := time.Now().UnixMilli()
	_, err := s.cas.InsertOne(ctx, ticketDoc{ID: ticket, Until: now + ttl.Milliseconds()})
	if err == nil {
		return true, nil
	}
	if !mongo.IsDuplicateKeyError(err) {
		return false, wrap("take "+ticket, err)
	}
	var t ticketDoc
	if !checkStale {
		return false, nil
	}
	if err := s.cas.FindOne(ctx, id(ticket)).Decode(&t); err == nil && t.Until < now {
		_, _ = s.cas.DeleteOne(ctx, bson.D{{Key: "_id", Value: ticket}, {Key: "until", Value: t.Until}})
	}
	return false, nil
}

// lock takes the lock name, waiting for it with backoff (2 ms doubling
// to 32 ms, jittered); a holder that died is taken over after ttl.
func (s *Store) lock(ctx context.Context, name string, ttl time.Duration) error {
	start := time.Now()
	wait := claimLockRetry
	for {
		ok, err := s.takeLock(ctx, name, ttl, time.Since(start) > ttl)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mongostore: take %s: %w", name, ctx.Err())
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, 32*time.Millisecond)
	}
}

// dropTicket deletes a ticket or lock.
func (s *Store) dropTicket(ctx context.Context, ticket string) {
	if _, err := s.cas.DeleteOne(context.WithoutCancel(ctx), id(ticket)); err != nil {
		s.log.Warn("mongostore: drop ticket (taken over later)", "ticket", ticket, "err", err)
	}
}

// findAll decodes every document of a cursor.
func findAll[T any](ctx context.Context, c *mongo.Collection, filter any, what string, opts ...options.Lister[options.FindOptions]) ([]T, error) {
	cur, err := c.Find(ctx, filter, opts...)
	if err != nil {
		return nil, wrap("find "+what, err)
	}
	var out []T
	if err := cur.All(ctx, &out); err != nil {
		return nil, wrap("read "+what, err)
	}
	return out, nil
}
