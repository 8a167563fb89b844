package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// inFlight is a store that counts the RunComplete calls in flight.
type inFlight struct {
	store.Store
	mu       sync.Mutex
	now, max int
}

func (s *inFlight) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	s.mu.Lock()
	s.now++
	s.max = max(s.max, s.now)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	return s.Store.RunComplete(ctx, p)
}

// TestCompleteMany reports more runs than CompleteMany runs at once, with
// failures among them: each answer is at the index of its report, each
// failure its own, and the reports went to the store concurrently.
func TestCompleteMany(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	var (
		evMu   sync.Mutex
		events = map[string]rota.Status{} // run → status of its last run event
	)
	counting := &inFlight{Store: f.st}
	d, err := New(Config{Store: counting, Clock: f.clock, SafetyPoll: time.Hour, Events: func(ev rota.Event) {
		if ev.Type == rota.EventRun {
			evMu.Lock()
			events[ev.RunID] = ev.Status
			evMu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	const n = completeManyConcurrency + 88
	now := f.clock.Now()
	ins := make([]store.TaskInsertParams, n)
	for i := range ins {
		ins[i] = store.TaskInsertParams{ID: f.ids.New(now), Kind: "many", Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
			RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now}
	}
	if _, err := d.Submit(context.Background(), ins); err != nil {
		t.Fatal(err)
	}
	claimed, err := d.Claim(context.Background(), ClaimRequest{WorkerID: "w1", Kinds: []string{"many"}, Max: n})
	if err != nil || len(claimed.Runs) != n {
		t.Fatalf("claim: %d runs, %v; want %d", len(claimed.Runs), err, n)
	}

	// Reports in reverse claim order: every 10th names an unknown run, the
	// 7th comes from another worker, the others succeed, fail or release.
	ps := make([]store.RunCompleteParams, n)
	want := make([]error, n)
	wantStatus := make([]rota.Status, n)
	for i := range ps {
		run := claimed.Runs[n-1-i]
		p := store.RunCompleteParams{RunID: run.RunID, WorkerID: "w1"}
		switch {
		case i%10 == 0:
			p.RunID = fmt.Sprintf("%032x", i+1)
			want[i] = rota.ErrNotFound
		case i == 7:
			p.WorkerID = "w2"
			want[i] = rota.ErrLeaseLost
		case i%3 == 0:
			p.Success = true
			wantStatus[i] = rota.StatusSuccess
		case i%3 == 1:
			p.Retry = false
			wantStatus[i] = rota.StatusFailed
		default:
			p.Release = true
			wantStatus[i] = rota.StatusCanceled
		}
		ps[i] = p
	}
	tasks, errs := d.CompleteMany(context.Background(), ps)
	if len(tasks) != n || len(errs) != n {
		t.Fatalf("%d tasks and %d errors for %d reports", len(tasks), len(errs), n)
	}
	for i, p := range ps {
		if want[i] != nil {
			if !errors.Is(errs[i], want[i]) || tasks[i] != nil {
				t.Errorf("report %d: %v, %v; want %v", i, tasks[i], errs[i], want[i])
			}
			continue
		}
		if errs[i] != nil || tasks[i] == nil || tasks[i].ID != claimed.Runs[n-1-i].TaskID {
			t.Fatalf("report %d: task %v, err %v; want task %s", i, tasks[i], errs[i], claimed.Runs[n-1-i].TaskID)
		}
		var got rota.Status
		for _, r := range tasks[i].Runs {
			if r.ID == p.RunID {
				got = r.Status
			}
		}
		evMu.Lock()
		ev := events[p.RunID]
		evMu.Unlock()
		if got != wantStatus[i] || ev != wantStatus[i] {
			t.Errorf("report %d: run %s, event %s; want %s", i, got, ev, wantStatus[i])
		}
	}
	// The other worker's report changed nothing.
	if got, err := f.st.TaskGet(context.Background(), claimed.Runs[n-1-7].TaskID); err != nil || got.Status != rota.StatusRunning {
		t.Errorf("the refused report's task: %v, %v; want RUNNING", got, err)
	}
	t.Logf("max in flight: %d", counting.max)
	if counting.max < 2 {
		t.Errorf("at most %d reports in flight: CompleteMany did not run them concurrently", counting.max)
	}
	if counting.max > completeManyConcurrency {
		t.Errorf("%d reports in flight, over the bound of %d", counting.max, completeManyConcurrency)
	}

	if tasks, errs := d.CompleteMany(context.Background(), nil); len(tasks) != 0 || len(errs) != 0 {
		t.Errorf("CompleteMany(nil) = %v, %v", tasks, errs)
	}
}
