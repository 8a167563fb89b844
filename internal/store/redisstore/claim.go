package redisstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"context"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// TaskClaim implements store.Store. The dispatch rules are documented on
// store.TaskClaimParams.
func (s *Store) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	var res store.TaskClaimResult
	err := s.update(ctx, "claim", func(t *tx) error {
		res = store.TaskClaimResult{}
		if err := t.loadKinds(p); err != nil {
			return err
		}
		drain, err := t.workerSeen(p)
		if err != nil || drain {
			res.Drain = drain
			return err
		}
		now := ms(p.Now)
		for _, kind := range p.Kinds {
			left := p.Max - len(res.Runs)
			if left <= 0 {
				break
			}
			runs, limited, err := t.claimKind(p, kind, left, now)
			if err != nil {
				return err
			}
			res.Runs = append(res.Runs, runs...)
			res.RateLimit(limited)
		}
		return nil
	})
	return res, err
}

// kindState is a kind's record with its claim state (plain fields of the
// kind's hash, not versioned: pos, the weighted round's position; tok and
// rat, the rate bucket's tokens and their instant).
type kindState struct {
	rota.Kind
	v       int64
	pos     int
	tokens  float64
	rateAt  int64
	found   bool
	running int64
}

// loadKinds reads, in one round trip, the claiming worker (t.worker)
// and each kind's record, claim state and running count (t.kinds).
func (t *tx) loadKinds(p store.TaskClaimParams) error {
	hms := make([]*redis.SliceCmd, len(p.Kinds))
	counts := make([]*redis.IntCmd, len(p.Kinds))
	var w *redis.SliceCmd
	_, err := t.s.rdb.Pipelined(t.ctx, func(pp redis.Pipeliner) error {
		w = pp.HMGet(t.ctx, t.s.kWorker(p.WorkerID), "v", "d", "seen", "wait")
		for i, kind := range p.Kinds {
			hms[i] = pp.HMGet(t.ctx, t.s.kKind(kind), "v", "d", "pos", "tok", "rat")
			counts[i] = pp.ZCard(t.ctx, t.s.kKindRunning(kind))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if t.worker, err = parseWorker(w.Val()); err != nil {
		return err
	}
	t.kinds = make(map[string]kindState, len(p.Kinds))
	for i, kind := range p.Kinds {
		k, err := parseKind(hms[i].Val(), counts[i].Val())
		if err != nil {
			return fmt.Errorf("kind %s: %w", kind, err)
		}
		t.kinds[kind] = k
		t.s.caps.Store(kind, k.MaxRunning)
	}
	return nil
}

// parseKind reads HMGET v d pos tok rat of a kind and its running count.
func parseKind(vals []any, running int64) (kindState, error) {
	var k kindState
	d := parseDoc(vals[:2])
	if d.v == 0 {
		return k, nil
	}
	kind, err := decodeKind(d.d)
	if err != nil {
		return k, err
	}
	k.Kind = kind
	k.v, k.found, k.running = d.v, true, running
	if v, ok := vals[2].(string); ok {
		k.pos, _ = strconv.Atoi(v)
	}
	if v, ok := vals[3].(string); ok {
		k.tokens, _ = strconv.ParseFloat(v, 64)
	}
	if v, ok := vals[4].(string); ok {
		k.rateAt, _ = strconv.ParseInt(v, 10, 64)
	}
	return k, nil
}

// claimKind claims up to max tasks of one kind, in weighted-round order;
// with a rate limit and an empty bucket while tasks wait, it returns the
// instant (unix ms) the next token is due.
func (t *tx) claimKind(p store.TaskClaimParams, kind string, max int, now int64) ([]rota.ClaimedRun, int64, error) {
	k := t.kinds[kind]
	if !k.found || k.Paused {
		return nil, 0, nil
	}
	budget := max
	if k.MaxRunning > 0 {
		if budget = min(budget, k.MaxRunning-int(k.running)); budget <= 0 {
			return nil, 0, nil
		}
	}
	kk := t.s.kKind(kind)
	if k.MaxRunning > 0 || k.Rate > 0 {
		// Claims of a capped or rate-limited kind serialize on its record.
		t.guard(kk, k.v)
	}
	if k.Rate > 0 {
		k.tokens = store.RateRefill(k.Rate, k.tokens, k.rateAt, now)
		if budget = min(budget, int(k.tokens)); budget <= 0 {
			q, err := t.candidates(p, kind, 1, now)
			if err != nil || len(q[0])+len(q[1])+len(q[2]) == 0 {
				return nil, 0, err
			}
			return nil, now + store.RateWait(k.Rate, k.tokens).Milliseconds(), nil
		}
	}
	queues, err := t.candidates(p, kind, budget, now)
	if err != nil {
		return nil, 0, err
	}
	picked, pos := store.WeightedPick(queues, k.PriorityFactor, k.pos, budget)
	if len(picked) == 0 {
		return nil, 0, nil
	}
	out := make([]rota.ClaimedRun, 0, len(picked))
	for _, c := range picked {
		run, err := t.start(p, c, now)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, run)
	}
	t.hset(kk, "pos", pos)
	if k.MaxRunning > 0 || k.Rate > 0 {
		t.bump(kk)
	}
	if k.Rate > 0 {
		t.hset(kk, "tok", k.tokens-float64(len(out)))
		t.hset(kk, "rat", now)
	}
	return out, 0, nil
}

// cand is a claimable task as read, with the version to guard.
type cand struct {
	d *taskDoc
	v int64
}

// candidates returns up to max claimable tasks per level for the
// claiming worker: pinned to it first, then unpinned (none for a
// PinnedOnly claim), each by RunAt then id.
func (t *tx) candidates(p store.TaskClaimParams, kind string, max int, now int64) ([3][]cand, error) {
	var queues [3][]cand
	first, err := t.firstReady(kind, p.PinnedOnly, max, now)
	if err != nil {
		return queues, err
	}
	for lvl := range 3 {
		pinned, err := t.scanReady(t.s.kReady(kind, lvl, true), first[2*lvl], p.WorkerID, true, max, now)
		if err != nil {
			return queues, err
		}
		queues[lvl] = pinned
		if !p.PinnedOnly {
			free, err := t.scanReady(t.s.kReady(kind, lvl, false), first[2*lvl+1], p.WorkerID, false, max, now)
			if err != nil {
				return queues, err
			}
			queues[lvl] = append(queues[lvl], free...)
		}
		if len(queues[lvl]) > max {
			queues[lvl] = queues[lvl][:max]
		}
	}
	return queues, nil
}

// readyBatch is one batch read of a ready set: its due ids and records.
type readyBatch struct {
	ids  []string
	docs []doc
}

// batchOf is the size of a ready set's batch for a claim of max.
func batchOf(max int) int64 { return int64(max + 8) }

// firstReady reads the first batch of the kind's six ready sets (pinned
// and not, per level: index 2*level, +1 unpinned) with their records, in
// two round trips.
func (t *tx) firstReady(kind string, pinnedOnly bool, max int, now int64) ([6]readyBatch, error) {
	var out [6]readyBatch
	cmds := make([]*redis.StringSliceCmd, 6)
	_, err := t.s.rdb.Pipelined(t.ctx, func(p redis.Pipeliner) error {
		for i := range 6 {
			if pinnedOnly && i%2 == 1 {
				continue
			}
			cmds[i] = p.ZRangeByScore(t.ctx, t.s.kReady(kind, i/2, i%2 == 0), &redis.ZRangeBy{Min: "-inf", Max: itoa(now), Count: batchOf(max)})
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	var keys []string
	for i, c := range cmds {
		if c != nil {
			out[i].ids = c.Val()
			for _, id := range out[i].ids {
				keys = append(keys, t.s.kTask(id))
			}
		}
	}
	docs, err := t.peekMany(keys)
	if err != nil {
		return out, err
	}
	for i := range out {
		out[i].docs, docs = docs[:len(out[i].ids)], docs[len(out[i].ids):]
	}
	return out, nil
}

// scanReady reads due tasks of a ready set, in order, from its first
// batch on, keeping up to max that worker may take.
func (t *tx) scanReady(key string, first readyBatch, worker string, pinned bool, max int, now int64) ([]cand, error) {
	var out []cand
	batch := batchOf(max)
	for off := int64(0); len(out) < max; off += batch {
		ids, docs := first.ids, first.docs
		if off > 0 {
			var err error
			if ids, err = t.s.rdb.ZRangeByScore(t.ctx, key, &redis.ZRangeBy{Min: "-inf", Max: itoa(now), Offset: off, Count: batch}).Result(); err != nil {
				return nil, err
			}
			keys := make([]string, len(ids))
			for i, id := range ids {
				keys[i] = t.s.kTask(id)
			}
			if docs, err = t.peekMany(keys); err != nil {
				return nil, err
			}
		}
		for _, dc := range docs {
			if dc.v == 0 || len(out) >= max {
				continue
			}
			var d taskDoc
			if err := json.Unmarshal(dc.d, &d); err != nil {
				return nil, err
			}
			if takeable(&d, worker, pinned) {
				out = append(out, cand{d: &d, v: dc.v})
			}
		}
		if int64(len(ids)) < batch {
			break
		}
	}
	return out, nil
}

// takeable: the worker may start a run of d (claimable, allowed, and it
// neither runs it now nor has succeeded it).
func takeable(d *taskDoc, worker string, pinned bool) bool {
	if !d.Avail || d.Held || d.Waiting > 0 || d.Done {
		return false
	}
	if pinned && !slices.Contains(d.WorkerIDs, worker) {
		return false
	}
	if d.Workers > 1 {
		for _, r := range d.Runs {
			if r.Worker == worker && (r.Status == rota.StatusRunning || r.Status == rota.StatusSuccess) {
				return false
			}
		}
	}
	return true
}

// start makes a run of candidate c for the claiming worker: one write of
// the task record (lean model). A single-worker task's finished runs move
// to its history list, as the new attempt supersedes them.
func (t *tx) start(p store.TaskClaimParams, c cand, now int64) (rota.ClaimedRun, error) {
	d := c.d
	t.guard(t.s.kTask(d.ID), c.v)
	old := d.clone()
	run, lease, deadline := store.ClaimCandidate{
		ID: d.ID, Payload: d.Payload, Level: d.Level, Attempt: d.Attempt, TimeoutSeconds: d.TimeoutS,
		HeartbeatTimeoutSeconds: d.HBS, RunAt: d.RunAt, ScheduleID: d.Sched, FireTime: d.Fire,
	}.Start(d.Kind, p.NewRunID(), now)
	if d.Workers <= 1 {
		kept := d.Runs[:0]
		for _, r := range d.Runs {
			if r.Status == rota.StatusRunning {
				kept = append(kept, r)
				continue
			}
			b, err := json.Marshal(r)
			if err != nil {
				return run, err
			}
			t.rpush(t.s.kHist(d.ID), b)
			d.Hist++
		}
		d.Runs = kept
	}
	t.hset(t.s.kRunTasks(), run.RunID, d.ID)
	d.Runs = append(d.Runs, runDoc{ID: run.RunID, Worker: p.WorkerID, Addr: p.WorkerAddress, Attempt: run.Attempt,
		Status: rota.StatusRunning, Start: now, Lease: lease, Deadline: deadline})
	d.Attempt, d.Status, d.Addr = run.Attempt, rota.StatusRunning, p.WorkerAddress
	d.Running++
	d.Avail = d.Running+d.Successes < d.Workers
	if d.Start == 0 {
		d.Start = now
	}
	if !slices.Contains(d.Ran, p.WorkerID) {
		d.Ran = append(d.Ran, p.WorkerID)
	}
	return run, t.putTask(old, d)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
