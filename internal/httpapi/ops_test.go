package httpapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// faultyStore injects faults into a real store.
type faultyStore struct {
	store.Store
	listErr    error // returned by TaskList
	pingErr    error // returned by Ping
	panicKinds bool  // KindList panics
}

func (f *faultyStore) TaskList(ctx context.Context, p store.TaskListParams) (store.TaskListResult, error) {
	if f.listErr != nil {
		return store.TaskListResult{}, f.listErr
	}
	return f.Store.TaskList(ctx, p)
}

func (f *faultyStore) Ping(ctx context.Context) error {
	if f.pingErr != nil {
		return f.pingErr
	}
	return f.Store.Ping(ctx)
}

func (f *faultyStore) KindList(ctx context.Context) ([]rota.Kind, error) {
	if f.panicKinds {
		panic("kind list exploded")
	}
	return f.Store.KindList(ctx)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var h healthResponse
	e.ok("GET", "/api/healthz", nil, &h)
	if h.Status != "ok" || h.NodeID != "node-1" || h.Version != "test" {
		t.Fatalf("healthz: %+v", h)
	}
	e.ok("GET", "/api/readyz", nil, &h)
	if h.Status != "ready" {
		t.Fatalf("readyz: %+v", h)
	}
	if !strings.Contains(e.logs.String(), "level=DEBUG msg=\"http request\" method=GET path=/api/readyz status=200") {
		t.Fatalf("request not logged at debug:\n%s", e.logs.String())
	}
}

func TestReadyzStoreDown(t *testing.T) {
	t.Parallel()
	fs := &faultyStore{}
	e := setup(t, func(o *setupOptions) {
		o.wrapStore = func(s store.Store) store.Store { fs.Store = s; return fs }
	})
	fs.pingErr = errors.New("sqlite: database is locked (secret-detail)")
	r := e.do("GET", "/api/readyz", nil)
	wantErr(t, r, rota.CodeUnavailable)
	if strings.Contains(r.Message, "secret") {
		t.Fatalf("driver text leaked: %q", r.Message)
	}
	e.ok("GET", "/api/healthz", nil, nil) // liveness does not depend on the store
}

// TestInternalErrorHidden: a store failure is a 500 with a generic message;
// the details go to the log only.
func TestInternalErrorHidden(t *testing.T) {
	t.Parallel()
	fs := &faultyStore{}
	e := setup(t, func(o *setupOptions) {
		o.wrapStore = func(s store.Store) store.Store { fs.Store = s; return fs }
	})
	fs.listErr = fmt.Errorf("sqlitestore: list tasks: %w", errors.New("SQLITE_IOERR: secret-driver-detail"))
	r := e.do("GET", "/api/tasks", nil)
	wantErr(t, r, rota.CodeInternal)
	if strings.Contains(r.Message, "secret") || strings.Contains(r.Message, "SQLITE") || string(r.Data) != "null" {
		t.Fatalf("details leaked: %v", r)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "secret-driver-detail") || !strings.Contains(logs, "level=ERROR") {
		t.Fatalf("details not logged:\n%s", logs)
	}
}

// TestPanicRecovered: a panicking handler answers 500 and the server goes
// on serving.
func TestPanicRecovered(t *testing.T) {
	t.Parallel()
	fs := &faultyStore{}
	e := setup(t, func(o *setupOptions) {
		o.wrapStore = func(s store.Store) store.Store { fs.Store = s; return fs }
	})
	fs.panicKinds = true
	r := e.do("GET", "/api/kinds", nil)
	wantErr(t, r, rota.CodeInternal)
	if strings.Contains(r.Message, "exploded") {
		t.Fatalf("panic value leaked: %q", r.Message)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "kind list exploded") || !strings.Contains(logs, "goroutine") {
		t.Fatalf("panic not logged with its stack:\n%s", logs)
	}
	e.ok("GET", "/api/healthz", nil, nil)
}

func TestNewRequiresStoreAndDispatcher(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a store succeeded")
	}
	e := setup(t)
	if _, err := New(Config{Store: e.store}); err == nil {
		t.Fatal("New without a dispatcher succeeded")
	}
}
