package mongostore

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// TaskClaim implements store.Store. Per kind asked for, in order: take the
// kind's claim lock (one findOneAndUpdate that also reads the kind's
// settings, round position and rate bucket), read the candidates' ready
// entries (one find while the queue is short, one per level when it is
// long; see ready.go), pick them by store.WeightedPick, read each picked
// task by _id and start it with one compare-and-set of its document, and
// store the round position and bucket while freeing the lock (one
// update).
func (s *Store) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	var res store.TaskClaimResult
	now := store.Millis(p.Now)
	drain, err := s.workerSeen(ctx, p, now)
	if err != nil || drain {
		res.Drain = drain
		return res, err
	}
	for _, kind := range p.Kinds {
		left := p.Max - len(res.Runs)
		if left <= 0 {
			break
		}
		runs, limited, err := s.claimKind(ctx, p, kind, left, now)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, runs...)
		res.RateLimit(limited)
	}
	return res, nil
}

// claimKind claims up to max tasks of kind; limited is when the kind's
// rate bucket has its next token, when it held the claim back (else 0).
func (s *Store) claimKind(ctx context.Context, p store.TaskClaimParams, kind string, max int, now int64) (runs []rota.ClaimedRun, limited int64, err error) {
	mu := s.kindMutex(kind)
	mu.Lock()
	defer mu.Unlock()
	k, st, err := s.lockKind(ctx, kind)
	if err != nil || k == nil {
		return nil, 0, err
	}
	changed := false
	defer func() {
		if uerr := s.unlockKind(ctx, st, changed); err == nil {
			err = uerr
		}
	}()
	if k.Paused {
		return nil, 0, nil
	}
	budget, tokens, err := s.kindBudget(ctx, k, st, max, now)
	if err != nil || budget < 0 {
		return nil, 0, err
	}
	if budget == 0 {
		queues, err := s.candidates(ctx, p, kind, 1, now)
		if err != nil || len(queues[0])+len(queues[1])+len(queues[2]) == 0 {
			return nil, 0, err
		}
		return nil, now + store.RateWait(k.Rate, tokens).Milliseconds(), nil
	}
	runs, pos, err := s.claimPicked(ctx, p, kind, k.PF, st.Pos, budget, now)
	if err != nil || pos == st.Pos && len(runs) == 0 {
		return runs, 0, err
	}
	st.Pos, changed = pos, true
	if k.Rate > 0 {
		st.Tokens, st.TokensAt = tokens-float64(len(runs)), now
	}
	return runs, 0, nil
}

// maxStaleRounds bounds the rounds of a claim whose picks were stale
// ready entries.
const maxStaleRounds = 4

// claimPicked picks up to budget ready entries of kind by
// store.WeightedPick from round position pos (f its factor) and starts a
// run of each picked task that is still claimable; when stale entries
// took picks, it picks again (they are deleted as found). It returns the
// runs and the new round position.
func (s *Store) claimPicked(ctx context.Context, p store.TaskClaimParams, kind string, f, pos, budget int, now int64) ([]rota.ClaimedRun, int, error) {
	var runs []rota.ClaimedRun
	claimable := func(t *taskDoc) bool { return claimableBy(t, p, now) }
	for range maxStaleRounds {
		queues, err := s.candidates(ctx, p, kind, budget-len(runs), now)
		if err != nil {
			return runs, pos, err
		}
		var picked []*readyDoc
		picked, pos = store.WeightedPick(queues, f, pos, budget-len(runs))
		missed := 0
		for _, e := range picked {
			t, err := s.pickedTask(ctx, e, claimable)
			if err != nil {
				return runs, pos, err
			}
			if t == nil {
				missed++
				continue
			}
			run, ok, err := s.startRunFresh(ctx, p, t, now)
			if err != nil {
				return runs, pos, err
			}
			if ok {
				runs = append(runs, run)
			}
		}
		if missed == 0 || len(runs) >= budget {
			break
		}
	}
	return runs, pos, nil
}

// kindMutex serializes this process's claims of one kind before they
// compete for the kind's lock in the database.
func (s *Store) kindMutex(kind string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.claimMu[kind]
	if !ok {
		m = new(sync.Mutex)
		s.claimMu[kind] = m
	}
	return m
}

// kindBudget is how many tasks the kind's cap and rate bucket let a claim
// of max take (-1: none, for the cap; 0: none, for the bucket), with the
// bucket's tokens refilled to now.
func (s *Store) kindBudget(ctx context.Context, k *kindDoc, st *kindState, max int, now int64) (int, float64, error) {
	budget := max
	if k.MaxRunning > 0 {
		rows, err := aggregate[struct {
			N int `bson:"n"`
		}](ctx, s.tasks, bson.A{
			bson.D{{Key: "$match", Value: bson.D{{Key: "kind", Value: k.Name}, {Key: "running", Value: bson.D{{Key: "$gt", Value: 0}}}}}},
			bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: "$running"}}}}}},
		}, "running runs of "+k.Name)
		if err != nil {
			return 0, 0, err
		}
		running := 0
		if len(rows) > 0 {
			running = rows[0].N
		}
		if budget = min(budget, k.MaxRunning-running); budget <= 0 {
			return -1, 0, nil
		}
	}
	if k.Rate <= 0 {
		return budget, 0, nil
	}
	tokens := store.RateRefill(k.Rate, st.Tokens, st.TokensAt, now)
	return min(budget, int(tokens)), tokens, nil
}

// candidates reads the ready entries of the tasks of kind claimable by
// p's worker at now, up to max per level, each level's queue pinned
// first, then by run_at and task id: one find while the queue is short,
// one per level when it is long.
func (s *Store) candidates(ctx context.Context, p store.TaskClaimParams, kind string, max int, now int64) ([3][]*readyDoc, error) {
	filter := readyFilter(kind, p.WorkerID, p.PinnedOnly, now)
	limit := int64(max + 8) // a few more: entries a claim finds stale
	sort := bson.D{{Key: "l", Value: 1}, {Key: "p", Value: -1}, {Key: "at", Value: 1}, {Key: "t", Value: 1}}
	docs, err := findAll[readyDoc](ctx, s.ready, filter, "candidates", options.Find().SetSort(sort).SetLimit(limit))
	if err != nil {
		return [3][]*readyDoc{}, err
	}
	if int64(len(docs)) == limit { // a long queue: each level on its own
		docs = docs[:0]
		for level := range 3 {
			lf := append(slices.Clone(filter), bson.E{Key: "l", Value: level})
			more, err := findAll[readyDoc](ctx, s.ready, lf, "candidates", options.Find().SetSort(sort).SetLimit(limit))
			if err != nil {
				return [3][]*readyDoc{}, err
			}
			docs = append(docs, more...)
		}
	}
	var queues [3][]*readyDoc
	for i := range docs {
		e := &docs[i]
		if e.Level < 0 || e.Level > 2 || len(queues[e.Level]) >= max {
			continue
		}
		queues[e.Level] = append(queues[e.Level], e)
	}
	return queues, nil
}

// holds reports whether worker runs t now or has succeeded it.
func holds(t *taskDoc, worker string) bool {
	for _, r := range t.Runs {
		if r.Worker == worker && (r.Status == string(rota.StatusRunning) || r.Status == string(rota.StatusSuccess)) {
			return true
		}
	}
	return false
}

// maxClaimRereads bounds the re-reads of a task whose compare-and-set a
// claim lost.
const maxClaimRereads = 8

// startRunFresh is startRun, reading t again when another writer (a
// report or heartbeat of its other runs: they do not take the kind's
// lock) changed it since the claim read it, for as long as it is still
// claimable by p's worker: a lost compare-and-set must not send a claim
// back empty while its task waits for a worker (a multi-worker task's
// next run, say).
func (s *Store) startRunFresh(ctx context.Context, p store.TaskClaimParams, t *taskDoc, now int64) (rota.ClaimedRun, bool, error) {
	for i := 0; ; i++ {
		run, ok, err := s.startRun(ctx, p, t, now)
		if ok || err != nil || i == maxClaimRereads {
			return run, ok, err
		}
		fresh, found, err := s.getTask(ctx, bson.D{{Key: "_id", Value: t.ID}})
		if err != nil || !found || !claimableBy(fresh, p, now) {
			return rota.ClaimedRun{}, false, err
		}
		t = fresh
	}
}

// claimableBy reports whether a claim of p's worker at now may start a
// run of t: what candidates asks of the tasks it reads.
func claimableBy(t *taskDoc, p store.TaskClaimParams, now int64) bool {
	switch {
	case !t.Avail || t.RunAt > now || holds(t, p.WorkerID):
		return false
	case p.PinnedOnly || t.Pinned:
		return slices.Contains(t.WorkerIDs, p.WorkerID)
	}
	return true
}

// startRun starts a run of t (as the claim read it) for p's worker: one
// compare-and-set of t's document; ok false when t changed meanwhile.
func (s *Store) startRun(ctx context.Context, p store.TaskClaimParams, t *taskDoc, now int64) (rota.ClaimedRun, bool, error) {
	c := store.ClaimCandidate{
		ID: t.ID, Payload: []byte(t.Payload), Level: t.Level, Attempt: t.Attempt, TimeoutSeconds: t.TimeoutS,
		HeartbeatTimeoutSeconds: t.HBTimeoutS, RunAt: t.RunAt, ScheduleID: t.Sched, FireTime: t.Fire,
	}
	run, lease, deadline := c.Start(t.Kind, p.NewRunID(), now)
	t.Runs = append(t.Runs, runDoc{ID: run.RunID, Worker: p.WorkerID, Addr: p.WorkerAddress, Attempt: run.Attempt,
		Status: string(rota.StatusRunning), Start: now, Lease: lease, Deadline: deadline})
	t.Attempt, t.Running, t.Status, t.WorkerAddr = run.Attempt, t.Running+1, string(rota.StatusRunning), p.WorkerAddress
	if t.Start == 0 {
		t.Start = now
	}
	t.Avail = t.Running+t.Successes < t.Workers
	ok, err := s.replaceTask(ctx, t)
	if ok {
		s.rememberRun(run.RunID, t.ID)
	}
	return run, ok, err
}

// TaskNextRunAt implements store.Store.
func (s *Store) TaskNextRunAt(ctx context.Context, kinds []string, now time.Time) (time.Time, bool, error) {
	if len(kinds) == 0 {
		return time.Time{}, false, nil
	}
	docs, err := findAll[struct {
		RunAt int64 `bson:"at"`
	}](ctx, s.ready, bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: kinds}}},
		{Key: "at", Value: bson.D{{Key: "$gt", Value: store.Millis(now)}}}},
		"next run", options.Find().SetSort(bson.D{{Key: "at", Value: 1}}).SetLimit(1).SetProjection(bson.D{{Key: "at", Value: 1}}))
	if err != nil || len(docs) == 0 {
		return time.Time{}, false, err
	}
	return store.FromMillis(docs[0].RunAt), true, nil
}
