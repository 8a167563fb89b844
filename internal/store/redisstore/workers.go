package redisstore

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// workerDoc is a worker's record. Its last sighting (seen, unix ms) and
// the long-poll wait of its last claim (wait, ms) are plain fields of the
// hash, so that heartbeats of one worker's runs never conflict on it.
type workerDoc struct {
	ID      string   `json:"id"`
	Address string   `json:"addr,omitempty"`
	Kinds   []string `json:"kinds"`
	First   int64    `json:"first"`
	Stop    bool     `json:"stop,omitempty"`
	Dereg   bool     `json:"dereg,omitempty"`
	Push    *pushReg `json:"push,omitempty"` // its push registration (WorkerRegister)
	seen    int64
	wait    int64
	v       int64
}

// parseWorker reads HMGET v d seen wait; nil when absent.
func parseWorker(vals []any) (*workerDoc, error) {
	d := parseDoc(vals[:2])
	if d.v == 0 {
		return nil, nil
	}
	var w workerDoc
	if err := json.Unmarshal(d.d, &w); err != nil {
		return nil, err
	}
	w.v = d.v
	if v, ok := vals[2].(string); ok {
		w.seen, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := vals[3].(string); ok {
		w.wait, _ = strconv.ParseInt(v, 10, 64)
	}
	return &w, nil
}

// peekWorker reads a worker without guarding it; nil when unknown.
func (t *tx) peekWorker(id string) (*workerDoc, error) {
	vals, err := t.s.rdb.HMGet(t.ctx, t.s.kWorker(id), "v", "d", "seen", "wait").Result()
	if err != nil {
		return nil, err
	}
	return parseWorker(vals)
}

// workerSeen records the claiming worker (created if new, its kinds
// merged) and reports whether it must drain.
func (t *tx) workerSeen(p store.TaskClaimParams) (bool, error) {
	k := t.s.kWorker(p.WorkerID)
	w := t.worker // read by loadKinds
	now := ms(p.Now)
	changed := w == nil || w.Dereg || w.Address != p.WorkerAddress
	if w == nil {
		t.guard(k, 0)
		w = &workerDoc{ID: p.WorkerID, First: now}
		t.zadd(t.s.kWorkers(), 0, p.WorkerID)
	} else {
		t.guard(k, w.v)
	}
	kinds := mergeKinds(w.Kinds, p.Kinds)
	if !slices.Equal(kinds, w.Kinds) {
		w.Kinds, changed = kinds, true
	}
	w.Address, w.Dereg = p.WorkerAddress, false
	if changed {
		if err := t.put(k, w); err != nil {
			return false, err
		}
	}
	t.hset(k, "seen", now)
	t.hset(k, "wait", p.Wait.Milliseconds())
	return w.Stop, nil
}

// mergeKinds is the union of a worker's kinds and those of its claim,
// sorted, or the claim's alone past store.MaxWorkerKinds.
func mergeKinds(have, claim []string) []string {
	out := append(slices.Clone(have), claim...)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > store.MaxWorkerKinds {
		out = slices.Clone(claim)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// loadWorkers reads workers ids with their running counts at now.
func (s *Store) loadWorkers(ctx context.Context, ids []string, now time.Time) ([]rota.Worker, error) {
	docs, running, err := s.workerDocs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]rota.Worker, len(docs))
	for i, w := range docs {
		out[i] = w.worker(running[i], now)
	}
	return out, nil
}

// workerDocs reads the records of workers ids (the unknown ones left
// out) and the runs each holds, in one round trip.
func (s *Store) workerDocs(ctx context.Context, ids []string) ([]*workerDoc, []int, error) {
	hm := make([]*redis.SliceCmd, len(ids))
	cnt := make([]*redis.IntCmd, len(ids))
	if len(ids) == 0 {
		return nil, nil, nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			hm[i] = p.HMGet(ctx, s.kWorker(id), "v", "d", "seen", "wait")
			cnt[i] = p.ZCard(ctx, s.kWorkerRuns(id))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var docs []*workerDoc
	var running []int
	for i := range ids {
		w, err := parseWorker(hm[i].Val())
		if err != nil {
			return nil, nil, err
		}
		if w != nil {
			docs, running = append(docs, w), append(running, int(cnt[i].Val()))
		}
	}
	return docs, running, nil
}

func (w *workerDoc) worker(running int, now time.Time) rota.Worker {
	return rota.Worker{
		ID: w.ID, Address: w.Address, Kinds: w.Kinds, Running: running, FirstSeen: tm(w.First), LastSeen: tm(w.seen),
		StopRequested: w.Stop,
		Status:        store.WorkerStatusAt(tm(w.seen), time.Duration(w.wait)*time.Millisecond, w.Stop || w.Dereg, running, now),
	}
}

// WorkerList implements store.Store.
func (s *Store) WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error) {
	ids, err := s.rdb.ZRange(ctx, s.kWorkers(), 0, -1).Result()
	if err != nil {
		return nil, s.wrap("list workers", err)
	}
	ws, err := s.loadWorkers(ctx, ids, now)
	return ws, s.wrap("list workers", err)
}

// WorkerListPage implements store.Store: workers by id from the cursor,
// filtered as read.
func (s *Store) WorkerListPage(ctx context.Context, p store.WorkerListParams) (store.WorkerListResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultWorkerListLimit
	}
	var out []rota.Worker
	min := "-"
	if p.Cursor != "" {
		min = "(" + p.Cursor
	}
	const batch = 500
	for len(out) <= limit {
		ids, err := s.rdb.ZRangeByLex(ctx, s.kWorkers(), &redis.ZRangeBy{Min: min, Max: "+", Count: batch}).Result()
		if err != nil {
			return store.WorkerListResult{}, s.wrap("list workers", err)
		}
		ws, err := s.loadWorkers(ctx, ids, p.Now)
		if err != nil {
			return store.WorkerListResult{}, s.wrap("list workers", err)
		}
		for _, w := range ws {
			if (p.Status == "" || w.Status == p.Status) && (p.Kind == "" || slices.Contains(w.Kinds, p.Kind)) && len(out) <= limit {
				out = append(out, w)
			}
		}
		if len(ids) < batch {
			break
		}
		min = "(" + ids[len(ids)-1]
	}
	return store.WorkerListPage(out, limit), nil
}

// WorkerStop implements store.Store.
func (s *Store) WorkerStop(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	return s.changeWorker(ctx, "stop worker", id, now, func(w *workerDoc) { w.Stop = true })
}

// WorkerDeregister implements store.Store.
func (s *Store) WorkerDeregister(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	return s.changeWorker(ctx, "deregister worker", id, now, func(w *workerDoc) {
		w.Dereg = true
		w.seen, w.wait = max(w.seen, ms(now)), 0
	})
}

// changeWorker applies change to worker id and returns it at now.
func (s *Store) changeWorker(ctx context.Context, op, id string, now time.Time, change func(*workerDoc)) (*rota.Worker, error) {
	var out rota.Worker
	err := s.update(ctx, op, func(t *tx) error {
		w, err := t.peekWorker(id)
		if err != nil {
			return err
		}
		if w == nil {
			return store.NotFoundError("worker", id)
		}
		k := s.kWorker(id)
		t.guard(k, w.v)
		change(w)
		t.hset(k, "seen", w.seen)
		t.hset(k, "wait", w.wait)
		running, err := s.rdb.ZCard(ctx, s.kWorkerRuns(id)).Result()
		if err != nil {
			return err
		}
		out = w.worker(int(running), now)
		return t.put(k, w)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkerPrune implements store.Store.
func (s *Store) WorkerPrune(ctx context.Context, p store.WorkerPruneParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	n := 0
	err := s.update(ctx, "prune workers", func(t *tx) error {
		n = 0
		ids, err := s.rdb.ZRange(ctx, s.kWorkers(), 0, -1).Result()
		if err != nil {
			return err
		}
		docs, running, err := s.workerDocs(ctx, ids)
		if err != nil {
			return err
		}
		before := ms(p.SeenBefore)
		for i, w := range docs {
			if n >= limit {
				break
			}
			if running[i] > 0 || w.seen >= before || w.seen+w.wait >= before {
				continue
			}
			t.guard(s.kWorker(w.ID), w.v)
			t.del(s.kWorker(w.ID))
			t.zrem(s.kWorkers(), w.ID)
			if w.Push != nil {
				t.zrem(s.kPushWorkers(), w.ID)
			}
			n++
		}
		return nil
	})
	return n, err
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// WorkerRunsActive implements store.Store: each worker's running set.
func (s *Store) WorkerRunsActive(ctx context.Context, workerIDs []string) (map[string][]rota.WorkerRun, error) {
	out := map[string][]rota.WorkerRun{}
	cmds := make([]*redis.ZSliceCmd, len(workerIDs))
	if len(workerIDs) == 0 {
		return out, nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range workerIDs {
			cmds[i] = p.ZRangeWithScores(ctx, s.kWorkerRuns(id), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("worker runs", err)
	}
	for i, id := range workerIDs {
		for _, z := range cmds[i].Val() {
			m, _ := z.Member.(string)
			run, rest, _ := strings.Cut(m, "\x00")
			taskID, kind, _ := strings.Cut(rest, "\x00")
			out[id] = append(out[id], rota.WorkerRun{RunID: run, TaskID: taskID, Kind: kind, StartedAt: tm(int64(z.Score))})
		}
	}
	return out, nil
}
