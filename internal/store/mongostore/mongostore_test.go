package mongostore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mongostore"
	"github.com/rotahq/rota/internal/store/mongostore/mongotest"
	"github.com/rotahq/rota/internal/store/storetest"
)

// open opens a store on a database of its own, dropped at the end.
func open(tb testing.TB) *mongostore.Store {
	tb.Helper()
	s, err := mongostore.New(tb.Context(), mongostore.Config{URL: mongotest.DB(tb), PollInterval: 10 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = s.Drop(context.Background())
		_ = s.Close()
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(tb testing.TB) store.Store { return open(tb) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(tb testing.TB) store.Store { return open(tb) })
}

// TestMain stops the embedded FerretDB (and removes its directory) once
// the tests ran.
func TestMain(m *testing.M) {
	code := m.Run()
	mongotest.Stop()
	os.Exit(code)
}
