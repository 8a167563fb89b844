package dispatch

import (
	"context"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// ClaimRequest is a worker's request for work.
type ClaimRequest struct {
	WorkerID string
	Address  string
	Kinds    []string
	Max      int
	Wait     time.Duration // long-poll up to this long (capped at MaxWait)
	// PinnedOnly claims only tasks pinned to WorkerID (see
	// store.TaskClaimParams.PinnedOnly): Rota's HTTP executor claims so.
	// Such a claim is woken by changes that may concern pinned tasks, not
	// by the submission of unpinned ones, whose wake-ups go to the workers
	// that can take them.
	PinnedOnly bool
	// Follow says the worker sends its next claim as soon as this one
	// answers (rotaworker's claim loop does): only then does the claim get
	// a box (between.go), into which submits that find no claim asleep
	// may hand tasks for that next claim. A client that claims at its own
	// pace would find those runs released a second later, its tasks
	// delayed, so a box is opt-in.
	Follow bool
}

// Claim hands out up to r.Max tasks, waiting up to r.Wait for some to become
// claimable. It returns as soon as it has at least one, when the worker must
// drain, when the wait ends, when ctx ends or when the dispatcher stops
// (those last three with an empty result and no error).
func (d *Dispatcher) Claim(ctx context.Context, r ClaimRequest) (store.TaskClaimResult, error) {
	select {
	case <-d.quit:
		// Stopping: grant no more leases.
		return store.TaskClaimResult{}, nil
	default:
	}
	wait := min(r.Wait, d.cfg.MaxWait)
	c := d.cfg.Clock
	end := c.Now().Add(wait)
	var w *waiter
	if wait > 0 {
		w = d.waiters.register(r)
		defer d.waiters.unregister(w)
	}
	// The worker's box (between.go): runs handed to it before this claim
	// came and while it looks at the store.
	box, looked := d.waiters.own(r, w)
	woken := false // the look follows a wake-up: work is likely
	for {
		if runs := d.takeHanded(ctx, r, box, r.Max); len(runs) > 0 {
			return d.claimHanded(ctx, r, box, wait, runs, looked)
		}
		looked = c.Now()
		res, err := d.look(ctx, store.TaskClaimParams{
			WorkerID: r.WorkerID, WorkerAddress: r.Address, Kinds: r.Kinds, Max: r.Max,
			Wait: wait, Now: looked, NewRunID: d.newRunID, RunIDBlock: d.runIDBlock, PinnedOnly: r.PinnedOnly, Woken: woken,
		})
		if err != nil || len(res.Runs) > 0 || res.Drain || wait <= 0 {
			if err == nil && len(res.Runs) > 0 {
				// With the runs handed meanwhile, if any.
				res.Runs = append(res.Runs, d.takeHanded(ctx, r, box, r.Max-len(res.Runs))...)
			}
			return d.claimed(ctx, r, box, res, err, false, looked)
		}
		left := end.Sub(c.Now())
		if left <= 0 {
			return d.claimed(ctx, r, box, res, nil, false, looked)
		}
		sleep := min(left, d.cfg.SafetyPoll)
		if !res.RateLimitedUntil.IsZero() {
			// Work waits for a rate token: look again when one is due.
			sleep = min(sleep, max(res.RateLimitedUntil.Sub(c.Now()), time.Millisecond))
		}
		runs, woke, gone := d.sleep(ctx, w, sleep)
		woken = woke
		if len(runs) > 0 {
			// Handed by a submit (handoff.go): the run started with the
			// task's insert.
			if !gone {
				runs = append(runs, d.takeHanded(ctx, r, box, r.Max-len(runs))...)
			}
			return d.claimed(ctx, r, box, store.TaskClaimResult{Runs: runs}, nil, gone, looked)
		}
		if gone {
			return d.claimed(ctx, r, box, store.TaskClaimResult{}, nil, true, looked)
		}
	}
}

// sleep parks the claim w for up to d, until a wake-up, or until a submit
// hands it runs (which it returns). woken: a wake-up or a refused hand-off
// ended it (work is likely); gone: ctx ended or the dispatcher is
// stopping. A submit that took w while it slept is waited for, so that the
// runs it hands are never dropped.
func (d *Dispatcher) sleep(ctx context.Context, w *waiter, dur time.Duration) (runs []rota.ClaimedRun, woken, gone bool) {
	t := d.cfg.Clock.NewTimer(dur)
	defer t.Stop()
	d.waiters.park(w)
	got := false
	select {
	case <-w.wake:
		woken = true
	case runs = <-w.handed:
		got = true
	case <-t.C():
	case <-ctx.Done():
		gone = true
	case <-d.quit:
		gone = true
	}
	if d.waiters.unpark(w) && !got {
		runs = <-w.handed
		got = true
	}
	// A hand-off the store refused left its task claimable.
	return runs, woken || got, gone
}

// claimHanded answers the claim r with the runs handed to its box
// (between.go). It looks at the store as well, for more runs up to r.Max
// without waiting, when the worker's last look (looked) is older than
// betweenLook.
func (d *Dispatcher) claimHanded(ctx context.Context, r ClaimRequest, box *nextClaim, wait time.Duration, runs []rota.ClaimedRun, looked time.Time) (store.TaskClaimResult, error) {
	now := d.cfg.Clock.Now()
	waiting := d.waiters.waiting(r.Kinds[0])
	if now.Sub(looked) < betweenLook && !waiting {
		return d.claimed(ctx, r, box, store.TaskClaimResult{Runs: runs}, nil, false, looked)
	}
	res, err := d.look(ctx, store.TaskClaimParams{
		WorkerID: r.WorkerID, WorkerAddress: r.Address, Kinds: r.Kinds, Max: r.Max - len(runs),
		Wait: wait, Now: now, NewRunID: d.newRunID, RunIDBlock: d.runIDBlock, Woken: waiting,
	})
	switch {
	case err != nil:
		// The runs are the worker's all the same; the next claim looks again.
		d.cfg.Logger.Warn("dispatch: a claim's look beside its handed runs", "worker", r.WorkerID, "err", err)
		return d.claimed(ctx, r, box, store.TaskClaimResult{Runs: runs}, nil, false, looked)
	case res.Drain:
		d.releaseAbandoned(context.WithoutCancel(ctx), r.WorkerID, runs)
		return d.claimed(ctx, r, box, res, nil, false, now)
	}
	res.Runs = append(runs, res.Runs...)
	return d.claimed(ctx, r, box, res, nil, false, now)
}

// claimed is the answer to the claim r that got res after a look at the
// store at looked: it announces the runs and leaves the worker's box
// (between.go) to its next claim, or, when the caller went away meanwhile
// (ctx ended, or gone), hands the runs back, the box's too, and answers
// nothing.
func (d *Dispatcher) claimed(ctx context.Context, r ClaimRequest, box *nextClaim, res store.TaskClaimResult, err error, gone bool, looked time.Time) (store.TaskClaimResult, error) {
	d.emitClaimed(r.WorkerID, res.Runs)
	if gone || ctx.Err() != nil || res.Drain {
		// The caller went away (a long-poll whose client hung up, a node
		// shutting down) while the claim committed, or the worker drains:
		// nobody will run these. Hand them back now rather than let them
		// sit RUNNING until their lease lapses.
		var runs []rota.ClaimedRun
		if box != nil {
			runs, _ = d.waiters.detach(box, -1)
		}
		if !res.Drain {
			runs = append(runs, res.Runs...)
			res = store.TaskClaimResult{}
		}
		if len(runs) > 0 {
			d.releaseAbandoned(context.WithoutCancel(ctx), r.WorkerID, runs)
		}
		return res, err
	}
	if box != nil {
		d.waiters.disown(box, r, len(res.Runs), d.cfg.Clock.Now(), looked)
	}
	return res, err
}

// releaseAbandoned releases runs granted to a claim whose caller is gone:
// they end CANCELED, cost no attempt, and their tasks are claimable again.
func (d *Dispatcher) releaseAbandoned(ctx context.Context, worker string, runs []rota.ClaimedRun) {
	ps := make([]store.RunCompleteParams, len(runs))
	for i, run := range runs {
		ps[i] = store.RunCompleteParams{RunID: run.RunID, WorkerID: worker, Release: true,
			Message: "released: the claim's caller went away before it got the task"}
	}
	_, errs := d.CompleteMany(ctx, ps)
	for i, err := range errs {
		if err != nil {
			// Its lease will lapse and the reaper will take it back.
			d.cfg.Logger.Warn("dispatch: release an abandoned claim", "run", runs[i].RunID, "err", err)
		}
	}
}

// Notify wakes up to n waiters of kind (all of them when n < 0). A count
// n ≥ 0 stands for n unpinned tasks, which any worker may take: it wakes
// only waiters that can take them, never a PinnedOnly claim. A change that
// may concern pinned tasks must pass n < 0.
func (d *Dispatcher) Notify(kind string, n int) { d.waiters.notify(kind, n, false) }

// Waiting returns how many claims wait for work of kind (tests and
// metrics use it).
func (d *Dispatcher) Waiting(kind string) int { return d.waiters.count(kind) }
