package rotaworker_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota/rotaworker"
)

// TestPrefetchClaimsBeyondTheFreeSlots: once its runs are seen to be
// quick, a kind's claims ask for its free slots plus the prefetch, while
// no more handlers than the concurrency run at once; with Prefetch < 0
// they never do.
func TestPrefetchClaimsBeyondTheFreeSlots(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		prefetch int
		min, max int // of the largest claim
	}{{"default", 0, 3, 4}, {"none", -1, 1, 2}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const runs = 60
			f := &fakeRota{runs: runs, prefetch: tt.prefetch}
			var running, peak atomic.Int32
			f.start(t, 2, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
				n := running.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(time.Millisecond)
				running.Add(-1)
				return nil
			})
			f.waitReports(t, runs)
			f.mu.Lock()
			defer f.mu.Unlock()
			if got := slices.Max(f.maxes); got < tt.min || got > tt.max {
				t.Errorf("claims asked for at most %d, want %d to %d (maxes %v)", got, tt.min, tt.max, f.maxes)
			}
			if f.maxes[0] != 2 {
				t.Errorf("first claim asked for %d, want the concurrency 2", f.maxes[0])
			}
			if p := peak.Load(); p > 2 {
				t.Errorf("%d handlers ran at once, concurrency 2", p)
			}
			for id, reps := range f.reports {
				if len(reps) != 1 || reps[0].Outcome != "succeed" {
					t.Errorf("run %s reported %+v", id, reps)
				}
			}
		})
	}
}

// TestPrefetchSlowKindClaimsItsSlotsOnly: a kind whose handlers take longer
// than QuickRun never asks for more than its free slots.
func TestPrefetchSlowKindClaimsItsSlotsOnly(t *testing.T) {
	t.Parallel()
	f := &fakeRota{runs: 4}
	f.start(t, 1, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		time.Sleep(rotaworker.QuickRun + 20*time.Millisecond)
		return nil
	})
	f.waitReports(t, 4)
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := slices.Max(f.maxes); got != 1 {
		t.Errorf("claims asked for at most %d, want 1 (maxes %v)", got, f.maxes)
	}
}

// prefetchOne runs a worker of concurrency 1 against three runs: r0 is
// quick, so the next claim prefetches r2 along with r1, whose handler
// blocks until release is closed. It returns once r1's handler started.
func prefetchOne(t *testing.T, f *fakeRota) (w *rotaworker.Worker, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	started := make(chan struct{})
	w = f.start(t, 1, nil, func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		if task.RunID == "r1" {
			close(started)
			<-release
		}
		return nil
	})
	within(t, "r1's handler", started, 10*time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handed != 3 {
		t.Fatalf("%d runs handed out, want 3 (maxes %v)", f.handed, f.maxes)
	}
	return w, release
}

// outcome is run id's only report.
func (f *fakeRota) outcome(t *testing.T, id string) fakeReport {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reports[id]) != 1 {
		t.Fatalf("run %s reported %+v, want once", id, f.reports[id])
	}
	return f.reports[id][0]
}

// TestPrefetchedRunReleasedAfterBufferWait: a prefetched run that finds no
// free slot within BufferWait is handed back unstarted, not run late.
func TestPrefetchedRunReleasedAfterBufferWait(t *testing.T) {
	t.Parallel()
	f := &fakeRota{runs: 3}
	_, release := prefetchOne(t, f)
	defer close(release)
	f.waitReports(t, 2) // r0, then r2 after BufferWait
	rep := f.outcome(t, "r2")
	if rep.Outcome != "release" || !strings.Contains(rep.Message, "unstarted") {
		t.Errorf("r2 reported %+v, want a release of the unstarted run", rep)
	}
}

// TestStopReleasesPrefetchedRuns: a graceful stop releases the runs waiting
// for a slot at once and lets the running handler finish.
func TestStopReleasesPrefetchedRuns(t *testing.T) {
	t.Parallel()
	f := &fakeRota{runs: 3}
	w, release := prefetchOne(t, f)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	f.waitReports(t, 2)
	if rep := f.outcome(t, "r2"); rep.Outcome != "release" || !strings.Contains(rep.Message, "stopped before the run") {
		t.Errorf("r2 reported %+v, want a release", rep)
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if rep := f.outcome(t, "r1"); rep.Outcome != "succeed" {
		t.Errorf("r1 reported %+v, want succeed", rep)
	}
}
