package pgstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// Several stores on one schema stand for several nodes: each has its own
// pool, so their transactions race in the database as nodes' would.

// deadlocks returns the deadlocks PostgreSQL detected in the database so far.
func deadlocks(t *testing.T) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(t.Context(), `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestKeyedInsertAcrossStores(t *testing.T) {
	// Several nodes insert the same kind+key at once: exactly one task.
	t.Parallel()
	schema := newSchema(t)
	stores := []store.Store{openSchema(t, schema, "a"), openSchema(t, schema, "b"), openSchema(t, schema, "c")}
	f := storetest.NewFixture(t, stores[0])
	for round := range 5 {
		key := fmt.Sprintf("key-%d", round)
		const n = 24
		results := make([]store.TaskInsertResult, n)
		errs := make([]error, n)
		ps := make([]store.TaskInsertParams, n)
		for i := range ps {
			ps[i] = f.Params("k", f.At(time.Duration(round)*time.Second))
			ps[i].Key = key
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i], errs[i] = stores[i%len(stores)].TaskInsert(t.Context(), ps[i]) })
		}
		wg.Wait()
		created, id := 0, ""
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("insert %d: %v", i, errs[i])
			}
			if !results[i].Existing {
				created++
			}
			if id == "" {
				id = results[i].Task.ID
			}
			if results[i].Task.ID != id {
				t.Fatalf("key %s: tasks %s and %s", key, id, results[i].Task.ID)
			}
		}
		if created != 1 {
			t.Fatalf("key %s: %d inserts created a task, want 1", key, created)
		}
	}
}

func TestKeyedBatchesAcrossStores(t *testing.T) {
	// Batches sharing keys, given in opposite orders on two nodes: one task
	// per key, no deadlock.
	t.Parallel()
	before := deadlocks(t)
	schema := newSchema(t)
	a, b := openSchema(t, schema, "a"), openSchema(t, schema, "b")
	f := storetest.NewFixture(t, a)
	for round := range 10 {
		var pa, pb []store.TaskInsertParams
		for i := range 8 {
			p := f.Params("k", f.At(time.Duration(round)*time.Second))
			p.Key = fmt.Sprintf("r%d-key%d", round, i)
			pa = append(pa, p)
			q := f.Params("k", f.At(time.Duration(round)*time.Second))
			q.Key = p.Key
			pb = append([]store.TaskInsertParams{q}, pb...)
		}
		var ra, rb []store.TaskInsertResult
		var ea, eb error
		var wg sync.WaitGroup
		wg.Go(func() { ra, ea = a.TaskInsertMany(t.Context(), pa) })
		wg.Go(func() { rb, eb = b.TaskInsertMany(t.Context(), pb) })
		wg.Wait()
		if ea != nil || eb != nil {
			t.Fatalf("round %d: %v / %v", round, ea, eb)
		}
		for i := range pa {
			x, y := ra[i], rb[len(pb)-1-i]
			if x.Task.ID != y.Task.ID || x.Existing == y.Existing {
				t.Fatalf("round %d key %s: a got %s (existing %v), b got %s (existing %v)", round, pa[i].Key,
					x.Task.ID, x.Existing, y.Task.ID, y.Existing)
			}
		}
	}
	if after := deadlocks(t); after != before {
		t.Errorf("PostgreSQL detected %d deadlocks during the test", after-before)
	}
}

func TestClaimAcrossStores(t *testing.T) {
	// Workers on three nodes claim two kinds in opposite orders, with
	// heartbeats, reports and the reaper interleaved: every task runs
	// exactly once, the store stays consistent and PostgreSQL detects no
	// deadlock.
	t.Parallel()
	before := deadlocks(t)
	schema := newSchema(t)
	stores := []store.Store{openSchema(t, schema, "a"), openSchema(t, schema, "b"), openSchema(t, schema, "c")}
	f := storetest.NewFixture(t, stores[0])
	const perKind = 150
	var all []store.TaskInsertParams
	for _, kind := range []string{"x", "y"} {
		for i := range perKind {
			p := f.Params(kind, f.At(time.Duration(i)*time.Millisecond))
			p.Priority = rota.Priorities()[i%3]
			all = append(all, p)
		}
	}
	if _, err := stores[1].TaskInsertMany(t.Context(), all); err != nil {
		t.Fatal(err)
	}
	now := f.At(time.Minute)
	var mu sync.Mutex
	ran := map[string]int{}
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for w := range 9 {
		st := stores[w%len(stores)]
		kinds := []string{"x", "y"}
		if w%2 == 1 {
			kinds = []string{"y", "x"}
		}
		worker := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				res, err := st.TaskClaim(t.Context(), store.TaskClaimParams{WorkerID: worker, Kinds: kinds, Max: 1 + w%4, Now: now, NewRunID: f.NewRunID})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", worker, err)
					return
				}
				if len(res.Runs) == 0 {
					return
				}
				for _, r := range res.Runs {
					mu.Lock()
					ran[r.TaskID]++
					mu.Unlock()
					if _, err := st.RunHeartbeat(t.Context(), store.RunHeartbeatParams{RunID: r.RunID, WorkerID: worker, Now: now}); err != nil {
						errs <- fmt.Errorf("%s: heartbeat: %w", worker, err)
						return
					}
					if _, err := st.RunComplete(t.Context(), store.RunCompleteParams{RunID: r.RunID, WorkerID: worker, Success: true, Now: now}); err != nil {
						errs <- fmt.Errorf("%s: complete: %w", worker, err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := stores[2].RunExpire(t.Context(), store.RunExpireParams{Now: now, Limit: 50}); err != nil {
				errs <- fmt.Errorf("expire: %w", err)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, p := range all {
		if ran[p.ID] != 1 {
			t.Errorf("task %s ran %d times, want 1", p.ID, ran[p.ID])
		}
	}
	if err := stores[0].(*pgstore.Store).Check(t.Context()); err != nil {
		t.Errorf("store inconsistent: %v", err)
	}
	if after := deadlocks(t); after != before {
		t.Errorf("PostgreSQL detected %d deadlocks during the test", after-before)
	}
}

func TestConcurrentElectionAcrossStores(t *testing.T) {
	// Candidates on separate pools: exactly one wins each contested term.
	t.Parallel()
	schema := newSchema(t)
	var stores []store.Store
	for i := range 6 {
		stores = append(stores, openSchema(t, schema, fmt.Sprintf("n%d", i)))
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 10 {
		now := base.Add(time.Duration(round) * time.Minute) // every lease of the last round has passed
		results := make([]store.LeaderElectResult, len(stores))
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i, st := range stores {
			wg.Go(func() {
				results[i], errs[i] = st.LeaderAttemptElect(t.Context(), store.LeaderElectParams{NodeID: fmt.Sprintf("n%d", i), TTL: 30 * time.Second, Now: now})
			})
		}
		wg.Wait()
		leaders := 0
		for i := range stores {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if results[i].Leader {
				leaders++
			}
			if results[i].Term != results[0].Term || results[i].LeaderID != results[0].LeaderID {
				t.Fatalf("round %d: node %d sees %+v, node 0 sees %+v", round, i, results[i], results[0])
			}
		}
		if leaders != 1 || results[0].Term != int64(round+1) {
			t.Fatalf("round %d: %d leaders in term %d, want 1 in term %d", round, leaders, results[0].Term, round+1)
		}
	}
}

// TestClusterMatchesSQLite runs one script of leader and node calls on
// pgstore and sqlitestore and compares every answer.
func TestClusterMatchesSQLite(t *testing.T) {
	t.Parallel()
	lite, err := sqlitestore.New(t.Context(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg := open(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		name string
		run  func(st store.Store) (any, error)
	}
	elect := func(node string, ttl, now float64) step {
		return step{fmt.Sprintf("elect %s ttl %v at %v", node, ttl, now), func(st store.Store) (any, error) {
			return st.LeaderAttemptElect(t.Context(), store.LeaderElectParams{NodeID: node, TTL: time.Duration(ttl * float64(time.Second)), Now: at(now)})
		}}
	}
	resign := func(node string) step {
		return step{"resign " + node, func(st store.Store) (any, error) { return nil, st.LeaderResign(t.Context(), node) }}
	}
	beat := func(node string, started, now float64) step {
		return step{fmt.Sprintf("heartbeat %s at %v", node, now), func(st store.Store) (any, error) {
			return nil, st.NodeHeartbeat(t.Context(), store.NodeHeartbeatParams{NodeID: node, Address: node + ":8080", Version: "v1", StartedAt: at(started), Now: at(now)})
		}}
	}
	list := func(now, live float64) step {
		return step{fmt.Sprintf("list at %v within %v", now, live), func(st store.Store) (any, error) {
			return st.NodeList(t.Context(), at(now), time.Duration(live*float64(time.Second)))
		}}
	}
	remove := func(node string) step {
		return step{"remove " + node, func(st store.Store) (any, error) { return nil, st.NodeRemove(t.Context(), node) }}
	}
	script := []step{
		resign("a"), list(0, 10),
		elect("a", 10, 0), elect("b", 10, 5), elect("a", 10, 8), elect("b", 10, 17.999), elect("b", 10, 18),
		elect("a", 10, 19), elect("b", 10, 27.5), elect("b", 10, 38), elect("b", 10, 37), resign("a"), elect("a", 10, 38),
		resign("b"), elect("a", 10, 38.001), elect("a", 0, 39), elect("b", 5, 39), elect("a", 5, 39.5),
		beat("n1", 0, 0), beat("n2", 0, 1), beat("a", 0, 39), list(5, 10), list(10.5, 10), list(39.5, 1),
		beat("n1", 0, 20), list(21, 10), remove("n2"), remove("nope"), list(21, 100), beat("b", 0, 39), list(40, 2),
	}
	for _, s := range script {
		want, wantErr := s.run(lite)
		got, gotErr := s.run(pg)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s: sqlite err %v, pg err %v", s.name, wantErr, gotErr)
		}
		if fmt.Sprintf("%+v", want) != fmt.Sprintf("%+v", got) {
			t.Fatalf("%s:\nsqlite %+v\npg     %+v", s.name, want, got)
		}
	}
}
