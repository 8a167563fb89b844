package dispatch

import (
	"context"
	"slices"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Hand-off between claims: a worker's box.
//
// A worker's claim loop sends its next claim as soon as the previous one
// answers, but a lone submit could hand its task over only to a claim
// asleep (handoff.go): at 500 tasks/s with one SDK worker its claim was
// rarely asleep. It was on its way (between an answer and the next claim's
// arrival: half of the submits landed there) or looking at the store, and
// such a task was inserted waiting and taken by the next look: a second
// transaction with a commit and its WAL flush, and a second row version of
// the task, before its worker even heard of it (the slowest 1% of the
// latency benchmark were all such tasks).
//
// So a worker's long-poll claim of one kind has a box (nextClaim) that
// outlives it: it exists while the claim runs, and for betweenWindow after
// it answers, for the worker's next claim, which takes it over. A lone
// submit that finds no claim of its kind asleep hands its task to a box
// with room, inserting it with its run started for the box's worker (the
// store's hand-off, as for a sleeping claim). The claim that owns the box
// takes the runs handed to it when it answers, or at once when it was
// waiting (the hand-off wakes it); a run handed after its answer waits for
// the next claim, which takes it without a look at the store. A box takes
// no more runs than its claim may still be handed (its Max less the runs
// it got): the SDK's next claim asks for at least that many.
//
// A run handed over this way is the worker's as soon as the insert
// commits, as a sleeping claim's is: if no claim of the worker takes it
// within betweenHold (the worker stopped claiming, or died), it is
// released (CANCELED, no attempt spent, the task claimable again), as an
// abandoned claim's runs are. A claim answered from handed runs alone does
// not look at the store; it still does when the worker's last look is
// older than betweenLook, so that the worker's row keeps its sighting
// current (the store writes it at most every second) and a stop request
// reaches the worker.

const (
	// betweenWindow is how long after a claim's answer submits may hand
	// tasks to the worker's next claim.
	betweenWindow = 25 * time.Millisecond
	// betweenHold is how long handed runs wait for a claim of their
	// worker before they are released.
	betweenHold = time.Second
	// betweenLook is the age of a worker's last look at the store past
	// which a claim answered from handed runs looks again as well.
	betweenLook = 500 * time.Millisecond
	// betweenMax bounds the runs of one box.
	betweenMax = 16
)

// nextClaim is the box of one worker for one kind. Its fields are guarded
// by waiters.mu.
type nextClaim struct {
	worker, address, kind string    // immutable
	owner                 *waiter   // the claim that owns it; nil between claims
	room                  int       // runs it may still be handed
	until                 time.Time // without owner, submits hand it tasks until then
	looked                time.Time // the worker's last look at the store
	inflight              int       // hand-offs in progress
	runs                  []rota.ClaimedRun
	detached              bool          // released: no more hand-offs
	gen                   int           // counts the takes of its runs
	settled               chan struct{} // made by detach while hand-offs are in flight; closed by the last one
	holding               bool          // a release timer runs for its runs
}

// own makes the claim r (registered as w) the owner of its worker's box
// for its kind, made if need be, and returns it with the worker's last
// look at the store; nil for a claim that does not follow (ClaimRequest.
// Follow), does not wait (w nil), is of several kinds, PinnedOnly or of no
// task, or when another claim of the worker owns the box.
func (ws *waiters) own(r ClaimRequest, w *waiter) (box *nextClaim, looked time.Time) {
	if w == nil || !r.Follow || len(r.Kinds) != 1 || r.PinnedOnly || r.Max <= 0 {
		return nil, time.Time{}
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := ws.nextOf(r.WorkerID, r.Kinds[0])
	switch {
	case n == nil:
		n = &nextClaim{worker: r.WorkerID, address: r.Address, kind: r.Kinds[0]}
		ws.next[n.kind] = append(ws.next[n.kind], n)
	case n.owner != nil:
		return nil, time.Time{}
	}
	n.owner = w
	n.room = max(0, min(betweenMax, r.Max)-len(n.runs)-n.inflight)
	return n, n.looked
}

// disown ends the ownership of box by the claim r, which answered got runs
// at now after a look at the store at looked: the box is the worker's next
// claim's, with room for what that one may take.
func (ws *waiters) disown(box *nextClaim, r ClaimRequest, got int, now, looked time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	box.owner = nil
	box.until = now.Add(betweenWindow)
	if looked.After(box.looked) {
		box.looked = looked
	}
	box.room = max(0, min(betweenMax, r.Max-got)-len(box.runs)-box.inflight)
}

// nextOf returns the box of worker for kind. ws.mu is
// held.
func (ws *waiters) nextOf(worker, kind string) *nextClaim {
	for _, n := range ws.next[kind] {
		if n.worker == worker {
			return n
		}
	}
	return nil
}

// takeNext reserves a run of a box of kind for a submit at now,
// dropping the expired ones that hold nothing; nil when none has room. The
// submit must call handNext once its insert is done.
func (ws *waiters) takeNext(kind string, now time.Time) *nextClaim {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	list := ws.next[kind]
	var found *nextClaim
	kept := list[:0]
	for _, n := range list {
		expired := n.owner == nil && now.After(n.until)
		if expired && n.inflight == 0 && len(n.runs) == 0 {
			n.detached = true // expired and empty: forgotten
			continue
		}
		kept = append(kept, n)
		if found == nil && n.room > 0 && !expired {
			found = n
		}
	}
	clear(list[len(kept):])
	ws.setNext(kind, kept)
	if found != nil {
		found.room--
		found.inflight++
	}
	return found
}

// setNext stores the boxes of kind. ws.mu is held.
func (ws *waiters) setNext(kind string, list []*nextClaim) {
	if len(list) == 0 {
		delete(ws.next, kind)
		return
	}
	ws.next[kind] = list
}

// handNext ends a hand-off to n: run is the run the store started for n's
// worker, or nil when it inserted the task waiting. hold reports that n
// needs a release timer for its runs (its first run since the last
// collection, while attached), gen the collection that timer is for.
func (ws *waiters) handNext(n *nextClaim, run *rota.ClaimedRun) (hold bool, gen int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n.inflight--
	if run != nil {
		n.runs = append(n.runs, *run)
		hold = !n.detached && !n.holding
		n.holding = n.holding || hold
		if n.owner != nil {
			select {
			case n.owner.wake <- struct{}{}: // it takes the run at once
			default:
			}
		}
	} else {
		n.room++
	}
	if n.inflight == 0 && n.settled != nil {
		close(n.settled)
		n.settled = nil
	}
	return hold, n.gen
}

// detach takes n out of the boxes, if it is still in (and, with
// gen ≥ 0, still at collection gen), waits for its hand-offs in flight
// and returns its runs; ok is false when it was detached or collected
// since.
func (ws *waiters) detach(n *nextClaim, gen int) (runs []rota.ClaimedRun, ok bool) {
	ws.mu.Lock()
	if n.detached || gen >= 0 && n.gen != gen {
		ws.mu.Unlock()
		return nil, false
	}
	n.detached = true
	list := ws.next[n.kind]
	if i := slices.Index(list, n); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	ws.setNext(n.kind, list)
	var settled chan struct{}
	if n.inflight > 0 {
		settled = make(chan struct{})
		n.settled = settled
	}
	ws.mu.Unlock()
	if settled != nil {
		// An insert in flight: the store call ends (bounded by its own
		// timeout), and its run must not be dropped.
		<-settled
	}
	ws.mu.Lock()
	runs, n.runs = n.runs, nil
	ws.mu.Unlock()
	return runs, true
}

// takeHanded takes the runs handed to box (nil: none), at most max of
// them: the others, which the claim cannot take, are released.
func (d *Dispatcher) takeHanded(ctx context.Context, r ClaimRequest, box *nextClaim, max int) []rota.ClaimedRun {
	if box == nil {
		return nil
	}
	d.waiters.mu.Lock()
	runs := box.runs
	if len(runs) > 0 {
		box.runs = nil
		box.gen++ // its release timer, if any, was for these
		box.holding = false
	}
	d.waiters.mu.Unlock()
	if len(runs) > max {
		d.releaseAbandoned(context.WithoutCancel(ctx), r.WorkerID, runs[max:])
		runs = runs[:max]
	}
	return runs
}

// holdNext releases n's runs if its worker's next claim has not collected
// them within betweenHold (or at once when the dispatcher stops).
func (d *Dispatcher) holdNext(n *nextClaim, gen int) {
	d.betweenMu.Lock()
	if d.betweenStopped {
		d.betweenMu.Unlock()
		if runs, ok := d.waiters.detach(n, gen); ok && len(runs) > 0 {
			d.releaseAbandoned(context.Background(), n.worker, runs)
		}
		return
	}
	d.between.Add(1)
	d.betweenMu.Unlock()
	go func() {
		defer d.between.Done()
		t := d.cfg.Clock.NewTimer(betweenHold)
		defer t.Stop()
		select {
		case <-t.C():
		case <-d.quit:
		}
		if runs, ok := d.waiters.detach(n, gen); ok && len(runs) > 0 {
			d.releaseAbandoned(context.Background(), n.worker, runs)
		}
	}()
}

// dropBoxes releases the runs handed to the boxes of worker, which no
// claim of it will take (it deregistered: the store hands it no more).
func (d *Dispatcher) dropBoxes(ctx context.Context, worker string) {
	d.waiters.mu.Lock()
	var boxes []*nextClaim
	for _, list := range d.waiters.next {
		for _, n := range list {
			if n.worker == worker {
				boxes = append(boxes, n)
			}
		}
	}
	d.waiters.mu.Unlock()
	for _, n := range boxes {
		if runs, ok := d.waiters.detach(n, -1); ok && len(runs) > 0 {
			d.releaseAbandoned(context.WithoutCancel(ctx), worker, runs)
		}
	}
}

// submitNext is submitStarted's hand-off to a worker's box
// (see above); false, doing nothing, when no box of the kind
// has room.
func (d *Dispatcher) submitNext(ctx context.Context, st starter, p store.TaskInsertParams) ([]store.TaskInsertResult, bool, error) {
	now := d.cfg.Clock.Now()
	n := d.waiters.takeNext(p.Kind, now)
	if n == nil {
		return nil, false, nil
	}
	res, run, err := st.TaskInsertStarted(ctx, p, store.StartFor{WorkerID: n.worker, WorkerAddress: n.address,
		RunID: d.newRunID(), Now: now})
	if err != nil {
		d.waiters.handNext(n, nil)
		return nil, true, err
	}
	d.emitSubmitted(res.Task, now)
	if hold, gen := d.waiters.handNext(n, run); hold {
		d.holdNext(n, gen)
	}
	if run == nil {
		// Waiting: the claims of the kind hear of it as of any submit.
		d.waiters.markWaiting(p.Kind)
		d.Notify(p.Kind, 1)
	}
	return []store.TaskInsertResult{res}, true, nil
}

// Tasks waiting on this node's account. A hand-off (handoff.go, above)
// is refused by the store while an unpinned task of the kind is claimable
// (the queue's order would pick that one first), and a claim answered
// from handed runs alone would leave such tasks waiting. So the waiters
// keep, per kind, a hint that tasks this node inserted waiting may still
// wait: a count of those inserts (marked after their commit), and the
// count as of the start of the last look at the store that took fewer
// runs than it could (so took every task it saw). While the hint is set,
// submits skip the hand-off (its refusal is all but certain: a statement
// for nothing) and a claim answered from handed runs looks at the store
// as well. Tasks of other nodes are not counted: the store refuses those
// hand-offs.

// kindSeq is the hint of one kind.
type kindSeq struct{ inserted, cleared int64 }

// markWaiting records that tasks of kind, due now and unpinned, were
// inserted waiting.
func (ws *waiters) markWaiting(kind string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ks := ws.seq[kind]
	if ks == nil {
		ks = &kindSeq{}
		ws.seq[kind] = ks
	}
	ks.inserted++
}

// waiting reports whether tasks of kind inserted waiting on this node may
// still wait.
func (ws *waiters) waiting(kind string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ks := ws.seq[kind]
	return ks != nil && ks.inserted > ks.cleared
}

// lookStart returns the mark of a look at kind about to start.
func (ws *waiters) lookStart(kind string) int64 {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ks := ws.seq[kind]; ks != nil {
		return ks.inserted
	}
	return 0
}

// lookEnd records that a look at kind that started at mark took every
// task it saw.
func (ws *waiters) lookEnd(kind string, mark int64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ks := ws.seq[kind]; ks != nil {
		ks.cleared = max(ks.cleared, mark)
	}
}

// look is the claim r's look at the store for up to max tasks: TaskClaim,
// keeping the waiting hint of r's kind (a claim of one kind that may take
// unpinned tasks).
func (d *Dispatcher) look(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	hinted := len(p.Kinds) == 1 && !p.PinnedOnly && p.Max > 0
	var mark int64
	if hinted {
		mark = d.waiters.lookStart(p.Kinds[0])
	}
	res, err := d.cfg.Store.TaskClaim(ctx, p)
	if hinted && err == nil && !res.Drain && res.RateLimitedUntil.IsZero() && len(res.Runs) < p.Max {
		d.waiters.lookEnd(p.Kinds[0], mark)
	}
	return res, err
}
