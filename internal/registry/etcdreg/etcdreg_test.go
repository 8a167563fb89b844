package etcdreg_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/leadership"
	"github.com/rotahq/rota/internal/registry/etcdreg"
	"github.com/rotahq/rota/internal/registry/etcdreg/etcdtest"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	cfg, err := etcdreg.ParseURL("etcd://u:secret@10.0.0.1:2379,10.0.0.2:2379/team-a")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Endpoints, " ") != "10.0.0.1:2379 10.0.0.2:2379" || cfg.Username != "u" ||
		cfg.Password != "secret" || cfg.Prefix != "/team-a/" {
		t.Fatalf("ParseURL = %+v", cfg)
	}
	if cfg, err := etcdreg.ParseURL("etcd://h:2379/p?worker_ttl=5s"); err != nil || cfg.WorkerTTL != 5*time.Second {
		t.Fatalf("ParseURL with worker_ttl = %+v, %v", cfg, err)
	}
	for _, bad := range []string{"http://h:2379", "etcd://", "etcd://%zz", "etcd://h:2379?worker_ttl=0s",
		"etcd://h:2379?worker_ttl=x", "etcd://h:2379?ttl=5s"} {
		if _, err := etcdreg.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted", bad)
		}
	}
	if got := etcdreg.Redact("etcd://u:secret@h:2379"); strings.Contains(got, "secret") {
		t.Fatalf("Redact kept the password: %s", got)
	}
}

// newStore is a SQLite store in a temp dir: the task store the nodes
// share (one instance stands for a shared database).
func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func open(t *testing.T, endpoint, prefix string) *etcdreg.Registry {
	t.Helper()
	cfg, err := etcdreg.ParseURL(etcdtest.URL(endpoint, prefix))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LeaseTTL = 2 * time.Second
	r, err := etcdreg.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func elect(t *testing.T, st store.Store, node string) store.LeaderElectResult {
	t.Helper()
	res, err := st.LeaderAttemptElect(context.Background(), store.LeaderElectParams{NodeID: node, TTL: 2 * time.Second, Now: time.Now()})
	if err != nil {
		t.Fatalf("elect %s: %v", node, err)
	}
	return res
}

// A killed leader's etcd lease ends, the other node takes over with a
// larger term, and the store refuses the old leader's fenced writes.
func TestTakeoverAfterCrashFencesTheOldLeader(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	st := newStore(t)
	ra, rb := open(t, ep, "crash"), open(t, ep, "crash")
	defer rb.Close()
	a, b := ra.Wrap(st), rb.Wrap(st)

	ea := elect(t, a, "a")
	if !ea.Leader || ea.LeaderID != "a" || ea.Term < 1 {
		t.Fatalf("a = %+v, want a leading", ea)
	}
	if eb := elect(t, b, "b"); eb.Leader || eb.LeaderID != "a" {
		t.Fatalf("b while a leads = %+v", eb)
	}
	ctx := context.Background()
	if _, err := st.RunExpire(ctx, store.RunExpireParams{Now: time.Now(), Limit: 10, Term: ea.Term}); err != nil {
		t.Fatalf("a's fenced write in its own term: %v", err)
	}
	if err := ra.Abandon(); err != nil {
		t.Fatal(err)
	}
	var eb store.LeaderElectResult
	deadline := time.Now().Add(10 * time.Second)
	for eb = elect(t, b, "b"); !eb.Leader && time.Now().Before(deadline); eb = elect(t, b, "b") {
		time.Sleep(100 * time.Millisecond)
	}
	if !eb.Leader || eb.Term <= ea.Term {
		t.Fatalf("b after a's crash = %+v, want b leading in a term above %d", eb, ea.Term)
	}
	_, err := st.RunExpire(ctx, store.RunExpireParams{Now: time.Now(), Limit: 10, Term: ea.Term})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed a's fenced write = %v, want store.ErrFenced", err)
	}
}

// Nodes list with the leader marked; a resign hands over at once; a
// removed node leaves the list; prefixes keep clusters apart.
func TestNodesResignAndPrefixes(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	st := newStore(t)
	ra, rb, rother := open(t, ep, "one"), open(t, ep, "one"), open(t, ep, "two")
	defer ra.Close()
	defer rb.Close()
	defer rother.Close()
	a, b, other := ra.Wrap(st), rb.Wrap(st), rother.Wrap(newStore(t))
	ctx := context.Background()
	now := time.Now()
	for node, s := range map[string]store.Store{"a": a, "b": b, "x": other} {
		if err := s.NodeHeartbeat(ctx, store.NodeHeartbeatParams{NodeID: node, Address: node + ":8080", Version: "v1", StartedAt: now, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	ea := elect(t, a, "a")
	nodes, err := b.NodeList(ctx, now, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].ID != "a" || !nodes[0].Leader || nodes[1].ID != "b" || nodes[1].Leader ||
		nodes[0].Address != "a:8080" || !nodes[0].StartedAt.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("nodes of cluster one = %+v", nodes)
	}
	if err := a.LeaderResign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if eb := elect(t, b, "b"); !eb.Leader || eb.Term <= ea.Term {
		t.Fatalf("b right after a resigned = %+v, want b leading above term %d", eb, ea.Term)
	}
	if err := a.NodeRemove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	nodes, err = b.NodeList(ctx, now, 15*time.Second)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "b" || !nodes[0].Leader {
		t.Fatalf("nodes after a left = %+v, %v", nodes, err)
	}
	if ox := elect(t, other, "x"); !ox.Leader {
		t.Fatalf("x in its own prefix = %+v, want leading", ox)
	}
}

// The elector runs unchanged on the registry: one of two nodes leads, and
// when it stops the other takes over at once.
func TestElectorsOnTheRegistry(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	st := newStore(t)
	ra, rb := open(t, ep, "el"), open(t, ep, "el")
	defer ra.Close()
	defer rb.Close()
	ctx := context.Background()
	ea, err := leadership.New(leadership.Config{Store: ra.Wrap(st), NodeID: "a", TTL: 2 * time.Second, Tick: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eb, err := leadership.New(leadership.Config{Store: rb.Wrap(st), NodeID: "b", TTL: 2 * time.Second, Tick: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := ea.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eb.Stop(ctx)
	ta, leads := ea.Leading()
	if !leads {
		t.Fatal("a, started first, does not lead")
	}
	ea.Stop(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		tb, ok := eb.Leading()
		if ok {
			if tb <= ta {
				t.Fatalf("b leads in term %d, not above a's %d", tb, ta)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("b did not take over within 5 s of a's stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An unreachable etcd fails Open within its dial timeout.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := etcdreg.Open(context.Background(), etcdreg.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Open of a closed port = %v, want an error naming it", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Open took %v", d)
	}
}
