package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// alarmProbe records what a NoWorker alarm reports.
type alarmProbe struct {
	mu      sync.Mutex
	events  []string // type:kind
	changes []string // kind=on|off
}

func (p *alarmProbe) event(ev rota.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, string(ev.Type)+":"+ev.Kind)
}

func (p *alarmProbe) changed(kind string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := kind + "=off"
	if on {
		s = kind + "=on"
	}
	p.changes = append(p.changes, s)
}

// take returns and forgets what was recorded.
func (p *alarmProbe) take() (events, changes []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	events, changes = p.events, p.changes
	p.events, p.changes = nil, nil
	return events, changes
}

func TestNoWorkerAlarm(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	var leader, follower alarmProbe
	newAlarm := func(p *alarmProbe, leads bool) *NoWorker {
		a, err := NewNoWorker(NoWorkerConfig{Store: f.st, Clock: f.clock, Events: p.event, Changed: p.changed,
			Leader: func() (int64, bool) { return 1, leads }})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	lead, follow := newAlarm(&leader, true), newAlarm(&follower, false)
	t0 := f.clock.Now()
	// step advances the clock by d and runs both alarms once; it checks
	// what the leader reported and that the follower agrees on the state
	// without emitting.
	step := func(name string, d time.Duration, wantEvents, wantChanges []string) {
		t.Helper()
		f.clock.Advance(d)
		for _, a := range []*NoWorker{lead, follow} {
			if err := a.runOnce(ctx); err != nil {
				t.Fatalf("%s: runOnce: %v", name, err)
			}
		}
		ev, ch := leader.take()
		if diff := cmp.Diff(wantEvents, ev); diff != "" {
			t.Errorf("%s: leader's events (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantChanges, ch); diff != "" {
			t.Errorf("%s: leader's changes (-want +got):\n%s", name, diff)
		}
		fev, fch := follower.take()
		if len(fev) != 0 {
			t.Errorf("%s: the follower emitted %v", name, fev)
		}
		if diff := cmp.Diff(wantChanges, fch); diff != "" {
			t.Errorf("%s: follower's changes (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(lead.Alarms(), follow.Alarms()); diff != "" {
			t.Errorf("%s: leader and follower disagree (-leader +follower):\n%s", name, diff)
		}
	}

	f.submit("k", t0)
	step("just submitted", 0, nil, nil)
	step("29s without a worker", 29*time.Second, nil, nil)
	if _, on := lead.Since("k"); on {
		t.Fatal("alarm before no-worker-after passed")
	}
	step("30s without a worker", time.Second, []string{"kind.no_worker:k"}, []string{"k=on"})
	if since, on := lead.Since("k"); !on || !since.Equal(t0) {
		t.Fatalf("Since(k) = %v, %v; want %v, true", since, on, t0)
	}
	step("still no worker", 5*time.Second, nil, nil)

	// A worker of the kind appears (and takes the task).
	res, err := f.st.TaskClaim(ctx, store.TaskClaimParams{WorkerID: "w1", Kinds: []string{"k"}, Max: 1, Now: f.clock.Now(),
		NewRunID: func() string { return f.ids.New(f.clock.Now()) }})
	if err != nil || len(res.Runs) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	seen := f.clock.Now()
	step("worker back", 0, []string{"kind.worker_back:k"}, []string{"k=off"})
	if _, on := lead.Since("k"); on {
		t.Fatal("alarm still on with a live worker")
	}

	// The worker vanishes; a new task waits: the alarm counts from the later
	// of its ready time and the worker's last sighting.
	f.clock.Advance(2 * time.Minute)
	ready := f.clock.Now()
	f.submit("k", ready)
	step("new task, worker gone", 0, nil, nil)
	step("29s later", 29*time.Second, nil, nil)
	step("30s later", time.Second, []string{"kind.no_worker:k"}, []string{"k=on"})
	if since, _ := lead.Since("k"); !since.Equal(ready) {
		t.Fatalf("Since(k) = %v, want the new task's ready time %v (worker last seen %v)", since, ready, seen)
	}

	// Paused: nothing is claimable, the alarm ends without worker_back.
	paused := true
	if _, err := f.st.KindUpsert(ctx, store.KindUpsertParams{Name: "k", Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	step("kind paused", time.Second, nil, []string{"k=off"})
}

func TestNoWorkerDefaults(t *testing.T) {
	t.Parallel()
	if _, err := NewNoWorker(NoWorkerConfig{}); err == nil {
		t.Fatal("NewNoWorker without a store: no error")
	}
	f := setup(t, nil)
	a, err := NewNoWorker(NoWorkerConfig{Store: f.st})
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.After != DefaultNoWorkerAfter || a.cfg.Interval != DefaultNoWorkerInterval {
		t.Fatalf("defaults: after %v interval %v", a.cfg.After, a.cfg.Interval)
	}
}

// TestNoWorkerAlarmPinned: tasks pinned to workers none of which serves
// their kind raise the kind's alarm for those workers even while other
// workers serve the kind; one of them serving the kind ends it.
func TestNoWorkerAlarmPinned(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	var probe alarmProbe
	a, err := NewNoWorker(NoWorkerConfig{Store: f.st, Clock: f.clock, Events: probe.event, Changed: probe.changed})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(worker string, kinds ...string) int {
		t.Helper()
		res, err := f.st.TaskClaim(ctx, store.TaskClaimParams{WorkerID: worker, Kinds: kinds, Max: 1, Now: f.clock.Now(),
			NewRunID: func() string { return f.ids.New(f.clock.Now()) }})
		if err != nil {
			t.Fatalf("claim by %s: %v", worker, err)
		}
		return len(res.Runs)
	}
	// step advances the clock by d, lets "other" (never named) claim k so
	// that the kind itself is served, runs the alarm once and checks what
	// it reported.
	step := func(name string, d time.Duration, wantEvents, wantChanges []string) {
		t.Helper()
		f.clock.Advance(d)
		if n := claim("other", "k"); n != 0 {
			t.Fatalf("%s: other claimed %d runs of tasks pinned elsewhere", name, n)
		}
		if err := a.runOnce(ctx); err != nil {
			t.Fatalf("%s: runOnce: %v", name, err)
		}
		ev, ch := probe.take()
		if diff := cmp.Diff(wantEvents, ev); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantChanges, ch); diff != "" {
			t.Errorf("%s: changes (-want +got):\n%s", name, diff)
		}
	}
	t0 := f.clock.Now()
	f.submitPinned("k", "w1", "w2")
	f.submitPinned("j", "w9") // no worker serves j at all: the kind's own alarm covers it
	step("just submitted", 0, nil, nil)
	step("29s", 29*time.Second, nil, nil)
	step("30s", time.Second, []string{"kind.no_worker:j", "kind.no_worker:k"}, []string{"j=on", "k=on"})
	if since, on := a.Since("k"); !on || !since.Equal(t0) {
		t.Fatalf("Since(k) = %v, %v; want %v, true", since, on, t0)
	}
	// A worker not named, and a named one serving another kind, change nothing.
	claim("w3", "k")
	claim("w1", "x")
	step("unnamed worker of k, named worker of x", time.Second, nil, nil)
	if _, on := a.Since("k"); !on {
		t.Fatal("alarm of k ended without a named worker serving it")
	}
	// A named worker serves k: it takes the task and the alarm ends.
	if n := claim("w2", "k"); n != 1 {
		t.Fatalf("w2 claimed %d runs, want the pinned task", n)
	}
	step("named worker back", 0, []string{"kind.worker_back:k"}, []string{"k=off"})
	if _, on := a.Since("k"); on {
		t.Fatal("alarm of k still on")
	}
	if _, on := a.Since("j"); !on {
		t.Fatal("alarm of j ended")
	}
	// w2 (holding its run) goes silent; a new task pinned to it waits: the
	// alarm comes once w2 is lost and the task waited After.
	back := f.clock.Now()
	f.submitPinned("k", "w2")
	step("w2 within its liveness", 30*time.Second, nil, nil)
	step("w2 lost", time.Second, []string{"kind.no_worker:k"}, []string{"k=on"})
	if since, _ := a.Since("k"); !since.Equal(back) {
		t.Fatalf("Since(k) = %v, want %v", since, back)
	}
}

// TestNoWorkerPauseFollowsReadCost: the alarm reads the store every
// Interval while reads are quick, waits ten times a long read (a deep
// queue makes Stats count many rows), and never more than half the alarm
// delay.
func TestNoWorkerPauseFollowsReadCost(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	a, err := NewNoWorker(NoWorkerConfig{Store: f.st, Interval: 5 * time.Second, After: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ took, want time.Duration }{
		{0, 5 * time.Second},
		{20 * time.Millisecond, 5 * time.Second},
		{1270 * time.Millisecond, 12700 * time.Millisecond},
		{10 * time.Second, 15 * time.Second},
	} {
		if got := a.pause(c.took); got != c.want {
			t.Errorf("pause after a read of %v = %v, want %v", c.took, got, c.want)
		}
	}
}
