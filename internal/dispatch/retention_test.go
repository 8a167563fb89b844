package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// batchCleanupStore deletes batches of the sizes listed, then nothing.
type batchCleanupStore struct {
	mu      sync.Mutex
	batches []int
	params  []store.TaskCleanupParams
	err     error
}

func (s *batchCleanupStore) TaskCleanup(_ context.Context, p store.TaskCleanupParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params = append(s.params, p)
	if s.err != nil {
		return 0, s.err
	}
	if len(s.batches) == 0 {
		return 0, nil
	}
	n := s.batches[0]
	s.batches = s.batches[1:]
	return n, nil
}

func TestRetentionRunOnceBatches(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	st := &batchCleanupStore{batches: []int{10, 10, 3}}
	r, err := NewRetention(RetentionConfig{Store: st, Clock: f.clock, BatchSize: 10, Leader: func() (int64, bool) { return 7, true }})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.runOnce(context.Background()); n != 23 {
		t.Fatalf("deleted %d, want 23 (two full batches and the rest)", n)
	}
	if len(st.params) != 3 {
		t.Fatalf("%d TaskCleanup calls, want 3", len(st.params))
	}
	for _, p := range st.params {
		if p.Term != 7 || p.Limit != 10 || !p.Now.Equal(f.clock.Now()) {
			t.Errorf("TaskCleanup(%+v), want term 7, limit 10, now %v", p, f.clock.Now())
		}
	}
	st.err = store.ErrFenced
	if n := r.runOnce(context.Background()); n != 0 {
		t.Fatalf("a fenced round deleted %d", n)
	}
}

func TestRetentionDefaults(t *testing.T) {
	t.Parallel()
	r, err := NewRetention(RetentionConfig{Store: &batchCleanupStore{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.cfg.Interval != DefaultCleanupInterval || r.cfg.BatchSize != DefaultCleanupBatch || r.cfg.LeaderPoll != DefaultReapInterval {
		t.Errorf("defaults = %+v", r.cfg)
	}
	if _, err := NewRetention(RetentionConfig{}); err == nil {
		t.Fatal("NewRetention without a store succeeded")
	}
}

// A deposed leader's cleanup deletes nothing; the current leader's does.
func TestRetentionFencedByTerm(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	keep := 1
	if _, err := f.d.KindUpsert(ctx, store.KindUpsertParams{Name: "k", RetentionSeconds: &keep}); err != nil {
		t.Fatal(err)
	}
	task := f.submit("k", time.Time{})
	claimed, err := f.d.Claim(ctx, ClaimRequest{WorkerID: "w", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(claimed.Runs) != 1 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	if _, err := f.d.Complete(ctx, store.RunCompleteParams{RunID: claimed.Runs[0].RunID, WorkerID: "w", Success: true}); err != nil {
		t.Fatal(err)
	}
	a := f.electAt("a")
	f.clock.Advance(time.Minute)
	b := f.electAt("b")
	term := a
	r, err := NewRetention(RetentionConfig{Store: f.st, Clock: f.clock, Leader: func() (int64, bool) { return term, true }})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.runOnce(ctx); n != 0 {
		t.Fatalf("the deposed leader deleted %d tasks", n)
	}
	if _, err := f.st.TaskGet(ctx, task.ID); err != nil {
		t.Fatalf("task gone after a fenced cleanup: %v", err)
	}
	term = b
	if n := r.runOnce(ctx); n != 1 {
		t.Fatalf("the leader deleted %d tasks, want 1", n)
	}
	if _, err := f.st.TaskGet(ctx, task.ID); !errors.Is(err, rota.ErrNotFound) {
		t.Fatalf("task after the leader's cleanup: %v, want not found", err)
	}
}
