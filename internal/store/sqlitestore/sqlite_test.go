package sqlitestore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

func open(tb testing.TB) store.Store {
	tb.Helper()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(tb.TempDir(), "rota.db")})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, open)
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rota.db")
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// Pretend a newer rota wrote the file.
	if err := sqlitestore.SetSchemaVersionForTest(ctx, path, sqlitestore.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err = sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), "upgrade rota") {
		t.Fatalf("New on a newer schema: err = %v, want a refusal that says to upgrade", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rota.db")
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture(t, st)
	task := f.InsertNew("email", f.At(0))
	st.Close()
	st2, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	got, err := st2.TaskGet(ctx, task.ID)
	if err != nil {
		t.Fatalf("task lost across reopen: %v", err)
	}
	if got.Kind != "email" {
		t.Fatalf("kind = %q", got.Kind)
	}
}
