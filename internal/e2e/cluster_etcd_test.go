package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rotahq/rota/internal/registry/etcdreg/etcdtest"
)

// The leader and cluster tests again with membership and election in an
// embedded etcd (--registry), tasks in PostgreSQL.

func TestLeaderKilledHandsOverEtcd(t *testing.T) {
	t.Parallel()
	schema, reg := clusterDBs()["postgres"](t), etcdtest.URL(etcdtest.Start(t), "")
	leaderKilledHandsOver(t, func(id string) *clusterNode { return startNode(t, schema, id, "--registry", reg) })
}

func TestClusterThreeNodesEtcd(t *testing.T) {
	t.Parallel()
	schema, reg := clusterDBs()["postgres"](t), etcdtest.URL(etcdtest.Start(t), "")
	clusterThreeNodes(t, func(id string) *clusterNode { return startNode(t, schema, id, "--registry", reg) })
}

// The live worker registry is etcd's: every node lists the workers of
// every other node; each node wrote the records of its own workers; and
// the listing stands while the store holds no worker row at all.
func TestWorkersListedFromEtcd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep := etcdtest.Start(t)
	db, reg := clusterDBs()["postgres"](t), etcdtest.URL(ep, "wr")
	nodes := []*clusterNode{startNode(t, db, "e1", "--registry", reg), startNode(t, db, "e2", "--registry", reg),
		startNode(t, db, "e3", "--registry", reg)}
	want := map[string]string{} // worker → the node it talks to
	for i, n := range nodes {
		id := fmt.Sprintf("ew-%d", i+1)
		want[id] = n.id
		startWorker(t, "http://"+n.addr, id, "reg", 1, "sh", "-c", "cat >/dev/null; echo ok")
	}
	for _, n := range nodes {
		waitUntil(t, 30*time.Second, "node "+n.id+" lists every worker active", func() bool {
			return slices.Equal(activeWorkers(t, ctx, n), []string{"ew-1", "ew-2", "ew-3"})
		})
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/wr/workers/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		var v struct{ ID, Node string }
		if err := json.Unmarshal(kv.Value, &v); err != nil || kv.Lease == 0 {
			t.Fatalf("record %s = %s (lease %d): %v", kv.Key, kv.Value, kv.Lease, err)
		}
		got[v.ID] = v.Node
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("etcd's worker records (worker → node) = %v, want %v", got, want)
	}
	listedWithoutStoreRows(t, ctx, db[3], nodes)
}

// listedWithoutStoreRows deletes the store's worker rows and checks that
// every node still lists every worker, the table empty before and after
// the listings (an idle worker's next claim, which writes its row again,
// may come in between: then it tries again).
func listedWithoutStoreRows(t *testing.T, ctx context.Context, schema string, nodes []*clusterNode) {
	conn, err := pgx.Connect(ctx, postgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := func() int {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".workers").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for attempt := 1; attempt <= 10; attempt++ {
		if _, err := conn.Exec(ctx, "DELETE FROM "+schema+".workers"); err != nil {
			t.Fatal(err)
		}
		var listed [][]string
		for _, n := range nodes {
			listed = append(listed, activeWorkers(t, ctx, n))
		}
		if rows() != 0 {
			continue // a claim wrote its row meanwhile
		}
		for i, ws := range listed {
			if !slices.Equal(ws, []string{"ew-1", "ew-2", "ew-3"}) {
				t.Fatalf("node %s without worker rows in the store lists %v, want ew-1 ew-2 ew-3 active", nodes[i].id, ws)
			}
		}
		return
	}
	t.Fatal("the workers' claims wrote their rows again before each of 10 listings")
}

// activeWorkers returns the ids of the workers node n lists as active.
func activeWorkers(t *testing.T, ctx context.Context, n *clusterNode) []string {
	t.Helper()
	var out struct {
		Workers []struct {
			WorkerID string `json:"worker_id"`
			Status   string `json:"status"`
		} `json:"workers"`
	}
	if code, env, err := call(ctx, "GET", "http://"+n.addr+"/api/workers", nil, &out); err != nil || code != 200 {
		t.Fatalf("GET /api/workers on %s: %d %v %s", n.id, code, err, env.Message)
	}
	var ids []string
	for _, w := range out.Workers {
		if w.Status == "active" {
			ids = append(ids, w.WorkerID)
		}
	}
	slices.Sort(ids)
	return ids
}

// waitUntil polls cond every 100 ms until it holds, or fails the test
// after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
