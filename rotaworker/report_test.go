package rotaworker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// barrier makes the first n handlers that reach it return together.
type barrier struct {
	mu   sync.Mutex
	n    int
	open chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) wait() {
	b.mu.Lock()
	b.n--
	if b.n == 0 {
		close(b.open)
	}
	b.mu.Unlock()
	<-b.open
}

// outcomeOf is the handler of the batching tests: run i succeeds with a
// result, fails, or fails for good, by i mod 3.
func outcomeOf(task *rotaworker.Task[json.RawMessage]) error {
	var p struct{ I int }
	json.Unmarshal(task.Raw, &p)
	switch p.I % 3 {
	case 0:
		task.SetMessage(fmt.Sprint("done ", p.I))
		return task.SetResult(map[string]int{"i": p.I})
	case 1:
		return fmt.Errorf("boom %d", p.I)
	}
	return rotaworker.NoRetry(fmt.Errorf("fatal %d", p.I))
}

// checkOutcomes checks that each of the runs was reported exactly once,
// batched or not as want, with the outcome outcomeOf gives it.
func checkOutcomes(t *testing.T, f *fakeRota, runs int, batched bool) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reports) != runs {
		t.Errorf("%d runs reported, want %d", len(f.reports), runs)
	}
	for i := range runs {
		id := fmt.Sprint("r", i)
		reps := f.reports[id]
		if len(reps) != 1 {
			t.Errorf("run %s reported %d times: %+v", id, len(reps), reps)
			continue
		}
		rep := reps[0]
		if rep.Batched != batched {
			t.Errorf("run %s: batched %v, want %v", id, rep.Batched, batched)
		}
		var want fakeReport
		yes, no := true, false
		switch i % 3 {
		case 0:
			want = fakeReport{Outcome: "succeed", Message: fmt.Sprint("done ", i), Result: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		case 1:
			want = fakeReport{Outcome: "fail", Message: fmt.Sprint("boom ", i), Retry: &yes}
		case 2:
			want = fakeReport{Outcome: "fail", Message: fmt.Sprint("fatal ", i), Retry: &no}
		}
		if rep.Outcome != want.Outcome || rep.Message != want.Message || !bytes.Equal(rep.Result, want.Result) ||
			(rep.Retry == nil) != (want.Retry == nil) || (rep.Retry != nil && *rep.Retry != *want.Retry) {
			t.Errorf("run %s reported %+v (retry %v), want %+v", id, rep, rep.Retry, want)
		}
	}
}

func TestReportsAreBatched(t *testing.T) {
	t.Parallel()
	const runs, concurrency = 150, 50
	f := &fakeRota{runs: runs, batchDelay: 20 * time.Millisecond}
	b := newBarrier(concurrency)
	w := f.start(t, concurrency, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		b.wait() // the first 50 finish together; later ones as they come
		return outcomeOf(task)
	})
	f.waitReports(t, runs)
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkOutcomes(t, f, runs, true)
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Logf("%d runs in %d batches: %v", runs, len(f.batches), f.batches)
	if len(f.batches) >= runs || slices.Max(f.batches) < 2 {
		t.Errorf("no batching: %d requests for %d runs: %v", len(f.batches), runs, f.batches)
	}
	if f.singles != 0 {
		t.Errorf("%d single-report requests", f.singles)
	}
}

func TestReportsBatchAtMost1000(t *testing.T) {
	t.Parallel()
	const runs = 1100
	f := &fakeRota{runs: runs, batchDelay: 100 * time.Millisecond}
	b := newBarrier(runs)
	w := f.start(t, runs, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		b.wait()
		return outcomeOf(task)
	})
	f.waitReports(t, runs)
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkOutcomes(t, f, runs, true)
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Logf("batches: %v", f.batches)
	if m := slices.Max(f.batches); m > 1000 || len(f.batches) < 2 {
		t.Errorf("batches %v, want at least two of at most 1000", f.batches)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestReportsLeaseLostItemIsNotRetried(t *testing.T) {
	t.Parallel()
	const runs = 6
	f := &fakeRota{runs: runs, leaseLost: map[string]bool{"r1": true, "r4": true}}
	var logs syncBuffer
	b := newBarrier(runs)
	w := f.start(t, runs, slog.New(slog.NewJSONHandler(&logs, nil)), func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		b.wait()
		return outcomeOf(task)
	})
	f.waitReports(t, runs)
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Refused runs are reported once, like the others, and not retried.
	checkOutcomes(t, f, runs, true)
	var refused []string
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			RunID string `json:"run_id"`
			Err   string `json:"err"`
		}
		json.Unmarshal([]byte(line), &rec)
		switch {
		case rec.Msg == "rotaworker: report refused: the run is no longer this worker's":
			if rec.Level != "INFO" || !strings.Contains(rec.Err, "lease expired") {
				t.Errorf("log %s", line)
			}
			refused = append(refused, rec.RunID)
		case rec.Level == "WARN" || rec.Level == "ERROR":
			t.Errorf("log %s", line)
		}
	}
	slices.Sort(refused)
	if !slices.Equal(refused, []string{"r1", "r4"}) {
		t.Errorf("refusals logged for %v, want [r1 r4]", refused)
	}
}

func TestReportsFallBackToSingleOnOldServer(t *testing.T) {
	t.Parallel()
	const runs, concurrency = 30, 10
	f := &fakeRota{runs: runs, noBatch: true, batchDelay: 20 * time.Millisecond}
	b := newBarrier(concurrency)
	w := f.start(t, concurrency, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		b.wait()
		return outcomeOf(task)
	})
	f.waitReports(t, runs)
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkOutcomes(t, f, runs, false)
	f.mu.Lock()
	defer f.mu.Unlock()
	// The first batch learns the route is missing; the worker never asks
	// again.
	if len(f.batches) != 1 || f.singles != runs {
		t.Errorf("%d batch requests (%v), %d single; want 1 and %d", len(f.batches), f.batches, f.singles, runs)
	}
}

func TestReportsRetriedAfterUnavailable(t *testing.T) {
	t.Parallel()
	f := &fakeRota{runs: 3, failFirst: 2}
	b := newBarrier(3)
	w := f.start(t, 3, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		b.wait()
		return outcomeOf(task)
	})
	f.waitReports(t, 3)
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkOutcomes(t, f, 3, true)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.batches) < 3 || f.singles != 0 {
		t.Errorf("batches %v, %d single; want two 503s then success", f.batches, f.singles)
	}
}

// The slot of a run is free as soon as its handler returns (the next run
// starts while the report is in flight), and Stop waits for the report.
func TestStopWaitsForPendingReports(t *testing.T) {
	t.Parallel()
	f := &fakeRota{runs: 2, gate: make(chan struct{}), batchSeen: make(chan struct{})}
	started := make(chan string, 2)
	w := f.start(t, 1, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		started <- task.RunID
		return nil
	})
	within(t, "the first report", f.batchSeen, 5*time.Second)
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("first run not started")
	}
	select {
	case id := <-started:
		if id != "r1" {
			t.Fatalf("second run %s", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the slot stays taken while the report is in flight")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with reports pending", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(f.gate)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return once the reports were sent")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reports["r0"]) != 1 || len(f.reports["r1"]) != 1 || f.reports["r1"][0].Outcome != "succeed" {
		t.Errorf("reports %+v", f.reports)
	}
}

// TestWaitingReportsBoundClaims: while the server does not acknowledge
// reports, a worker whose handlers return at once stops claiming once a
// full batch of reports waits (each would hold a goroutine and a run's
// state), and claims again when they are acknowledged.
func TestWaitingReportsBoundClaims(t *testing.T) {
	t.Parallel()
	const runs = 3000
	f := &fakeRota{runs: runs, gate: make(chan struct{})}
	f.start(t, 50, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error { return nil })
	var open sync.Once
	release := func() { open.Do(func() { close(f.gate) }) }
	t.Cleanup(release) // before the worker's stop, which waits for the reports

	handed := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.handed
	}
	// Wait until the hand-outs stop growing.
	last, still := -1, 0
	for deadline := time.Now().Add(20 * time.Second); still < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("claims never stopped: %d of %d runs handed out", handed(), runs)
		}
		time.Sleep(50 * time.Millisecond)
		if n := handed(); n != last {
			last, still = n, 0
			continue
		}
		still++
	}
	// The bound (rotaclient.MaxReports waiting) plus what one claim and the
	// runs in hand may add.
	if last < rotaclient.MaxReports || last > rotaclient.MaxReports+200 {
		t.Fatalf("claims stopped after %d runs handed out, want about %d", last, rotaclient.MaxReports)
	}
	release()
	f.waitReports(t, runs)
}
