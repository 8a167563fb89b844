package mysqlstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/mysqlstore/mysqltest"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// openDB opens a store on database db (made by mysqltest.NewDatabase) and
// closes it when tb ends.
func openDB(tb testing.TB, db, node string, cost *storecost.Counter) *mysqlstore.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := mysqlstore.New(ctx, mysqlstore.Config{URL: mysqltest.URL(), Database: db, NodeID: node, Cost: cost})
	if err != nil {
		tb.Fatalf("mysqlstore.New on %s (set ROTA_TEST_MYSQL to a reachable MySQL or MariaDB; CI starts one): %v",
			mysqlstore.Redact(mysqltest.URL()), err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// open is the suite's newStore: an empty store in a database of its own,
// whose invariants (Check) are verified when the test ends.
func open(tb testing.TB) store.Store {
	tb.Helper()
	st := openDB(tb, mysqltest.NewDatabase(tb), "node-1", nil)
	tb.Cleanup(func() { // runs before the store closes
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.Check(ctx); err != nil {
			tb.Errorf("store inconsistent after the test: %v", err)
		}
	})
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := mysqltest.NewDatabase(t)
	st := openDB(t, db, "n1", nil)
	st.Close()
	mysqltest.Exec(t, db, `INSERT INTO rota_migration (version, name) VALUES (?, 'from the future')`, mysqlstore.SchemaVersion()+1)
	_, err := mysqlstore.New(ctx, mysqlstore.Config{URL: mysqltest.URL(), Database: db})
	storetest.WantNewerSchemaRefused(t, err)
}

func TestUnreachableFailsFastNamingTheURL(t *testing.T) {
	t.Parallel()
	const url = "mysql://rota:s3cret@127.0.0.1:1/rota"
	start := time.Now()
	_, err := mysqlstore.New(t.Context(), mysqlstore.Config{URL: url})
	if err == nil {
		t.Fatal("New on a closed port succeeded")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("New took %s, want under 10s", took)
	}
	msg := err.Error()
	if !strings.Contains(msg, "127.0.0.1:1/rota") || strings.Contains(msg, "s3cret") {
		t.Errorf("error %q: want the URL named, without its password", msg)
	}
}

func TestBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"postgres://x@h/db", "mysql://root@127.0.0.1:3306/", "mysql://%zz"} {
		if _, err := mysqlstore.New(t.Context(), mysqlstore.Config{URL: u}); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}
