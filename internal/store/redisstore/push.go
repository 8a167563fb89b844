package redisstore

import (
	"context"
	"slices"
	"time"

	"github.com/rotahq/rota/internal/store"
)

var _ store.PushStore = (*Store)(nil)

// pushReg is a push worker's registration. It lives in its worker's
// record (workerDoc.Push), so that it goes with the worker (WorkerPrune)
// and a registration is one record written; kPushWorkers lists the
// registered workers.
type pushReg struct {
	Addr string `json:"addr"`
	Cap  int    `json:"cap"`
	At   int64  `json:"at"` // registered at, unix ms
}

// pushWorker is registered worker w with running runs.
func (w *workerDoc) pushWorker(running int) store.PushWorker {
	return store.PushWorker{
		WorkerID: w.ID, Address: w.Push.Addr, Kinds: slices.Clone(w.Kinds), Capacity: w.Push.Cap,
		Running: running, Stopped: w.Stop || w.Dereg, RegisteredAt: tm(w.Push.At),
	}
}

// WorkerRegister implements store.PushStore: the worker's record is
// created or updated as a claim would (kinds replaced, seen at Now unless
// later already, no longer deregistered, a stop request kept) with its
// registration, in one commit.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*store.PushWorker, error) {
	var out store.PushWorker
	err := s.update(ctx, "register worker "+p.WorkerID, func(t *tx) error {
		k := s.kWorker(p.WorkerID)
		w, err := t.peekWorker(p.WorkerID)
		if err != nil {
			return err
		}
		now := ms(p.Now)
		if w == nil {
			t.guard(k, 0)
			w = &workerDoc{ID: p.WorkerID, First: now}
			t.zadd(s.kWorkers(), 0, p.WorkerID)
		} else {
			t.guard(k, w.v)
		}
		w.Address, w.Kinds, w.Dereg = p.Address, slices.Clone(p.Kinds), false
		w.Push = &pushReg{Addr: p.Address, Cap: p.Capacity, At: now}
		if err := t.put(k, w); err != nil {
			return err
		}
		t.zadd(s.kPushWorkers(), 0, p.WorkerID)
		t.hmax(k, "seen", now)
		t.hset(k, "wait", 0)
		running, err := s.rdb.ZCard(ctx, s.kWorkerRuns(p.WorkerID)).Result()
		out = w.pushWorker(int(running))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// PushWorkerList implements store.PushStore: the registered workers'
// records and running sets, in one round trip.
func (s *Store) PushWorkerList(ctx context.Context) ([]store.PushWorker, error) {
	ids, err := s.rdb.ZRange(ctx, s.kPushWorkers(), 0, -1).Result()
	if err != nil {
		return nil, s.wrap("list push workers", err)
	}
	docs, running, err := s.workerDocs(ctx, ids)
	if err != nil {
		return nil, s.wrap("list push workers", err)
	}
	var out []store.PushWorker
	for i, w := range docs {
		if w.Push != nil {
			out = append(out, w.pushWorker(running[i]))
		}
	}
	return out, nil
}

// PushWorkersSeen implements store.PushStore: each known worker's seen
// moves to now if later and its wait is cleared, in one commit. The
// records are guarded so that a worker pruned meanwhile is not revived
// as a bare hash.
func (s *Store) PushWorkersSeen(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.kWorker(id)
	}
	return s.update(ctx, "push workers seen", func(t *tx) error {
		docs, err := t.peekMany(keys)
		if err != nil {
			return err
		}
		for i, d := range docs {
			if d.v == 0 {
				continue
			}
			t.guard(keys[i], d.v)
			t.hmax(keys[i], "seen", ms(now))
			t.hset(keys[i], "wait", 0)
		}
		return nil
	})
}
