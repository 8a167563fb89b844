package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/clock"
)

func TestDelayedTaskWakesWaiterAtDueTime(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	if err := f.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := f.claimAsync("w1", "k", time.Minute)
	due := f.clock.Now().Add(5 * time.Second)
	task := f.submit("k", due)
	// Before the due time nothing is handed out.
	f.clock.Advance(4 * time.Second)
	select {
	case r := <-got:
		t.Fatalf("claim returned before the due time: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	f.clock.Set(due)
	res := receive(t, got)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("claim at the due time = %+v, want %s", res, task.ID)
	}
}

// dueStore answers TaskNextRunAt from a map.
type dueStore struct {
	mu    sync.Mutex
	next  map[string]time.Time
	reads int
}

func (s *dueStore) TaskNextRunAt(_ context.Context, kinds []string, _ time.Time) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	at, ok := s.next[kinds[0]]
	return at, ok, nil
}

func TestDueTimerRunOnce(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	st := &dueStore{next: map[string]time.Time{}}
	var woken []string
	dt, err := NewDueTimer(DueConfig{Store: st, Clock: c, Wake: func(k string) { woken = append(woken, k) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := c.Now().Add(5 * time.Second)
	dt.Note("k", at)
	dt.Note("k", at.Add(time.Second)) // later: ignored
	if next, fired := dt.runOnce(ctx); fired || !next.Equal(at) || len(woken) != 0 {
		t.Fatalf("before the due time: next %v, fired %v, woken %v; want next %v, nothing woken", next, fired, woken, at)
	}
	c.Set(at)
	st.next["k"] = at.Add(time.Minute) // the kind's next delayed task
	next, fired := dt.runOnce(ctx)
	if !fired || len(woken) != 1 || woken[0] != "k" {
		t.Fatalf("at the due time: fired %v, woken %v; want k woken", fired, woken)
	}
	if next, _ = dt.runOnce(ctx); !next.Equal(at.Add(time.Minute)) {
		t.Fatalf("after the reload: next %v, want the store's %v", next, at.Add(time.Minute))
	}
	// Nothing left in the store: the kind is forgotten.
	delete(st.next, "k")
	c.Set(at.Add(time.Minute))
	dt.runOnce(ctx)
	if next, fired := dt.runOnce(ctx); fired || !next.IsZero() {
		t.Fatalf("with nothing due: next %v, fired %v; want none", next, fired)
	}
}

func TestDueTimerLifecycle(t *testing.T) {
	t.Parallel()
	dt, err := NewDueTimer(DueConfig{Store: &dueStore{}, Wake: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	if dt.cfg.SafetyPoll != DefaultSafetyPoll {
		t.Errorf("SafetyPoll default = %v, want %v", dt.cfg.SafetyPoll, DefaultSafetyPoll)
	}
	dt.Stop() // before Start: nothing to stop
	if err := dt.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
	if _, err := NewDueTimer(DueConfig{Wake: func(string) {}}); err == nil {
		t.Fatal("NewDueTimer without a store succeeded")
	}
}
