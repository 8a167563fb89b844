package dispatch

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// service must end at Stop (or when its context ends).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type fixture struct {
	t     *testing.T
	clock *clock.Fake
	st    store.Store
	d     *Dispatcher
	ids   rota.IDGenerator
}

func setup(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fc := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg := Config{Store: st, Clock: fc, Jitter: func() float64 { return 0 }, SafetyPoll: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return &fixture{t: t, clock: fc, st: st, d: d}
}

func (f *fixture) submit(kind string, runAt time.Time) *rota.Task {
	f.t.Helper()
	now := f.clock.Now()
	res, err := f.d.Submit(context.Background(), []store.TaskInsertParams{{
		ID: f.ids.New(now), Kind: kind, Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
		RunAt: runAt, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now,
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	return res[0].Task
}

// claimAsync starts a long-poll claim and returns its result channel once
// it is waiting on the dispatcher.
func (f *fixture) claimAsync(worker, kind string, wait time.Duration) <-chan store.TaskClaimResult {
	f.t.Helper()
	return f.claimAsyncReq(ClaimRequest{WorkerID: worker, Kinds: []string{kind}, Max: 1, Wait: wait})
}

// claimAsyncReq is claimAsync for any request of one kind.
func (f *fixture) claimAsyncReq(r ClaimRequest) <-chan store.TaskClaimResult {
	f.t.Helper()
	kind := r.Kinds[0]
	before := f.d.Waiting(kind)
	out := make(chan store.TaskClaimResult, 1)
	go func() {
		res, err := f.d.Claim(context.Background(), r)
		if err != nil {
			f.t.Error(err)
		}
		out <- res
	}()
	f.eventually("claim waiting", func() bool { return f.d.Waiting(kind) > before })
	return out
}

// submitPinned submits a task of kind, due now, pinned to workers.
func (f *fixture) submitPinned(kind string, workers ...string) *rota.Task {
	f.t.Helper()
	now := f.clock.Now()
	res, err := f.d.Submit(context.Background(), []store.TaskInsertParams{{
		ID: f.ids.New(now), Kind: kind, Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
		RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now, WorkerIDs: workers,
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	return res[0].Task
}

// noResult fails the test if ch yields within a short while.
func noResult(t *testing.T, what string, ch <-chan store.TaskClaimResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned: %+v", what, r)
	case <-time.After(100 * time.Millisecond):
	}
}

func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("timed out waiting for %s", what)
}

func receive(t *testing.T, ch <-chan store.TaskClaimResult) store.TaskClaimResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("claim did not return")
	}
	return store.TaskClaimResult{}
}

// nopStore satisfies store.Store for tests that never touch it.
type nopStore struct{ store.Store }

func TestStartStopIdempotent(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	if err := f.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.d.Stop()
	f.d.Stop()
	if err := f.d.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}

// The services end when the context given to Start ends, without Stop.
func TestServicesEndWithStartContext(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	for _, s := range []*service{&f.d.due.service, &f.d.reaper.service, &f.d.retention.service} {
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still running after its context ended", s.name)
		}
	}
}
