package pgstore_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// TestRandomWorkloadMatchesSQLite drives pgstore and sqlitestore (the
// reference) through the same random sequence of operations, one at a
// time, and compares every answer: results, error codes, and at the end
// every task with its runs. It reaches combinations the conformance suite
// does not spell out (pinned multi-worker tasks under a cap and a stop,
// retries of stopped runs, ...).
func TestRandomWorkloadMatchesSQLite(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			lite, err := sqlitestore.New(t.Context(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lite.Close() })
			newWorkload(t, seed, lite, open(t)).run(500)
		})
	}
}

type workload struct {
	t       *testing.T
	rng     *rand.Rand
	ref, pg store.Store
	// ops numbers the operations; an operation's run ids are its number
	// and, within it, the order in which the store asked for them, so
	// both stores make the same ids for the same tasks even when one asks
	// for more than it hands out (pgstore's claimOne makes Max ids).
	ops      int
	now      time.Time
	taskIDs  rota.IDGenerator
	tasks    []string
	runs     []runRef
	keys     []string
	kinds    []string
	workers  []string
	lastStep string
}

type runRef struct{ id, worker string }

func newWorkload(t *testing.T, seed uint64, ref, pg store.Store) *workload {
	return &workload{
		t: t, rng: rand.New(rand.NewPCG(seed, 42)), ref: ref, pg: pg,
		now:     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		keys:    []string{"k1", "k2", "k3"},
		kinds:   []string{"a", "b", "c"},
		workers: []string{"w1", "w2", "w3", "w4"},
	}
}

// recentRun is one of the last runs claimed, mostly, or any.
func (w *workload) recentRun() runRef {
	if w.rng.IntN(5) == 0 {
		return w.runs[w.rng.IntN(len(w.runs))]
	}
	return w.runs[len(w.runs)-1-w.rng.IntN(min(6, len(w.runs)))]
}

func (w *workload) pick(ss []string) string { return ss[w.rng.IntN(len(ss))] }

func (w *workload) subset(ss []string) []string {
	var out []string
	for _, s := range ss {
		if w.rng.IntN(2) == 0 {
			out = append(out, s)
		}
	}
	return out
}

// both runs op on the reference and on pgstore and compares the outcomes.
func (w *workload) both(name string, op func(st store.Store, newRunID func() string) (any, error)) {
	w.t.Helper()
	w.lastStep = name
	w.ops++
	runIDs := func() func() string {
		n := 0
		return func() string { n++; return fmt.Sprintf("%016x%016x", w.ops, n) }
	}
	want, wantErr := op(w.ref, runIDs())
	got, gotErr := op(w.pg, runIDs())
	if (wantErr == nil) != (gotErr == nil) || rota.ErrorCode(wantErr) != rota.ErrorCode(gotErr) {
		w.t.Fatalf("%s at %v: sqlite err %v, pg err %v", name, w.now, wantErr, gotErr)
	}
	if wantErr != nil {
		return
	}
	opts := cmp.Options{
		cmpopts.EquateEmpty(),
		cmp.FilterPath(func(p cmp.Path) bool { return !lastSeen(p) }, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })),
		// PostgreSQL records a worker's sighting at most once a second
		// (pgstore's seenGrain): it may lag SQLite's by less than that.
		cmp.FilterPath(lastSeen,
			cmp.Comparer(func(a, b time.Time) bool { d := a.Sub(b); return d > -time.Second && d < time.Second })),
		cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 || len(b) > 0 },
			cmp.Comparer(func(a, b json.RawMessage) bool { return string(a) == string(b) })),
	}
	if d := cmp.Diff(want, got, opts); d != "" {
		w.t.Fatalf("%s at %v: results differ (-sqlite +pg):\n%s", name, w.now, d)
	}
}

func (w *workload) run(steps int) {
	ctx := w.t.Context()
	for range steps {
		w.now = w.now.Add(time.Duration(w.rng.IntN(1500)) * time.Millisecond)
		now := w.now
		switch r := w.rng.IntN(100); {
		case r < 22: // insert one or a few
			n := 1 + w.rng.IntN(3)
			var ps []store.TaskInsertParams
			for range n {
				p := store.TaskInsertParams{
					ID: w.taskIDs.New(now), Kind: w.pick(w.kinds), Priority: rota.Priorities()[w.rng.IntN(3)],
					Payload: json.RawMessage(`{"n":1}`), RunAt: now, MaxRetries: w.rng.IntN(3),
					HeartbeatTimeoutSeconds: 10 + w.rng.IntN(20), Workers: 1, Now: now,
				}
				if w.rng.IntN(4) == 0 {
					p.Key = w.pick(w.keys)
				}
				if w.rng.IntN(4) == 0 {
					p.RunAt = now.Add(time.Duration(w.rng.IntN(20)) * time.Second)
				}
				if w.rng.IntN(4) == 0 {
					p.TimeoutSeconds = 5 + w.rng.IntN(20)
				}
				if w.rng.IntN(5) == 0 {
					p.Workers = 2 + w.rng.IntN(2)
				}
				if w.rng.IntN(5) == 0 {
					p.WorkerIDs = w.subset(w.workers)
				}
				ps = append(ps, p)
			}
			w.both("insert", func(st store.Store, _ func() string) (any, error) { return st.TaskInsertMany(ctx, ps) })
			for _, p := range ps {
				w.tasks = append(w.tasks, p.ID)
			}
		case r < 45: // claim
			p := store.TaskClaimParams{
				WorkerID: w.pick(w.workers), WorkerAddress: "addr", Kinds: w.subset(w.kinds), Max: 1 + w.rng.IntN(3),
				Wait: time.Duration(w.rng.IntN(3)) * time.Second, Now: now,
			}
			if len(p.Kinds) == 0 {
				// sqlitestore records a claim of no kinds as a kind "" in
				// the worker's list once it had others (json_each of null).
				p.Kinds = []string{w.pick(w.kinds)}
			}
			w.rng.Shuffle(len(p.Kinds), func(i, j int) { p.Kinds[i], p.Kinds[j] = p.Kinds[j], p.Kinds[i] })
			var claimed store.TaskClaimResult
			w.both("claim", func(st store.Store, newRunID func() string) (any, error) {
				p.NewRunID = newRunID
				res, err := st.TaskClaim(ctx, p)
				claimed = res
				return res, err
			})
			for _, c := range claimed.Runs {
				w.runs = append(w.runs, runRef{c.RunID, p.WorkerID})
			}
		case r < 55 && len(w.runs) > 0: // heartbeat
			ref := w.recentRun()
			if w.rng.IntN(8) == 0 {
				ref.worker = w.pick(w.workers)
			}
			msg := ""
			if w.rng.IntN(3) == 0 {
				msg = fmt.Sprintf("%d%% done", w.rng.IntN(100))
			}
			w.both("heartbeat", func(st store.Store, _ func() string) (any, error) {
				return st.RunHeartbeat(ctx, store.RunHeartbeatParams{RunID: ref.id, WorkerID: ref.worker, Message: msg, Now: now})
			})
		case r < 72 && len(w.runs) > 0: // report
			ref := w.recentRun()
			p := store.RunCompleteParams{RunID: ref.id, WorkerID: ref.worker, Success: w.rng.IntN(2) == 0, Message: "m",
				Retry: w.rng.IntN(3) > 0, Now: now}
			if w.rng.IntN(8) == 0 {
				p.Release = true
			}
			if p.Success && w.rng.IntN(2) == 0 {
				p.Result = json.RawMessage(`{"ok":true}`)
			}
			if w.rng.IntN(2) == 0 {
				p.Backoff = func(n int) time.Duration { return time.Duration(n) * 3 * time.Second }
			}
			w.both("complete", func(st store.Store, _ func() string) (any, error) { return st.RunComplete(ctx, p) })
		case r < 78: // reaper
			p := store.RunExpireParams{Now: now, Limit: 1 + w.rng.IntN(5), Backoff: func(n int) time.Duration { return time.Duration(n) * 2 * time.Second }}
			w.both("expire", func(st store.Store, _ func() string) (any, error) {
				res, err := st.RunExpire(ctx, p)
				sort.Strings(res.Kinds)
				return res, err
			})
		case r < 82 && len(w.tasks) > 0: // stop
			id := w.pick(w.tasks)
			w.both("stop", func(st store.Store, _ func() string) (any, error) {
				return st.TaskStop(ctx, store.TaskStopParams{ID: id, Now: now})
			})
		case r < 87 && len(w.tasks) > 0: // update
			p := store.TaskUpdateParams{ID: w.pick(w.tasks), Now: now}
			if w.rng.IntN(2) == 0 {
				ids := w.subset(w.workers)
				p.WorkerIDs = &ids
			}
			if w.rng.IntN(2) == 0 {
				pr := rota.Priorities()[w.rng.IntN(3)]
				p.Priority = &pr
			}
			if w.rng.IntN(3) == 0 {
				mr := w.rng.IntN(3)
				p.MaxRetries = &mr
			}
			w.both("update", func(st store.Store, _ func() string) (any, error) { return st.TaskUpdate(ctx, p) })
		case r < 91: // kind settings
			p := store.KindUpsertParams{Name: w.pick(w.kinds)}
			if w.rng.IntN(2) == 0 {
				paused := w.rng.IntN(3) == 0
				p.Paused = &paused
			}
			if w.rng.IntN(2) == 0 {
				f := 1 + w.rng.IntN(3)
				p.PriorityFactor = &f
			}
			if w.rng.IntN(2) == 0 {
				m := w.rng.IntN(3)
				p.MaxRunning = &m
			}
			if w.rng.IntN(3) == 0 {
				r := []float64{0, 0.5, 2, 5}[w.rng.IntN(4)]
				p.Rate = &r
			}
			if w.rng.IntN(4) == 0 {
				keep := []int{0, 5, 30}[w.rng.IntN(3)]
				p.RetentionSeconds = &keep
			}
			w.both("kind upsert", func(st store.Store, _ func() string) (any, error) { return st.KindUpsert(ctx, p) })
		case r < 91 && w.rng.IntN(3) == 0: // retention
			limit := 1 + w.rng.IntN(4)
			w.both("cleanup", func(st store.Store, _ func() string) (any, error) {
				return st.TaskCleanup(ctx, store.TaskCleanupParams{Now: now, Limit: limit})
			})
		case r < 92: // drain a worker (only w4: the others keep working)
			id := w.pick([]string{"w4", "w5"})
			w.both("worker stop", func(st store.Store, _ func() string) (any, error) { return st.WorkerStop(ctx, id, now) })
		default: // reads
			w.both("stats", func(st store.Store, _ func() string) (any, error) { return st.Stats(ctx, now) })
			w.both("workers", func(st store.Store, _ func() string) (any, error) { return st.WorkerList(ctx, now) })
			w.both("kinds", func(st store.Store, _ func() string) (any, error) { return st.KindList(ctx) })
			kinds := w.subset(w.kinds)
			w.both("next run at", func(st store.Store, _ func() string) (any, error) {
				at, ok, err := st.TaskNextRunAt(ctx, kinds, now)
				return []any{at, ok}, err
			})
			w.both("next expiry", func(st store.Store, _ func() string) (any, error) {
				at, ok, err := st.RunNextExpiry(ctx)
				return []any{at, ok}, err
			})
			lp := store.TaskListParams{Limit: 1 + w.rng.IntN(10)}
			if w.rng.IntN(2) == 0 {
				lp.Status = rota.Statuses()[w.rng.IntN(5)]
			}
			if w.rng.IntN(2) == 0 {
				lp.Kind = w.pick(w.kinds)
			}
			if w.rng.IntN(3) == 0 {
				lp.Key = w.pick(w.keys)
			}
			if len(w.tasks) > 0 && w.rng.IntN(2) == 0 {
				lp.Cursor = w.pick(w.tasks)
			}
			w.both("list", func(st store.Store, _ func() string) (any, error) { return st.TaskList(ctx, lp) })
		}
	}
	for _, id := range slices.Sorted(slices.Values(w.tasks)) {
		w.both("final get "+id, func(st store.Store, _ func() string) (any, error) { return st.TaskGet(ctx, id) })
	}
}

// lastSeen reports whether p leads to a worker's LastSeen.
func lastSeen(p cmp.Path) bool { return p.Last().String() == ".LastSeen" }
