package redisstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// statuses are every task status, for the per-status indexes.
var statuses = []rota.Status{rota.StatusWaiting, rota.StatusScheduled, rota.StatusRunning, rota.StatusSuccess,
	rota.StatusFailed, rota.StatusTimeout, rota.StatusCanceled, rota.StatusSkipped}

// ensureKind creates kind with default settings if it does not exist.
func (t *tx) ensureKind(kind string) error {
	k := t.s.kKind(kind)
	if _, ok := t.s.kinds.Load(kind); ok {
		return nil
	}
	if _, ok := t.guards[k]; ok {
		return nil
	}
	ds, err := t.peekMany([]string{k})
	if err != nil {
		return err
	}
	if ds[0].v != 0 {
		t.s.kinds.Store(kind, struct{}{}) // kinds are never deleted
		return nil
	}
	t.guard(k, 0)
	t.zadd(t.s.kKinds(), 0, kind)
	return t.put(k, newKind(kind))
}

// newKind is a kind nobody configured: the settings a record leaves out
// (one written before the setting existed) read as these.
func newKind(name string) rota.Kind {
	return rota.Kind{Name: name, PriorityFactor: rota.DefaultPriorityFactor, Dispatch: rota.DispatchPull}
}

// decodeKind reads a kind's record body; a setting it lacks is newKind's.
func decodeKind(b []byte) (rota.Kind, error) {
	k := newKind("")
	err := json.Unmarshal(b, &k)
	return k, err
}

// KindList implements store.Store.
func (s *Store) KindList(ctx context.Context) ([]rota.Kind, error) {
	names, err := s.rdb.ZRange(ctx, s.kKinds(), 0, -1).Result()
	if err != nil {
		return nil, s.wrap("list kinds", err)
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = s.kKind(n)
	}
	out := []rota.Kind{}
	err = s.readDocs(ctx, keys, func(_ int, b []byte) error {
		k, err := decodeKind(b)
		if err != nil {
			return err
		}
		out = append(out, k)
		return nil
	})
	return out, s.wrap("list kinds", err)
}

// KindGet implements store.Store.
func (s *Store) KindGet(ctx context.Context, name string) (*rota.Kind, error) {
	var k *rota.Kind
	err := s.readDocs(ctx, []string{s.kKind(name)}, func(_ int, b []byte) error {
		d, err := decodeKind(b)
		k = &d
		return err
	})
	if err != nil {
		return nil, s.wrap("get kind", err)
	}
	if k == nil {
		return nil, store.NotFoundError("kind", name)
	}
	return k, nil
}

// KindUpsert implements store.Store. A resumed kind wakes its waiters.
func (s *Store) KindUpsert(ctx context.Context, p store.KindUpsertParams) (*rota.Kind, error) {
	var out rota.Kind
	err := s.update(ctx, "upsert kind", func(t *tx) error {
		k := s.kKind(p.Name)
		out = newKind(p.Name)
		found, err := t.get(k, &out) // a setting the record lacks keeps newKind's
		if err != nil {
			return err
		}
		if !found {
			t.zadd(s.kKinds(), 0, p.Name)
		}
		wasPaused := out.Paused
		p.Apply(&out)
		s.caps.Store(p.Name, out.MaxRunning)
		if wasPaused && !out.Paused {
			t.notify(store.Notification{Kind: p.Name})
		}
		return t.put(k, out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Stats implements store.Store: counts from the kind+status sets, the
// oldest waiting task from the ready sets.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	kinds, err := s.KindList(ctx)
	if err != nil {
		return store.Stats{}, err
	}
	counts := make([][]*redis.IntCmd, len(kinds))
	oldest := make([][]*redis.ZSliceCmd, len(kinds))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range kinds {
			for _, st := range statuses {
				counts[i] = append(counts[i], p.ZCard(ctx, s.kKindStatus(k.Name, st)))
			}
			for lvl := range 3 {
				for _, pinned := range []bool{false, true} {
					oldest[i] = append(oldest[i], p.ZRangeByScoreWithScores(ctx, s.kReady(k.Name, lvl, pinned),
						&redis.ZRangeBy{Min: "-inf", Max: itoa(ms(now)), Count: 1}))
				}
			}
		}
		return nil
	})
	if err != nil {
		return store.Stats{}, s.wrap("stats", err)
	}
	var out store.Stats
	for i, k := range kinds {
		ks := store.KindStats{Kind: k.Name, Counts: map[rota.Status]int{}, Paused: k.Paused}
		for j, st := range statuses {
			if n := counts[i][j].Val(); n > 0 {
				ks.Counts[st] = int(n)
			}
		}
		var first int64
		for _, c := range oldest[i] {
			for _, z := range c.Val() {
				if v := int64(z.Score); first == 0 || v < first {
					first = v
				}
			}
		}
		if first != 0 {
			ks.OldestWaitingAge = now.Sub(tm(first))
		}
		out.Kinds = append(out.Kinds, ks)
	}
	return out, nil
}

// TaskPinnedWaiting implements store.Store: the due entries of the pinned
// ready sets, grouped.
func (s *Store) TaskPinnedWaiting(ctx context.Context, now time.Time) ([]store.PinnedWaiting, error) {
	kinds, err := s.rdb.ZRange(ctx, s.kKinds(), 0, -1).Result()
	if err != nil {
		return nil, s.wrap("pinned waiting", err)
	}
	var groups []store.PinnedWaiting
	for _, kind := range kinds {
		for lvl := range 3 {
			ids, err := s.rdb.ZRangeByScore(ctx, s.kReady(kind, lvl, true), &redis.ZRangeBy{Min: "-inf", Max: itoa(ms(now))}).Result()
			if err != nil {
				return nil, s.wrap("pinned waiting", err)
			}
			keys := make([]string, len(ids))
			for i, id := range ids {
				keys[i] = s.kTask(id)
			}
			err = s.readDocs(ctx, keys, func(_ int, b []byte) error {
				var d taskDoc
				if err := json.Unmarshal(b, &d); err != nil {
					return err
				}
				if d.Status == rota.StatusScheduled {
					groups = append(groups, store.PinnedWaiting{Kind: kind, WorkerIDs: d.WorkerIDs, Oldest: tm(d.RunAt)})
				}
				return nil
			})
			if err != nil {
				return nil, s.wrap("pinned waiting", err)
			}
		}
	}
	out := store.MergePinned(groups)
	if len(out) > store.MaxPinnedGroups {
		out = out[:store.MaxPinnedGroups]
	}
	return out, nil
}
