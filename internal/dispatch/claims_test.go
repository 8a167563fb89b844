package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func TestSubmitWakesWaitingClaim(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	got := f.claimAsync("w1", "k", 30*time.Second)
	task := f.submit("k", time.Time{})
	// The fake clock never moves: only the submit's wake-up can return it.
	res := receive(t, got)
	if len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("claim = %+v, want task %s", res, task.ID)
	}
}

func TestSubmitWakesOnlyAsManyAsTasks(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	a := f.claimAsync("w1", "k", 30*time.Second)
	b := f.claimAsync("w2", "k", 30*time.Second)
	f.submit("k", time.Time{})
	first := receive(t, a)
	if len(first.Runs) != 1 {
		t.Fatalf("the first waiter got %+v", first)
	}
	select {
	case r := <-b:
		t.Fatalf("a second waiter was woken for one task: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if n := f.d.Waiting("k"); n != 1 {
		t.Fatalf("%d waiting, want the second still waiting", n)
	}
}

func TestRateLimitedClaimWaitsForToken(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	rate := 1.0
	if _, err := f.d.KindUpsert(context.Background(), store.KindUpsertParams{Name: "k", Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	f.submit("k", time.Time{})
	f.submit("k", time.Time{})
	if res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "w", Kinds: []string{"k"}, Max: 5}); err != nil || len(res.Runs) != 1 {
		t.Fatalf("first claim: %+v, %v; want the single token", res, err)
	}
	got := f.claimAsync("w", "k", time.Minute)
	f.eventually("a timer for the next token", func() bool { return f.clock.Timers() > 0 })
	f.clock.Advance(time.Second + 5*time.Millisecond)
	if res := receive(t, got); len(res.Runs) != 1 {
		t.Fatalf("claim after a token came due: %+v", res)
	}
}

func TestStopReleasesWaitingClaims(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	got := f.claimAsync("w1", "k", time.Minute)
	f.d.Stop()
	if res := receive(t, got); len(res.Runs) != 0 {
		t.Fatalf("claim during stop got %+v", res)
	}
	// After Stop no lease is granted.
	f.submit("k", time.Time{})
	res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "w1", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 0 {
		t.Fatalf("claim after Stop: %+v, %v; want nothing", res, err)
	}
}

// A PinnedOnly claim (the HTTP executor's) is not woken by the submit of an
// unpinned task, and does not use up its wake-up: the worker waiting after
// it gets the task at once.
func TestPinnedOnlyClaimLeavesUnpinnedWakeUps(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	pinnedOnly := f.claimAsyncReq(ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1, Wait: 30 * time.Second, PinnedOnly: true})
	worker := f.claimAsync("w1", "k", 30*time.Second)
	task := f.submit("k", time.Time{})
	// The fake clock never moves: only the submit's wake-up can return it.
	if res := receive(t, worker); len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("worker's claim = %+v, want task %s", res, task.ID)
	}
	noResult(t, "the PinnedOnly claim", pinnedOnly)

	// A task pinned to it wakes it.
	pinned := f.submitPinned("k", "exec")
	if res := receive(t, pinnedOnly); len(res.Runs) != 1 || res.Runs[0].TaskID != pinned.ID {
		t.Fatalf("PinnedOnly claim = %+v, want task %s", res, pinned.ID)
	}
}

// A PinnedOnly claim never gets an unpinned task, even when it is the only
// waiter and woken for all.
func TestPinnedOnlyClaimSkipsUnpinned(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	task := f.submit("k", time.Time{})
	pinnedOnly := f.claimAsyncReq(ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1, Wait: 30 * time.Second, PinnedOnly: true})
	f.d.Notify("k", -1)
	noResult(t, "the PinnedOnly claim", pinnedOnly)
	res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 1 || res.Runs[0].TaskID != task.ID {
		t.Fatalf("ordinary claim by the same worker = %+v, %v; want task %s", res, err, task.ID)
	}
}

// cancelOnClaim is a store whose claims end the caller's context once
// they have committed: the caller "hangs up" while its claim is granted.
type cancelOnClaim struct {
	store.Store
	cancel context.CancelFunc
}

func (c *cancelOnClaim) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	res, err := c.Store.TaskClaim(ctx, p)
	c.cancel()
	return res, err
}

func TestAbandonedClaimIsReleased(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	task := f.submit("k", time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := New(Config{Store: &cancelOnClaim{Store: f.st, cancel: cancel}, Clock: f.clock, SafetyPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	res, err := d.Claim(ctx, ClaimRequest{WorkerID: "gone", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(res.Runs) != 0 {
		t.Fatalf("abandoned claim = %+v, %v; want nothing handed out", res, err)
	}
	got, err := f.st.TaskGet(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != rota.StatusScheduled || len(got.Runs) != 1 || got.Runs[0].Status != rota.StatusCanceled {
		t.Fatalf("after the abandoned claim: task %s with runs %+v, want SCHEDULED with one CANCELED run", got.Status, got.Runs)
	}
	again, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "w2", Kinds: []string{"k"}, Max: 1})
	if err != nil || len(again.Runs) != 1 || again.Runs[0].TaskID != task.ID || again.Runs[0].Attempt != 2 {
		t.Fatalf("next claim = %+v, %v; want the task again", again, err)
	}
}
