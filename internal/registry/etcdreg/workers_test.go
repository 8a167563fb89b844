package etcdreg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/registry/etcdreg"
	"github.com/rotahq/rota/internal/registry/etcdreg/etcdtest"
	"github.com/rotahq/rota/internal/store"
)

// node is one Rota node on the registry: its registry and wrapped store.
type node struct {
	reg *etcdreg.Registry
	st  store.Store
}

// openNode opens a registry as node id on st, with workerTTL (0: the
// default), closed when the test ends.
func openNode(t *testing.T, ep, prefix, id string, st store.Store, workerTTL time.Duration) node {
	t.Helper()
	n, _ := openCounted(t, ep, prefix, id, st, workerTTL)
	return n
}

// openCounted is openNode counting the registry's etcd requests.
func openCounted(t *testing.T, ep, prefix, id string, st store.Store, workerTTL time.Duration) (node, *etcdreg.Requests) {
	t.Helper()
	cfg, err := etcdreg.ParseURL(etcdtest.URL(ep, prefix))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LeaseTTL, cfg.NodeID, cfg.WorkerTTL = 2*time.Second, id, workerTTL
	cfg, reqs := etcdreg.CountRequests(cfg)
	r, err := etcdreg.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return node{reg: r, st: r.Wrap(st)}, reqs
}

var runIDs rota.IDGenerator

// claim claims up to max tasks of kind for worker through n at now.
func claim(t *testing.T, n node, worker string, max int, now time.Time, kind string) store.TaskClaimResult {
	t.Helper()
	res, err := tryClaim(n, worker, max, now, kind)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tryClaim is claim for goroutines other than the test's.
func tryClaim(n node, worker string, max int, now time.Time, kind string) (store.TaskClaimResult, error) {
	res, err := n.st.TaskClaim(context.Background(), store.TaskClaimParams{
		WorkerID: worker, WorkerAddress: "host-" + worker, Kinds: []string{kind}, Max: max, Now: now,
		NewRunID: func() string { return runIDs.New(now) },
	})
	if err != nil {
		return res, fmt.Errorf("claim for %s: %w", worker, err)
	}
	return res, nil
}

// workerOf returns worker id as n lists it at now (ok false: not listed).
func workerOf(t *testing.T, n node, id string, now time.Time) (rota.Worker, bool) {
	t.Helper()
	ws, err := n.st.WorkerList(context.Background(), now)
	if err != nil {
		t.Fatalf("WorkerList: %v", err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w, true
		}
	}
	return rota.Worker{}, false
}

// waitFor polls cond every 20 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// etcdRecords returns the live records of worker id in etcd, by node.
func etcdRecords(t *testing.T, r *etcdreg.Registry, prefix, id string) map[string]map[string]any {
	t.Helper()
	resp, err := r.Client().Get(context.Background(), "/"+prefix+"/workers/"+id+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, kv := range resp.Kvs {
		var v map[string]any
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			t.Fatal(err)
		}
		out[v["node"].(string)] = v
	}
	return out
}

// A worker seen through node A is listed by node B from etcd alone: B's
// store (a database of its own here) has never heard of it.
func TestWorkerSeenThroughAListedByB(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	a := openNode(t, ep, "seen", "a", newStore(t), 0)
	b := openNode(t, ep, "seen", "b", newStore(t), 0)
	now := time.Now()
	claim(t, a, "w1", 1, now, "k1")
	claim(t, a, "w1", 1, now.Add(time.Millisecond), "k2")
	var got rota.Worker
	waitFor(t, 5*time.Second, "b lists w1 with both kinds", func() bool {
		got, _ = workerOf(t, b, "w1", time.Now())
		return len(got.Kinds) == 2
	})
	if got.Status != rota.WorkerActive || got.Address != "host-w1" || !slices.Equal(got.Kinds, []string{"k1", "k2"}) ||
		got.LastSeen.Before(now.Truncate(time.Millisecond)) {
		t.Fatalf("w1 as b lists it = %+v, want active at host-w1 with kinds k1 k2", got)
	}
	if stored, err := b.reg.Wrap(newStore(t)).WorkerList(context.Background(), now); err != nil || len(stored) != 1 {
		t.Fatalf("a third node's listing = %+v, %v; want w1 from etcd", stored, err)
	}
	if recs := etcdRecords(t, a.reg, "seen", "w1"); len(recs) != 1 || recs["a"] == nil {
		t.Fatalf("etcd records of w1 = %v, want one written by node a", recs)
	}
	page, err := b.st.WorkerListPage(context.Background(), store.WorkerListParams{Kind: "k2", Status: rota.WorkerActive, Now: time.Now()})
	if err != nil || len(page.Workers) != 1 || page.Workers[0].ID != "w1" {
		t.Fatalf("b's page of active k2 workers = %+v, %v", page, err)
	}
}

// A worker that stops polling leaves etcd when its lease ends (well
// before store.WorkerLiveness): lost on a node sharing its store row,
// gone from a node that only knew it from etcd. One that keeps polling
// stays.
func TestSilentWorkerVanishes(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	shared := newStore(t)
	a := openNode(t, ep, "silent", "a", shared, time.Second)
	b := openNode(t, ep, "silent", "b", shared, time.Second)
	c := openNode(t, ep, "silent", "c", newStore(t), time.Second)
	start := time.Now()
	claim(t, a, "quiet", 1, start, "k")
	claim(t, a, "busy", 1, start, "k")
	waitFor(t, 5*time.Second, "c lists both", func() bool {
		_, q := workerOf(t, c, "quiet", time.Now())
		_, b := workerOf(t, c, "busy", time.Now())
		return q && b
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { // busy polls through b every 100 ms
		for ctx.Err() == nil {
			if _, err := tryClaim(b, "busy", 1, time.Now(), "k"); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	defer wg.Wait()
	defer cancel()
	waitFor(t, 10*time.Second, "quiet leaves c's listing", func() bool {
		_, ok := workerOf(t, c, "quiet", time.Now())
		return !ok
	})
	gone := time.Since(start)
	if w, _ := workerOf(t, b, "quiet", time.Now()); w.Status != rota.WorkerLost {
		t.Fatalf("quiet on b (store row, no live record) = %+v, want lost", w)
	}
	if w, ok := workerOf(t, c, "busy", time.Now()); !ok || w.Status != rota.WorkerActive {
		t.Fatalf("busy on c after %v = %+v (listed %v), want active", gone, w, ok)
	}
	if gone >= store.WorkerLiveness {
		t.Fatalf("quiet left after %v, not before store.WorkerLiveness", gone)
	}
	t.Logf("a worker silent since its claim left etcd after %v (worker TTL 1 s)", gone.Round(100*time.Millisecond))
}

// A worker stopped through node B is fenced on node A (the stop flag is
// the store's, checked by the claim), lists as stopped on both once its
// run ends, and a deregistration through B removes its live records.
func TestStoppedWorkerFencedAcrossNodes(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	shared := newStore(t)
	a := openNode(t, ep, "stop", "a", shared, 0)
	b := openNode(t, ep, "stop", "b", shared, 0)
	ctx := context.Background()
	now := time.Now()
	for range 3 {
		p := store.TaskInsertParams{ID: runIDs.New(now), Kind: "k", Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
			RunAt: now, MaxRetries: 1, HeartbeatTimeoutSeconds: 60, Workers: 1, Now: now}
		if _, err := shared.TaskInsert(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got := claim(t, a, "w", 1, now, "k")
	if len(got.Runs) != 1 {
		t.Fatalf("first claim = %+v, want a run", got)
	}
	if _, err := b.st.WorkerStop(ctx, "w", now); err != nil {
		t.Fatal(err)
	}
	if res := claim(t, a, "w", 1, now.Add(time.Second), "k"); len(res.Runs) != 0 || !res.Drain {
		t.Fatalf("claim through a after the stop through b = %+v, want nothing and drain", res)
	}
	if _, err := a.st.RunComplete(ctx, store.RunCompleteParams{RunID: got.Runs[0].RunID, WorkerID: "w", Success: true,
		Now: now.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]node{"a": a, "b": b} {
		if w, _ := workerOf(t, n, "w", now.Add(3*time.Second)); w.Status != rota.WorkerStopped || !w.StopRequested {
			t.Fatalf("w on %s = %+v, want stopped", name, w)
		}
	}
	waitFor(t, 5*time.Second, "w's record in etcd", func() bool { return len(etcdRecords(t, a.reg, "stop", "w")) == 1 })
	if _, err := b.st.WorkerDeregister(ctx, "w", now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if recs := etcdRecords(t, a.reg, "stop", "w"); len(recs) != 0 {
		t.Fatalf("w's records after its deregistration = %v", recs)
	}
}

// A push worker registered through node A is seen by the leader's push
// loop on node B (PushWorkerList), with its registration from etcd.
func TestPushRegistrationSeenByLeaderOnOtherNode(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	shared := newStore(t)
	a := openNode(t, ep, "push", "a", shared, 0)
	b := openNode(t, ep, "push", "b", shared, 0)
	if res := elect(t, b.st, "b"); !res.Leader {
		t.Fatalf("b = %+v, want leading", res)
	}
	ctx := context.Background()
	now := time.Now()
	if _, err := a.st.WorkerRegister(ctx, store.WorkerRegisterParams{WorkerID: "p1", Kinds: []string{"k"},
		Address: "http://p1.example/", Capacity: 4, Now: now}); err != nil {
		t.Fatal(err)
	}
	ws, err := b.st.PushWorkerList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.PushWorker{{WorkerID: "p1", Address: "http://p1.example/", Kinds: []string{"k"}, Capacity: 4,
		RegisteredAt: now.Truncate(time.Millisecond).UTC()}}
	if fmt.Sprint(ws) != fmt.Sprint(want) {
		t.Fatalf("b's push workers = %+v, want %+v", ws, want)
	}
	resp, err := b.reg.Client().Get(ctx, "/push/push/p1")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd registration of p1 = %v, %v", resp, err)
	}
	waitFor(t, 5*time.Second, "b lists p1 from etcd", func() bool {
		w, _ := workerOf(t, b, "p1", time.Now())
		return w.Capacity == 4 && w.Status == rota.WorkerActive
	})
}

// A busy worker costs a bounded number of etcd requests: its sightings
// are written at most once a second, and the workers of a node together
// in one transaction, however often they claim.
func TestBusyWorkersEtcdRequests(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	a, reqs := openCounted(t, ep, "busy", "a", newStore(t), 0)
	const workers, span = 20, 3 * time.Second
	var claims sync.WaitGroup
	var mu sync.Mutex
	total := 0
	start := time.Now()
	for i := range workers {
		claims.Go(func() {
			// Claim for span, and on until this worker has claimed at
			// least twice as often as the bound below lets its record be
			// written: a slow machine still shows the amortization.
			n := 0
			for since := time.Duration(0); since < span || n < 2*(int(since/time.Second)+2); since = time.Since(start) {
				if since > 10*span {
					t.Errorf("w%d: %d claims in %v", i, n, since)
					return
				}
				if _, err := tryClaim(a, fmt.Sprintf("w%d", i), 1, time.Now(), "k"); err != nil {
					t.Error(err)
					return
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	claims.Wait()
	elapsed := time.Since(start)
	got := reqs.Snapshot()
	t.Logf("%d workers, %d claims in %v: etcd requests %v", workers, total, elapsed.Round(time.Millisecond), got)
	// Each worker's record is written when new, then at most once a
	// second; the flush loop runs at most four times a second, each flush
	// one transaction; one lease per leaseReuse (5 s).
	secs := int(elapsed/time.Second) + 1
	if got["txn_ops"] > workers*(secs+1) || got["txn"] > 4*secs+2 || got["grant"] > 2 ||
		got["txn"]+got["grant"] != got["requests"] {
		t.Fatalf("etcd requests %v for %d claims in %v; want at most %d record writes in %d txns, 2 grants, nothing else",
			got, total, elapsed, workers*(secs+1), 4*secs+2)
	}
	if total < 2*got["txn_ops"] {
		t.Fatalf("%d claims cost %d record writes: not amortized", total, got["txn_ops"])
	}
	waitFor(t, 3*time.Second, "every worker in etcd", func() bool {
		ws, err := a.st.WorkerList(context.Background(), time.Now())
		return err == nil && len(ws) == workers
	})
}

// WorkerListPage pages the merged listing by id, live-only workers (from
// etcd, unknown to this node's store) included.
func TestWorkerPagesMerged(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	a := openNode(t, ep, "pages", "a", newStore(t), 0)
	b := openNode(t, ep, "pages", "b", newStore(t), 0)
	now := time.Now()
	claim(t, a, "w1", 1, now, "k")
	claim(t, b, "w2", 1, now, "k")
	claim(t, a, "w3", 1, now, "other")
	waitFor(t, 5*time.Second, "b lists three workers", func() bool {
		ws, err := b.st.WorkerList(context.Background(), time.Now())
		return err == nil && len(ws) == 3
	})
	ctx := context.Background()
	p1, err := b.st.WorkerListPage(ctx, store.WorkerListParams{Limit: 2, Now: time.Now()})
	if err != nil || len(p1.Workers) != 2 || p1.Workers[0].ID != "w1" || p1.Workers[1].ID != "w2" || p1.NextCursor != "w2" {
		t.Fatalf("first page = %+v, %v", p1, err)
	}
	p2, err := b.st.WorkerListPage(ctx, store.WorkerListParams{Limit: 2, Cursor: p1.NextCursor, Now: time.Now()})
	if err != nil || len(p2.Workers) != 1 || p2.Workers[0].ID != "w3" || p2.NextCursor != "" {
		t.Fatalf("second page = %+v, %v", p2, err)
	}
	k, err := b.st.WorkerListPage(ctx, store.WorkerListParams{Kind: "k", Status: rota.WorkerActive, Now: time.Now()})
	if err != nil || len(k.Workers) != 2 {
		t.Fatalf("active workers of kind k = %+v, %v", k, err)
	}
	lost, err := b.st.WorkerListPage(ctx, store.WorkerListParams{Status: rota.WorkerLost, Now: time.Now()})
	if err != nil || len(lost.Workers) != 0 {
		t.Fatalf("lost workers = %+v, %v", lost, err)
	}
}
