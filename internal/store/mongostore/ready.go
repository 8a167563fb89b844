package mongostore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
)

// The ready collection holds one small document per claimable task (Avail:
// ready now or at its run_at): what a claim needs to choose candidates
// without reading the tasks themselves. A claim reads the entries of its
// kind, picks among them and reads only the picked tasks, by _id. On
// MongoDB an index serves that read either way; on FerretDB v1, which
// filters every query but one by _id in Go over the whole collection,
// it decodes the few small entries of the tasks that wait instead of
// every task ever run (each with its runs): the claim of a 2,000-task
// queue read 2,000 task documents.
//
// An entry is written BEFORE the task write that makes it current (its
// _id goes into the task's ready field) and the previous one is deleted
// AFTER it, so a claimable task always has its entry; what a crash or a
// lost compare-and-set leaves is an entry too many, which the claim that
// picks it deletes (see stale). The task document stays the truth: a
// claim checks the task it read by _id before starting it.

// readyDoc is the entry of a claimable task, as of task version V.
type readyDoc struct {
	ID      string   `bson:"_id"` // <task>/<v>/<random>: never reused
	Task    string   `bson:"t"`
	V       int64    `bson:"v"`
	Kind    string   `bson:"k"`
	Level   int      `bson:"l"`
	Pinned  bool     `bson:"p"`
	Workers []string `bson:"w"`    // worker_ids of a pinned task
	RunAt   int64    `bson:"at"`   // unix ms
	Holds   []string `bson:"h"`    // workers that run it or have succeeded it
	Made    int64    `bson:"made"` // wall clock, unix ms (see stale)
}

// readyOf is t's entry as of its version t.V.
func readyOf(t *taskDoc) readyDoc {
	e := readyDoc{Task: t.ID, V: t.V, Kind: t.Kind, Level: t.Level, Pinned: t.Pinned, Workers: t.WorkerIDs,
		RunAt: t.RunAt, Holds: []string{}}
	for _, r := range t.Runs {
		if (r.Status == string(rota.StatusRunning) || r.Status == string(rota.StatusSuccess)) && !slices.Contains(e.Holds, r.Worker) {
			e.Holds = append(e.Holds, r.Worker)
		}
	}
	return e
}

// content is what a claim reads of e: an entry whose content did not
// change is kept.
func (e readyDoc) content() string {
	return fmt.Sprintf("%d|%t|%q|%d|%q", e.Level, e.Pinned, e.Workers, e.RunAt, e.Holds)
}

// stageReady writes the entry t (as about to be written) needs: a new one
// when t is claimable and its entry's content changed, none otherwise. It
// returns the entry t had (to drop once t is written) and how to undo
// the change of t when t is not written.
func (s *Store) stageReady(ctx context.Context, t *taskDoc) (old string, undo func(), err error) {
	old, oldRK := t.Ready, t.RK
	undo = func() { t.Ready, t.RK = old, oldRK }
	if !t.Avail {
		t.Ready, t.RK = "", ""
		return old, undo, nil
	}
	e := readyOf(t)
	if rk := e.content(); t.Ready == "" || rk != t.RK {
		e.ID, e.Made = fmt.Sprintf("%s/%d/%08x", t.ID, t.V, rand.Uint32()), time.Now().UnixMilli()
		if _, err := s.ready.InsertOne(ctx, e); err != nil {
			return old, undo, wrap("insert ready entry of "+t.ID, err)
		}
		t.Ready, t.RK = e.ID, rk
	}
	return old, undo, nil
}

// dropReady deletes entry old once the task no longer names it (best
// effort: a claim that picks it deletes it otherwise).
func (s *Store) dropReady(ctx context.Context, old string, t *taskDoc) {
	if old == "" || old == t.Ready {
		return
	}
	if _, err := s.ready.DeleteOne(context.WithoutCancel(ctx), id(old)); err != nil {
		s.log.Warn("mongostore: drop ready entry", "entry", old, "err", err)
	}
}

// stale reports whether entry e can be deleted, t being its task as read
// (nil: none): the task has reached e's version without naming e (e was
// a lost or superseded write's; versions only grow, so it never becomes
// current), or is gone and e is older than staleTicket (a task's insert
// follows its entry's: a younger entry may be an insert in flight). An
// entry ahead of its task is a write in flight.
func stale(e *readyDoc, t *taskDoc, now time.Time) bool {
	if t == nil {
		return now.UnixMilli()-e.Made > staleTicket.Milliseconds()
	}
	return t.V >= e.V && t.Ready != e.ID
}

// pickedTask reads the task of picked entry e, deleting e when stale;
// nil when e is stale, its task not written yet or not claimable now
// (claimable says).
func (s *Store) pickedTask(ctx context.Context, e *readyDoc, claimable func(*taskDoc) bool) (*taskDoc, error) {
	t, found, err := s.getTask(ctx, id(e.Task))
	if err != nil {
		return nil, err
	}
	if !found {
		t = nil
	}
	if stale(e, t, time.Now()) {
		if _, err := s.ready.DeleteOne(ctx, id(e.ID)); err != nil {
			return nil, wrap("delete stale ready entry", err)
		}
		return nil, nil
	}
	if t == nil || !claimable(t) {
		return nil, nil
	}
	return t, nil
}

// readyFilter is the filter of the entries of kind claimable by p's
// worker at now (pinnedOnly: only those pinned to it).
func readyFilter(kind, worker string, pinnedOnly bool, now int64) bson.D {
	f := bson.D{{Key: "k", Value: kind}, {Key: "at", Value: bson.D{{Key: "$lte", Value: now}}},
		{Key: "h", Value: bson.D{{Key: "$ne", Value: worker}}}}
	if pinnedOnly {
		return append(f, bson.E{Key: "w", Value: worker})
	}
	return append(f, bson.E{Key: "$or", Value: bson.A{bson.D{{Key: "p", Value: false}}, bson.D{{Key: "w", Value: worker}}}})
}

// backfillReady gives the claimable tasks that have no ready entry (a
// database written before the ready collection) theirs: one write of
// each (a find of them at every start, an index-less scan on FerretDB).
func (s *Store) backfillReady(ctx context.Context) error {
	docs, err := findAll[struct {
		ID string `bson:"_id"`
	}](ctx, s.tasks, bson.D{{Key: "avail", Value: true}, {Key: "ready", Value: bson.D{{Key: "$exists", Value: false}}}},
		"tasks without ready entry", options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return err
	}
	for _, d := range docs {
		if _, _, err := s.mutateTask(ctx, id(d.ID), func(t *taskDoc) error {
			if !t.Avail || t.Ready != "" {
				return errNoWrite
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
