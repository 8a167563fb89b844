package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// defaultURL is the database of the tests when ROTA_TEST_POSTGRES is unset.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is the database the tests use. It must be reachable: CI starts
// PostgreSQL, so a missing database fails the tests rather than skipping
// them.
func testURL() string {
	if u := os.Getenv("ROTA_TEST_POSTGRES"); u != "" {
		return u
	}
	return defaultURL
}

// newSchema returns a fresh schema name and drops that schema (CASCADE)
// when tb ends.
func newSchema(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "rota_test_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testURL())
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// openSchema opens a store on schema and closes it when tb ends.
func openSchema(tb testing.TB, schema, node string) *pgstore.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.New(ctx, pgstore.Config{URL: testURL(), Schema: schema, NodeID: node})
	if err != nil {
		tb.Fatalf("pgstore.New on %s (set ROTA_TEST_POSTGRES to a reachable PostgreSQL; CI starts one): %v", redact(testURL()), err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// open is the suite's newStore: an empty store in a schema of its own,
// whose invariants (Check) are verified when the test ends.
func open(tb testing.TB) store.Store {
	tb.Helper()
	st := openSchema(tb, newSchema(tb), "node-1")
	tb.Cleanup(func() { // runs before the store closes
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.Check(ctx); err != nil {
			tb.Errorf("store inconsistent after the test: %v", err)
		}
	})
	return st
}

// redact hides the password of a URL for messages.
func redact(u string) string {
	if i, j := strings.Index(u, "://"), strings.LastIndex(u, "@"); i >= 0 && j > i {
		if k := strings.Index(u[i+3:j], ":"); k >= 0 {
			return u[:i+3+k] + ":***" + u[j:]
		}
	}
	return u
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	st := openSchema(t, schema, "n1")
	st.Close()
	// Pretend a newer rota migrated the schema.
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "rota_migration"}.Sanitize()+` (version, name)
		VALUES ($1, 'from the future')`, pgstore.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.New(ctx, pgstore.Config{URL: testURL(), Schema: schema})
	storetest.WantNewerSchemaRefused(t, err)
}

func TestConcurrentStartMigratesOnce(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { openSchema(t, schema, "n"+string(rune('0'+i))) })
	}
	wg.Wait()
	st := openSchema(t, schema, "n9")
	if _, err := st.KindList(t.Context()); err != nil {
		t.Fatalf("store after concurrent starts: %v", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	st := openSchema(t, schema, "n1")
	f := storetest.NewFixture(t, st)
	task := f.InsertNew("email", f.At(0))
	st.Close()
	got, err := openSchema(t, schema, "n1").TaskGet(t.Context(), task.ID)
	if err != nil {
		t.Fatalf("task lost across reopen: %v", err)
	}
	if got.Kind != "email" {
		t.Fatalf("kind = %q", got.Kind)
	}
}

func TestUnreachableFailsClearly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := pgstore.New(ctx, pgstore.Config{URL: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"})
	if err == nil {
		t.Fatal("New on a closed port: no error")
	}
	if !strings.Contains(err.Error(), "pgstore") {
		t.Fatalf("error %q does not say where it comes from", err)
	}
}

func TestDriverErrorsTranslated(t *testing.T) {
	t.Parallel()
	f := storetest.NewFixture(t, open(t))
	first := f.InsertNew("k", f.At(0))
	p := f.Params("k", f.At(time.Second))
	p.ID = first.ID
	_, err := f.Store.TaskInsert(f.Ctx(), p)
	if !errors.Is(err, rota.ErrConflict) {
		t.Fatalf("duplicate id: err = %v (code %s), want a conflict", err, rota.ErrorCode(err))
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("duplicate id: the driver error is not kept for logs: %v", err)
	}
	p = f.Params("k", f.At(time.Second))
	p.Payload = json.RawMessage(`{"not json`)
	if _, err := f.Store.TaskInsert(f.Ctx(), p); !errors.Is(err, rota.ErrInvalid) {
		t.Fatalf("invalid payload: err = %v (code %s), want invalid", err, rota.ErrorCode(err))
	}
	if _, err := f.Store.TaskGet(f.Ctx(), f.NewTaskID(f.At(time.Hour))); !errors.Is(err, rota.ErrNotFound) {
		t.Fatalf("unknown task: err = %v, want not found", err)
	}
	if _, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: "nope", WorkerID: "w", Now: f.At(0)}); !errors.Is(err, rota.ErrNotFound) {
		t.Fatalf("unknown run: err = %v, want not found", err)
	}
	st := openSchema(t, newSchema(t), "n")
	st.Close()
	if err := st.Ping(t.Context()); !errors.Is(err, rota.ErrUnavailable) {
		t.Fatalf("ping of a closed store: err = %v (code %s), want unavailable", err, rota.ErrorCode(err))
	}
}
