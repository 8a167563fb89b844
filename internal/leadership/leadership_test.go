package leadership

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mongostore"
	"github.com/rotahq/rota/internal/store/mongostore/mongotest"
	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/mysqlstore/mysqltest"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/redisstore/redistest"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// election loop must end at Stop or when its context ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(stopMongo{m})
}

// stopMongo stops the test MongoDB server (an embedded FerretDB) once the
// tests ran, before the leak check.
type stopMongo struct{ m *testing.M }

func (s stopMongo) Run() int {
	defer mongotest.Stop()
	return s.m.Run()
}

const ttl = 8 * time.Second // tick 2 s: Leading holds until 4 s after a round

// backends opens a fresh, shared-by-the-test store of each backend:
// SQLite always, PostgreSQL from ROTA_TEST_POSTGRES, MySQL/MariaDB from
// ROTA_TEST_MYSQL and Redis from ROTA_TEST_REDIS (all required, as in CI).
func backends(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": openPostgres,
		"mysql":    openMySQL,
		"redis":    func(t *testing.T) store.Store { return redistest.Open(t) },
		"mongodb":  openMongo,
	}
}

// openMySQL opens a store in a database of its own, dropped at the end
// (ROTA_TEST_MYSQL, the local MariaDB by default).
func openMySQL(t *testing.T) store.Store {
	t.Helper()
	db := mysqltest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := mysqlstore.New(ctx, mysqlstore.Config{URL: mysqltest.URL(), Database: db, NodeID: "test"})
	if err != nil {
		t.Fatalf("MySQL (set ROTA_TEST_MYSQL to a reachable one): %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func postgresURL() string {
	if u := os.Getenv("ROTA_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// openPostgres opens a store in a schema of its own, dropped at the end.
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "rota_lead_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.New(ctx, pgstore.Config{URL: postgresURL(), Schema: schema, NodeID: "test"})
	if err != nil {
		t.Fatalf("PostgreSQL (set ROTA_TEST_POSTGRES to a reachable one): %v", err)
	}
	t.Cleanup(func() {
		st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, postgresURL())
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return st
}

// openMongo opens a store in a database of its own (ROTA_TEST_MONGODB, or
// an embedded FerretDB), dropped at the end.
func openMongo(t *testing.T) store.Store {
	t.Helper()
	st, err := mongostore.New(context.Background(), mongostore.Config{URL: mongotest.DB(t), NodeID: "test"})
	if err != nil {
		t.Fatalf("MongoDB: %v", err)
	}
	t.Cleanup(func() {
		_ = st.Drop(context.Background())
		st.Close()
	})
	return st
}

// each runs fn as a parallel subtest per backend.
func each(t *testing.T, fn func(t *testing.T, st store.Store)) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open(t))
		})
	}
}

// node is an elector under test with the hook calls it saw.
type node struct {
	*Elector
	mu      sync.Mutex
	changes []bool
}

func (n *node) seen() []bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]bool(nil), n.changes...)
}

func newNode(t *testing.T, st Store, c clock.Clock, id string) *node {
	t.Helper()
	e, err := New(Config{Store: st, NodeID: id, Version: "v-" + id, TTL: ttl, Clock: c,
		Address: func() string { return id + ":8080" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{Elector: e}
	e.OnChange(func(leader bool) {
		n.mu.Lock()
		n.changes = append(n.changes, leader)
		n.mu.Unlock()
	})
	return n
}

func newClock() *clock.Fake { return clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{NodeID: "a"}); err == nil {
		t.Error("New without a store succeeded")
	}
	if _, err := New(Config{Store: failingStore{}}); err == nil {
		t.Error("New without a node id succeeded")
	}
	if _, err := New(Config{Store: failingStore{}, NodeID: "a", TTL: time.Second, Tick: time.Second}); err == nil {
		t.Error("New with a tick of half the lease or more succeeded")
	}
	e, err := New(Config{Store: failingStore{}, NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if e.cfg.TTL != DefaultTTL || e.cfg.Tick != DefaultTTL/4 {
		t.Errorf("defaults: TTL %v, tick %v", e.cfg.TTL, e.cfg.Tick)
	}
	if term, leading := e.Leading(); leading || term != NoTerm {
		t.Errorf("before any round: Leading() = %d, %v; want NoTerm, false", term, leading)
	}
}

// A lone node leads from Start on, shows its address and version, and
// renews its lease each round with the same term.
func TestLoneNodeLeadsAndRenews(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, st store.Store) {
		c := newClock()
		a := newNode(t, st, c, "a")
		ctx := context.Background()
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer a.Stop(ctx)
		term, leading := a.Leading()
		if !leading || term < 1 {
			t.Fatalf("after Start: Leading() = %d, %v; want a term, true", term, leading)
		}
		nodes, err := st.NodeList(ctx, c.Now(), time.Minute)
		if err != nil || len(nodes) != 1 || nodes[0].ID != "a" || nodes[0].Version != "v-a" || nodes[0].Address != "a:8080" || !nodes[0].Leader {
			t.Fatalf("nodes = %+v, %v; want a, v-a, a:8080, leader", nodes, err)
		}
		// The loop renews: hours later, the same term still leads.
		for range 10 {
			waitTimer(t, c)
			c.Advance(a.cfg.Tick)
		}
		waitFor(t, "a renewal", func() bool {
			res, err := st.LeaderAttemptElect(ctx, store.LeaderElectParams{NodeID: "probe", TTL: ttl, Now: c.Now()})
			return err == nil && res.LeaderID == "a" && res.ExpiresAt.After(c.Now().Add(ttl-a.cfg.Tick-time.Millisecond))
		})
		if got, leading := a.Leading(); !leading || got != term {
			t.Fatalf("after renewals: Leading() = %d, %v; want %d, true", got, leading, term)
		}
		if got := a.seen(); len(got) != 1 || !got[0] {
			t.Fatalf("hooks saw %v, want [true]", got)
		}
	})
}

// A follower takes over after the leader dies (stops renewing), with a
// new term, and the dead leader's late writes are refused by the store.
func TestTakeOverFencesDeposedLeader(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, st store.Store) {
		c := newClock()
		ctx := context.Background()
		a, b := newNode(t, st, c, "a"), newNode(t, st, c, "b")
		a.runOnce(ctx)
		b.runOnce(ctx)
		aTerm, aLeads := a.Leading()
		if _, bLeads := b.Leading(); !aLeads || bLeads {
			t.Fatalf("a leads %v, b leads %v; want only a", aLeads, bLeads)
		}
		// a stalls (no rounds). Within its lease b waits.
		c.Advance(ttl - time.Millisecond)
		b.runOnce(ctx)
		if _, bLeads := b.Leading(); bLeads {
			t.Fatal("b leads before a's lease passed")
		}
		// a stopped acting two ticks before its lease ended.
		if _, aLeads := a.Leading(); aLeads {
			t.Fatal("a still acts as leader at the end of its lease")
		}
		c.Advance(time.Millisecond)
		b.runOnce(ctx)
		bTerm, bLeads := b.Leading()
		if !bLeads || bTerm <= aTerm {
			t.Fatalf("b after a's lease: Leading() = %d, %v; want a term after %d", bTerm, bLeads, aTerm)
		}
		// a's late leader-only write, under its term: refused.
		_, err := st.RunExpire(ctx, store.RunExpireParams{Now: c.Now(), Limit: 10, Term: aTerm})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("deposed leader's RunExpire: %v, want store.ErrFenced", err)
		}
		if _, err := st.TaskCleanup(ctx, store.TaskCleanupParams{Now: c.Now(), Limit: 10, Term: aTerm}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("deposed leader's TaskCleanup: %v, want store.ErrFenced", err)
		}
		if _, err := st.RunExpire(ctx, store.RunExpireParams{Now: c.Now(), Limit: 10, Term: bTerm}); err != nil {
			t.Fatalf("leader's RunExpire: %v", err)
		}
		// a wakes up: it learns it lost, keeps its own (old) term.
		a.runOnce(ctx)
		if term, leading := a.Leading(); leading || term != aTerm {
			t.Fatalf("a after waking: Leading() = %d, %v; want %d, false", term, leading, aTerm)
		}
		if got := a.seen(); len(got) != 2 || !got[0] || got[1] {
			t.Fatalf("a's hooks saw %v, want [true false]", got)
		}
		if got := b.seen(); len(got) != 1 || !got[0] {
			t.Fatalf("b's hooks saw %v, want [true]", got)
		}
	})
}

// Stop resigns: a follower takes over at once, and the stopped node leaves
// the node list.
func TestStopHandsOver(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, st store.Store) {
		c := newClock()
		ctx := context.Background()
		a, b := newNode(t, st, c, "a"), newNode(t, st, c, "b")
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer b.Stop(ctx)
		aTerm, _ := a.Leading()
		a.Stop(ctx)
		a.Stop(ctx) // idempotent
		if _, leading := a.Leading(); leading {
			t.Fatal("a leads after Stop")
		}
		if got := a.seen(); len(got) != 2 || got[1] {
			t.Fatalf("a's hooks saw %v, want [true false]", got)
		}
		b.runOnce(ctx) // no wait for a's lease
		if term, leading := b.Leading(); !leading || term <= aTerm {
			t.Fatalf("b after a resigned: Leading() = %d, %v; want a new term", term, leading)
		}
		nodes, err := st.NodeList(ctx, c.Now(), time.Minute)
		if err != nil || len(nodes) != 1 || nodes[0].ID != "b" {
			t.Fatalf("nodes = %+v, %v; want only b", nodes, err)
		}
		if err := a.Start(ctx); err == nil {
			t.Fatal("Start after Stop succeeded")
		}
		// The resigned leader's late write is refused too.
		if _, err := st.RunExpire(ctx, store.RunExpireParams{Now: c.Now(), Limit: 1, Term: aTerm}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("resigned leader's write: %v, want store.ErrFenced", err)
		}
	})
}

// failingStore fails every call after the first failAfter elections.
type failingStore struct {
	Store
	elections *atomic.Int64
	failAfter int64
}

func (s failingStore) LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error) {
	if s.elections == nil || s.elections.Add(1) > s.failAfter {
		return store.LeaderElectResult{}, errors.New("store unreachable")
	}
	return store.LeaderElectResult{Leader: true, LeaderID: p.NodeID, Term: 3, ExpiresAt: p.Now.Add(p.TTL)}, nil
}

func (failingStore) NodeHeartbeat(context.Context, store.NodeHeartbeatParams) error {
	return errors.New("store unreachable")
}

// When the store is unreachable the leader keeps leading only while its
// lease is certainly its own (until two ticks before it ends).
func TestUnreachableStoreEndsLeadershipBeforeLease(t *testing.T) {
	t.Parallel()
	c := newClock()
	ctx := context.Background()
	st := failingStore{elections: new(atomic.Int64), failAfter: 1}
	a := newNode(t, st, c, "a")
	a.runOnce(ctx)
	if term, leading := a.Leading(); !leading || term != 3 {
		t.Fatalf("after the first round: %d, %v; want 3, true", term, leading)
	}
	c.Advance(a.cfg.Tick)
	a.runOnce(ctx) // fails: keeps the lease it holds
	if _, leading := a.Leading(); !leading {
		t.Fatal("a stopped leading within its lease on one failed round")
	}
	c.Advance(ttl - 3*a.cfg.Tick) // now at the lease's end minus two ticks
	if _, leading := a.Leading(); leading {
		t.Fatal("a still leads two ticks before its lease ends")
	}
	a.runOnce(ctx)
	if term, leading := a.Leading(); leading || term != 3 {
		t.Fatalf("after the lease: %d, %v; want its last term 3, false", term, leading)
	}
	if got := a.seen(); len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("hooks saw %v, want [true false]", got)
	}
}

// The loop ends with the context given to Start, without Stop.
func TestLoopEndsWithContext(t *testing.T) {
	t.Parallel()
	c := newClock()
	st := failingStore{elections: new(atomic.Int64), failAfter: 1 << 40}
	a := newNode(t, st, c, "a")
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the election loop still runs after its context ended")
	}
}

// waitTimer waits until the loop sleeps on c.
func waitTimer(t *testing.T, c *clock.Fake) {
	t.Helper()
	waitFor(t, "the election loop to sleep", func() bool { return c.Timers() > 0 })
}

// waitFor polls cond (the loop runs on its own goroutine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
