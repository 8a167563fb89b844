package mongostore

import (
	"context"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Dependencies without transactions. A child names its parents (deps);
// a parent only carries hasdeps. The order of writes makes every
// interleaving end right:
//
//  1. the child's insert first marks its parents hasdeps (bumping their
//     version, so a parent's concurrent end re-reads and sees the mark),
//  2. then reads their statuses and inserts itself (WAITING or not),
//  3. then re-checks its parents (recheckDeps): a parent that ended
//     between 2 and the insert, before its end could find the child, is
//     seen here.
//
// A parent that ends with hasdeps re-checks its WAITING children
// (settleDependents) and then marks itself deps_done; the reaper finishes
// the parents a crash left between the two (finishDependents). A re-check
// computes the child's state from its parents' statuses, so doing it twice
// is harmless.

// startWithDeps sets the starting state of t, the new task of item i, from
// its dependencies.
func (s *Store) startWithDeps(ctx context.Context, t *taskDoc, p store.TaskInsertParams, i int, prior []store.TaskInsertResult) error {
	ids, err := store.DepIDs(p, i, prior)
	if err != nil {
		return err
	}
	for _, d := range ids {
		if _, _, err := s.mutateTask(ctx, id(d), func(t *taskDoc) error {
			if t.HasDeps {
				return errNoWrite
			}
			t.HasDeps = true
			return nil
		}); err != nil {
			return err
		}
	}
	status, err := s.statuses(ctx, ids)
	if err != nil {
		return err
	}
	st, err := store.StartWithDeps(i, ids, status)
	if err != nil {
		return err
	}
	t.Deps = ids
	switch {
	case st.Failed != "":
		t.Status, t.Done, t.Avail, t.End, t.Message = string(rota.StatusCanceled), true, false, store.Millis(p.Now), st.Failed
	case st.Waiting > 0:
		t.Status, t.Avail, t.DepsWait = string(rota.StatusWaiting), false, st.Waiting
	}
	return nil
}

// statuses reads the status of each task of ids (missing ones absent).
func (s *Store) statuses(ctx context.Context, ids []string) (map[string]rota.Status, error) {
	docs, err := findAll[struct {
		ID     string `bson:"_id"`
		Status string `bson:"status"`
	}](ctx, s.tasks, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, "dependencies",
		options.Find().SetProjection(bson.D{{Key: "status", Value: 1}}))
	if err != nil {
		return nil, err
	}
	out := make(map[string]rota.Status, len(docs))
	for _, d := range docs {
		out[d.ID] = rota.Status(d.Status)
	}
	return out, nil
}

// recheckDeps recomputes a WAITING task from its parents' statuses: still
// WAITING, SCHEDULED once all succeeded, CANCELED when one ended without
// success (and then its own dependents too).
func (s *Store) recheckDeps(ctx context.Context, tid string, now time.Time) error {
	var ready bool
	t, found, err := s.mutateTask(ctx, id(tid), func(t *taskDoc) error {
		ready = false
		if t.Status != string(rota.StatusWaiting) {
			return errNoWrite
		}
		status, err := s.statuses(ctx, t.Deps)
		if err != nil {
			return err
		}
		waiting, failed := 0, ""
		for _, d := range t.Deps {
			st, ok := status[d]
			switch {
			case !ok || st == rota.StatusSuccess: // a parent cleaned up had succeeded or the child would be canceled
			case st.Terminal():
				if failed == "" {
					failed = store.DepFailedMessage(d, st)
				}
			default:
				waiting++
			}
		}
		switch {
		case failed != "":
			t.Status, t.Done, t.End, t.Message, t.DepsWait = string(rota.StatusCanceled), true, store.Millis(now), failed, 0
		case waiting == 0:
			t.Status, t.Avail, t.DepsWait, ready = string(rota.StatusScheduled), true, 0, true
		case waiting == t.DepsWait:
			return errNoWrite
		default:
			t.DepsWait = waiting
		}
		return nil
	})
	if err != nil || !found {
		return err
	}
	if ready {
		s.bump(ctx, t.Kind)
	}
	if t.Done {
		return s.settleDependents(ctx, t, now)
	}
	return nil
}

// settleDependents brings the end of t to its WAITING dependents, then
// marks t deps_done.
func (s *Store) settleDependents(ctx context.Context, t *taskDoc, now time.Time) error {
	if !t.HasDeps || t.DepsDone || !t.Done {
		return nil
	}
	kids, err := findAll[struct {
		ID string `bson:"_id"`
	}](ctx, s.tasks, bson.D{{Key: "deps", Value: t.ID}, {Key: "status", Value: string(rota.StatusWaiting)}}, "dependents",
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := s.recheckDeps(ctx, k.ID, now); err != nil {
			return err
		}
	}
	_, _, err = s.mutateTask(ctx, id(t.ID), func(t *taskDoc) error {
		if t.DepsDone {
			return errNoWrite
		}
		t.DepsDone = true
		return nil
	})
	return err
}

// finishDependents settles the dependents of up to limit ended tasks
// whose end did not reach them (a node stopped in between).
func (s *Store) finishDependents(ctx context.Context, now time.Time, limit int) error {
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "hasdeps", Value: true}, {Key: "done", Value: true},
		{Key: "deps_done", Value: bson.D{{Key: "$ne", Value: true}}}}, "unsettled dependents", options.Find().SetLimit(int64(limit)))
	if err != nil {
		return err
	}
	for i := range docs {
		if err := s.settleDependents(ctx, &docs[i], now); err != nil {
			return err
		}
	}
	return nil
}

// sortedCopy returns ids sorted, without duplicates.
func sortedCopy(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
