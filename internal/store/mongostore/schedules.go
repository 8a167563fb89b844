package mongostore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.ScheduleStore = (*Store)(nil)

// Schedules without transactions: every write of a schedule (insert,
// update, delete, fire, trigger) holds the schedule's lock (a document of
// the cas collection), so that its version check and its writes are not
// interleaved with another's; a fire's runs are inserted before the
// schedule's new state (a unique document of schedule_fires per schedule
// and fire time keeps one run per fire), so an interrupted fire leaves
// runs that the next one reports as duplicates, never a fire lost. Names
// are held like task keys (task_keys, "\x00schedule\x00" + name).

// schedDoc is a schedule as stored: the columns every backend stores
// (store.ScheduleColumns, in order, decoded by store.ScheduleRow) and the
// fields queries use.
type schedDoc struct {
	ID      string `bson:"_id"`
	V       int64  `bson:"v"` // the schedule's Version
	Name    string `bson:"name"`
	Kind    string `bson:"kind"`
	Deleted bool   `bson:"deleted"`
	Rev     int64  `bson:"rev"`
	Target  bool   `bson:"target"`
	Enabled bool   `bson:"enabled"`
	Ended   bool   `bson:"ended"`
	Err     string `bson:"err"`
	Cols    bson.A `bson:"cols"`
}

// newSchedDoc stores sc (its Version is the document's).
func newSchedDoc(sc *rota.Schedule, rev int64, deleted bool) (*schedDoc, error) {
	plan, target, err := store.ScheduleJSONValues(sc)
	if err != nil {
		return nil, fmt.Errorf("mongostore: %w", err)
	}
	ms := store.Millis
	st := &sc.ScheduleState
	cols := bson.A{sc.ID, sc.Name, sc.Kind, sc.Priority.Level(), string(sc.Payload), sc.CronExpr, sc.Timezone, plan,
		sc.Enabled, sc.MaxConcurrency, string(sc.ConcurrencyPolicy), string(sc.OverlapAction), string(sc.FailureAction),
		string(sc.MisfirePolicy), sc.CatchupLimit, sc.TimeoutSeconds, target, sc.Version, ms(sc.CreatedAt), ms(sc.UpdatedAt),
		ms(st.HighWater), ms(st.NextFire), st.LastRunID, st.PlanSeq, ms(st.PlanAt), st.PlanRunID, st.PlanRetry, st.RealRepet,
		st.Ended, ms(st.EndedAt), st.MisfireDropped, store.ScheduleOptionsValue(sc), store.ScheduleExtStateValue(st), st.ErrorMessage}
	return &schedDoc{ID: sc.ID, V: sc.Version, Name: sc.Name, Kind: sc.Kind, Deleted: deleted, Rev: rev, Target: sc.Target != nil,
		Enabled: sc.Enabled, Ended: st.Ended, Err: st.ErrorMessage, Cols: cols}, nil
}

// schedule decodes d through the shared store.ScheduleRow.
func (d *schedDoc) schedule() (*rota.Schedule, error) {
	var r store.ScheduleRow
	dest := r.Dest()
	if len(dest) != len(d.Cols) {
		return nil, fmt.Errorf("mongostore: schedule %s: %d columns stored, %d known", d.ID, len(d.Cols), len(dest))
	}
	for i, v := range d.Cols {
		if v == nil {
			continue
		}
		to := reflect.ValueOf(dest[i]).Elem()
		from := reflect.ValueOf(v)
		if b, ok := v.(bson.Binary); ok {
			from = reflect.ValueOf(b.Data)
		}
		if !from.CanConvert(to.Type()) {
			return nil, fmt.Errorf("mongostore: schedule %s: column %d: %T is no %s", d.ID, i, v, to.Type())
		}
		to.Set(from.Convert(to.Type()))
	}
	return r.Schedule()
}

// nameKey is the task_keys document holding a schedule name.
func nameKey(name string) string { return "\x00schedule\x00" + name }

// withSchedLock runs fn holding the lock of schedule id.
func (s *Store) withSchedLock(ctx context.Context, sid string, fn func() error) error {
	lock := "lock/schedule/" + sid
	if err := s.lock(ctx, lock, claimLockTTL); err != nil {
		return err
	}
	defer s.dropTicket(ctx, lock)
	return fn()
}

// holdName takes name for schedule sid (a task_keys document); false when
// an undeleted schedule holds it.
func (s *Store) holdName(ctx context.Context, name, sid string) (bool, error) {
	kid := nameKey(name)
	for range maxCASAttempts {
		_, err := s.keys.InsertOne(ctx, bson.D{{Key: "_id", Value: kid}, {Key: "task", Value: sid}})
		if err == nil {
			return true, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return false, wrap("hold schedule name", err)
		}
		var k struct {
			Task string `bson:"task"`
		}
		if err := s.keys.FindOne(ctx, id(kid)).Decode(&k); errors.Is(err, mongo.ErrNoDocuments) {
			continue
		} else if err != nil {
			return false, wrap("read schedule name", err)
		}
		if k.Task == sid {
			return true, nil
		}
		n, err := s.scheds.CountDocuments(ctx, bson.D{{Key: "_id", Value: k.Task}, {Key: "deleted", Value: false}})
		if err != nil || n > 0 {
			return false, wrap("read schedule name", err)
		}
		if _, err := s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: kid}, {Key: "task", Value: k.Task}}); err != nil {
			return false, wrap("free schedule name", err)
		}
	}
	return false, fmt.Errorf("mongostore: schedule name %q: too many concurrent writers", name)
}

func (s *Store) freeName(ctx context.Context, name, sid string) {
	_, _ = s.keys.DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: nameKey(name)}, {Key: "task", Value: sid}})
}

// nextRev takes a new value of the store-wide schedule revision (meta
// document "schedrev", a compare-and-set).
func (s *Store) nextRev(ctx context.Context) (int64, error) {
	type revDoc struct {
		ID string `bson:"_id"`
		V  int64  `bson:"v"`
	}
	for range maxCASAttempts {
		var r revDoc
		err := s.meta.FindOne(ctx, id("schedrev")).Decode(&r)
		if errors.Is(err, mongo.ErrNoDocuments) {
			if _, err := s.meta.InsertOne(ctx, revDoc{ID: "schedrev", V: 1}); err == nil {
				return 1, nil
			} else if !mongo.IsDuplicateKeyError(err) {
				return 0, wrap("schedule revision", err)
			}
			continue
		}
		if err != nil {
			return 0, wrap("schedule revision", err)
		}
		ok, err := s.replaceVersioned(ctx, s.meta, "schedrev", r.V, revDoc{ID: "schedrev", V: r.V + 1})
		if err != nil {
			return 0, err
		}
		if ok {
			return r.V + 1, nil
		}
	}
	return 0, fmt.Errorf("mongostore: schedule revision: too many concurrent writers")
}

// getSched reads an undeleted schedule.
func (s *Store) getSched(ctx context.Context, sid string) (*schedDoc, *rota.Schedule, error) {
	var d schedDoc
	err := s.scheds.FindOne(ctx, bson.D{{Key: "_id", Value: sid}, {Key: "deleted", Value: false}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil, store.NotFoundError("schedule", sid)
	}
	if err != nil {
		return nil, nil, wrap("read schedule", err)
	}
	sc, err := d.schedule()
	return &d, sc, err
}

// writeSched stores sc (Version already increased) over version old; rev
// 0 keeps the document's revision.
func (s *Store) writeSched(ctx context.Context, sc *rota.Schedule, old, rev int64, deleted bool) error {
	if rev == 0 {
		var cur schedDoc
		if err := s.scheds.FindOne(ctx, id(sc.ID)).Decode(&cur); err != nil {
			return wrap("read schedule", err)
		}
		rev = cur.Rev
	}
	d, err := newSchedDoc(sc, rev, deleted)
	if err != nil {
		return err
	}
	ok, err := s.replaceVersioned(ctx, s.scheds, sc.ID, old, d)
	if err != nil {
		return err
	}
	if !ok {
		return store.ConflictError("schedule %s changed meanwhile: read it again", sc.ID)
	}
	return nil
}

// ScheduleInsert implements store.Store.
func (s *Store) ScheduleInsert(ctx context.Context, p store.ScheduleInsertParams) (*rota.Schedule, error) {
	sc := p.Schedule
	sc.Version = 1
	sc.CreatedAt, sc.UpdatedAt = store.FromMillis(store.Millis(p.Now)), store.FromMillis(store.Millis(p.Now))
	ok, err := s.holdName(ctx, sc.Name, sc.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ConflictError("a schedule named %q already exists", sc.Name)
	}
	rev, err := s.nextRev(ctx)
	if err != nil {
		return nil, err
	}
	d, err := newSchedDoc(&sc, rev, false)
	if err != nil {
		return nil, err
	}
	if _, err := s.scheds.InsertOne(ctx, d); err != nil {
		s.freeName(ctx, sc.Name, sc.ID)
		if mongo.IsDuplicateKeyError(err) {
			return nil, store.ConflictError("schedule %s exists", sc.ID)
		}
		return nil, wrap("insert schedule", err)
	}
	return s.ScheduleGet(ctx, sc.ID)
}

// ScheduleGet implements store.Store.
func (s *Store) ScheduleGet(ctx context.Context, sid string) (*rota.Schedule, error) {
	_, sc, err := s.getSched(ctx, sid)
	return sc, err
}

// ScheduleGetByName implements store.Store.
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*rota.Schedule, error) {
	var d schedDoc
	err := s.scheds.FindOne(ctx, bson.D{{Key: "name", Value: name}, {Key: "deleted", Value: false}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, rota.Errorf(rota.CodeNotFound, "schedule named %q not found", name)
	}
	if err != nil {
		return nil, wrap("read schedule", err)
	}
	return d.schedule()
}

// stateFilter is the filter of a ScheduleListParams.State (as
// store.ScheduleStateFilter says in SQL).
func stateFilter(state string) bson.D {
	switch state {
	case rota.StateError:
		return bson.D{{Key: "err", Value: bson.D{{Key: "$ne", Value: ""}}}}
	case rota.StateEnded:
		return bson.D{{Key: "err", Value: ""}, {Key: "ended", Value: true}}
	case rota.StatePaused:
		return bson.D{{Key: "err", Value: ""}, {Key: "ended", Value: false}, {Key: "enabled", Value: false}}
	case rota.StateActive:
		return bson.D{{Key: "err", Value: ""}, {Key: "ended", Value: false}, {Key: "enabled", Value: true}}
	}
	return nil
}

// decodeScheds decodes schedule documents.
func decodeScheds(docs []schedDoc) ([]rota.Schedule, error) {
	out := make([]rota.Schedule, 0, len(docs))
	for i := range docs {
		sc, err := docs[i].schedule()
		if err != nil {
			return nil, err
		}
		out = append(out, *sc)
	}
	return out, nil
}

// ScheduleList implements store.Store.
func (s *Store) ScheduleList(ctx context.Context, p store.ScheduleListParams) (store.ScheduleListResult, error) {
	limit := store.ScheduleListLimit(p.Limit)
	f := append(bson.D{{Key: "deleted", Value: false}}, stateFilter(p.State)...)
	if p.Cursor != "" {
		f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: p.Cursor}}})
	}
	docs, err := findAll[schedDoc](ctx, s.scheds, f, "schedules", options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(int64(limit+1)))
	if err != nil {
		return store.ScheduleListResult{}, err
	}
	scheds, err := decodeScheds(docs)
	if err != nil {
		return store.ScheduleListResult{}, err
	}
	return store.ScheduleListPage(scheds, limit), nil
}

// ScheduleUpdate implements store.Store.
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleUpdateParams) (*rota.Schedule, error) {
	sc := p.Schedule
	err := s.withSchedLock(ctx, sc.ID, func() error {
		_, cur, err := s.getSched(ctx, sc.ID)
		if err != nil {
			return err
		}
		if cur.Version != sc.Version {
			return store.ConflictError("schedule %s changed meanwhile (version %d, not %d): read it again", sc.ID, cur.Version, sc.Version)
		}
		if ok, err := s.holdName(ctx, sc.Name, sc.ID); err != nil {
			return err
		} else if !ok {
			return store.ConflictError("a schedule named %q already exists", sc.Name)
		}
		rev, err := s.nextRev(ctx)
		if err != nil {
			return err
		}
		sc.CreatedAt, sc.UpdatedAt, sc.Version = cur.CreatedAt, store.FromMillis(store.Millis(p.Now)), cur.Version+1
		if err := s.writeSched(ctx, &sc, cur.Version, rev, false); err != nil {
			return err
		}
		if cur.Name != sc.Name {
			s.freeName(ctx, cur.Name, sc.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.ScheduleGet(ctx, sc.ID)
}

// ScheduleDelete implements store.Store.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	return s.withSchedLock(ctx, p.ID, func() error {
		_, sc, err := s.getSched(ctx, p.ID)
		if err != nil {
			return err
		}
		rev, err := s.nextRev(ctx)
		if err != nil {
			return err
		}
		old := sc.Version
		sc.Enabled, sc.NextFire, sc.Version, sc.UpdatedAt = false, time.Time{}, old+1, store.FromMillis(store.Millis(p.Now))
		if err := s.writeSched(ctx, sc, old, rev, true); err != nil {
			return err
		}
		s.freeName(ctx, sc.Name, sc.ID)
		return s.cancelUnstarted(ctx, sc.ID, p.Now)
	})
}

// cancelUnstarted cancels the held runs of a deleted schedule and its
// unstarted runs for the HTTP target.
func (s *Store) cancelUnstarted(ctx context.Context, sid string, now time.Time) error {
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "sched", Value: sid}, {Key: "done", Value: false}}, "runs of schedule",
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return err
	}
	for _, d := range docs {
		t, _, err := s.mutateTask(ctx, id(d.ID), func(t *taskDoc) error {
			var msg string
			switch {
			case t.Held && !t.Done:
				msg = "canceled: the schedule was deleted before the run was released"
			case t.Status == string(rota.StatusScheduled) && slices.Equal(t.WorkerIDs, []string{rota.HTTPWorkerID}):
				msg = "canceled: the schedule was deleted before its HTTP target was called"
			default:
				return errNoWrite
			}
			t.Status, t.Done, t.Avail, t.Held, t.End, t.Message = string(rota.StatusCanceled), true, false, false, store.Millis(now), msg
			return nil
		})
		if err != nil {
			return err
		}
		if t != nil && t.Done {
			if err := s.settleDependents(ctx, t, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// ScheduleLoad implements store.Store. Rev is the highest revision stored.
func (s *Store) ScheduleLoad(ctx context.Context, sinceRev int64) (store.ScheduleLoadResult, error) {
	var res store.ScheduleLoadResult
	docs, err := findAll[schedDoc](ctx, s.scheds, bson.D{{Key: "rev", Value: bson.D{{Key: "$gt", Value: sinceRev}}}}, "schedules")
	if err != nil {
		return res, err
	}
	res.Rev = sinceRev
	for i := range docs {
		d := &docs[i]
		res.Rev = max(res.Rev, d.Rev)
		if d.Deleted {
			if sinceRev > 0 {
				res.Deleted = append(res.Deleted, d.ID)
			}
			continue
		}
		sc, err := d.schedule()
		if err != nil {
			return res, err
		}
		res.Schedules = append(res.Schedules, *sc)
	}
	return res, nil
}

// scheduleRun is the run view of a task of a schedule.
func (t *taskDoc) scheduleRun() rota.ScheduleRun {
	return rota.ScheduleRun{
		TaskID: t.ID, ScheduleID: t.Sched, FireTime: store.FromMillis(t.Fire), Attempt: t.SAttempt,
		Status: rota.Status(t.Status), Reason: rota.SkipReason(t.Skip), Triggered: t.Triggered, Held: t.Held,
		StopRequested: t.Stop, CreatedAt: store.FromMillis(t.Created), StartTime: store.FromMillis(t.Start),
		EndTime: store.FromMillis(t.End), Message: t.Message,
	}
}

var runProjection = bson.D{{Key: "runs", Value: 0}, {Key: "payload", Value: 0}, {Key: "result", Value: 0}}

// schedRuns reads the runs of schedules matching f, in order sort.
func (s *Store) schedRuns(ctx context.Context, f, sort bson.D, limit int64) ([]rota.ScheduleRun, error) {
	o := options.Find().SetSort(sort).SetProjection(runProjection)
	if limit > 0 {
		o.SetLimit(limit)
	}
	docs, err := findAll[taskDoc](ctx, s.tasks, f, "schedule runs", o)
	if err != nil {
		return nil, err
	}
	out := make([]rota.ScheduleRun, len(docs))
	for i := range docs {
		out[i] = docs[i].scheduleRun()
	}
	return out, nil
}

var fireOrder = bson.D{{Key: "sched", Value: 1}, {Key: "fire", Value: 1}, {Key: "_id", Value: 1}}

// ScheduleOpenRuns implements store.Store.
func (s *Store) ScheduleOpenRuns(ctx context.Context, ids []string) (map[string][]rota.ScheduleRun, error) {
	out := map[string][]rota.ScheduleRun{}
	if len(ids) == 0 {
		return out, nil
	}
	runs, err := s.schedRuns(ctx, bson.D{{Key: "sched", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "done", Value: false}}, fireOrder, 0)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		out[r.ScheduleID] = append(out[r.ScheduleID], r)
	}
	return out, nil
}

// ScheduleRuns implements store.Store.
func (s *Store) ScheduleRuns(ctx context.Context, p store.ScheduleRunsParams) (store.ScheduleRunsResult, error) {
	limit := store.ScheduleListLimit(p.Limit)
	f := bson.D{{Key: "sched", Value: p.ScheduleID}}
	if p.Status != "" {
		f = append(f, bson.E{Key: "status", Value: string(p.Status)})
	}
	if p.Cursor != "" {
		fire, tid, err := store.ParseScheduleRunsCursor(p.Cursor)
		if err != nil {
			return store.ScheduleRunsResult{}, err
		}
		f = append(f, bson.E{Key: "$or", Value: bson.A{bson.D{{Key: "fire", Value: bson.D{{Key: "$lt", Value: fire}}}},
			bson.D{{Key: "fire", Value: fire}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: tid}}}}}})
	}
	runs, err := s.schedRuns(ctx, f, bson.D{{Key: "fire", Value: -1}, {Key: "_id", Value: -1}}, int64(limit+1))
	if err != nil {
		return store.ScheduleRunsResult{}, err
	}
	return store.ScheduleRunsPage(runs, limit), nil
}

// ScheduleTargetKinds implements store.Store.
func (s *Store) ScheduleTargetKinds(ctx context.Context) ([]string, error) {
	docs, err := findAll[schedDoc](ctx, s.scheds, bson.D{{Key: "deleted", Value: false}, {Key: "target", Value: true}}, "target kinds",
		options.Find().SetProjection(bson.D{{Key: "kind", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range docs {
		out = append(out, d.Kind)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
