package dispatch

import (
	"context"
	"slices"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Hand-off between claims.
//
// A worker's claim loop sends its next claim as soon as the previous one
// answers, but between the answer and the next claim's arrival no claim of
// the worker is registered here: at 500 tasks/s with one SDK worker that
// gap (the answer's and the next request's trip, the SDK's start of the
// runs) was where half of the submits landed. Such a task was inserted
// waiting and the next claim's look took it: a second transaction with a
// commit and its WAL flush, and a second row version of the task, before
// the task's worker even heard of it.
//
// So a claim that answers with runs leaves an expectation of its worker's
// next claim (nextClaim) for up to betweenWindow: a lone submit of the
// kind that finds no claim asleep (handoff.go) hands its task to that
// expectation, inserting it with its run started for the worker, as for a
// sleeping claim, and the run waits here for the worker's next claim,
// which takes it without a look at the store. The expectation takes no
// more runs than the claim that left it could still have taken (its Max
// less the runs it got): the SDK's next claim asks for at least that many.
//
// A run handed over this way is the worker's as soon as the insert
// commits, as a sleeping claim's is: if the next claim does not come
// within betweenHold (the worker stopped claiming, or died), its runs are
// released (CANCELED, no attempt spent, the task claimable again), as an
// abandoned claim's are. A claim answered from such runs alone does not
// look at the store; it still does when the worker's last look is older
// than betweenLook, so that the worker's row keeps its sighting current
// (the store writes it at most every second) and a stop request reaches
// the worker.

const (
	// betweenWindow is how long after a claim's answer submits may hand
	// tasks to the worker's next claim.
	betweenWindow = 25 * time.Millisecond
	// betweenHold is how long runs handed to a next claim wait for it
	// before they are released.
	betweenHold = time.Second
	// betweenLook is the age of a worker's last look at the store past
	// which a claim answered from handed runs looks again as well.
	betweenLook = 500 * time.Millisecond
	// betweenMax bounds the runs one expectation takes.
	betweenMax = 16
)

// nextClaim is the expected next claim of one worker for one kind. Its
// fields are guarded by waiters.mu.
type nextClaim struct {
	worker, address, kind string    // immutable
	room                  int       // runs it may still be handed
	until                 time.Time // submits hand it tasks until then
	looked                time.Time // the worker's last look at the store
	inflight              int       // hand-offs in progress
	runs                  []rota.ClaimedRun
	detached              bool          // collected or released: no more hand-offs
	gen                   int           // counts the collections that left it attached
	settled               chan struct{} // made by detach while hand-offs are in flight; closed by the last one
	holding               bool          // a release timer runs for it
}

// expectNext records that worker's claim r answered with got runs at now
// after a look at the store at looked: the worker's next claim of r's kind
// may be handed up to r.Max−got runs until now+betweenWindow. Only a
// long-poll claim of one kind that may take unpinned tasks qualifies.
func (ws *waiters) expectNext(r ClaimRequest, got int, now, looked time.Time) {
	room := min(r.Max-got, betweenMax)
	if r.Wait <= 0 || len(r.Kinds) != 1 || r.PinnedOnly || room <= 0 || looked.IsZero() {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if n := ws.nextOf(r.WorkerID, r.Kinds[0]); n != nil {
		// Another claim of the worker and kind answered before this one's
		// successor came (several claim loops): one expectation for both.
		n.room = min(n.room+room, betweenMax)
		n.until = now.Add(betweenWindow)
		if looked.After(n.looked) {
			n.looked = looked
		}
		return
	}
	ws.next[r.Kinds[0]] = append(ws.next[r.Kinds[0]], &nextClaim{worker: r.WorkerID, address: r.Address, kind: r.Kinds[0],
		room: room, until: now.Add(betweenWindow), looked: looked})
}

// nextOf returns the attached expectation of worker for kind. ws.mu is
// held.
func (ws *waiters) nextOf(worker, kind string) *nextClaim {
	for _, n := range ws.next[kind] {
		if n.worker == worker {
			return n
		}
	}
	return nil
}

// takeNext reserves a run of an expectation of kind for a submit at now,
// dropping the expired ones that hold nothing; nil when none has room. The
// submit must call handNext once its insert is done.
func (ws *waiters) takeNext(kind string, now time.Time) *nextClaim {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	list := ws.next[kind]
	var found *nextClaim
	kept := list[:0]
	for _, n := range list {
		if now.After(n.until) && n.inflight == 0 && len(n.runs) == 0 {
			n.detached = true // expired and empty: forgotten
			continue
		}
		kept = append(kept, n)
		if found == nil && n.room > 0 && !now.After(n.until) {
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

// setNext stores the expectations of kind. ws.mu is held.
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
	} else {
		n.room++
	}
	if n.inflight == 0 && n.settled != nil {
		close(n.settled)
		n.settled = nil
	}
	return hold, n.gen
}

// detach takes n out of the expectations, if it is still in (and, with
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

// collect returns the runs handed to the expectation of r's worker for
// r's kind, and the worker's last look at the store; none for a claim that
// does not qualify (see expectNext). When runs are there it takes them
// and leaves the hand-offs in flight to the worker's following claim (the
// expectation stays); else it detaches the expectation, waiting for the
// hand-offs in flight (a look at the store would not find their tasks).
func (ws *waiters) collect(r ClaimRequest) (runs []rota.ClaimedRun, looked time.Time) {
	if len(r.Kinds) != 1 || r.PinnedOnly || r.Max <= 0 {
		return nil, time.Time{}
	}
	ws.mu.Lock()
	n := ws.nextOf(r.WorkerID, r.Kinds[0])
	if n == nil {
		ws.mu.Unlock()
		return nil, time.Time{}
	}
	looked = n.looked
	if n.inflight > 0 && len(n.runs) > 0 {
		runs, n.runs = n.runs, nil
		n.gen++ // its release timer, if any, is for runs collected now
		n.holding = false
		ws.mu.Unlock()
		return runs, looked
	}
	ws.mu.Unlock()
	runs, _ = ws.detach(n, -1)
	return runs, looked
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

// submitNext is submitStarted's hand-off to a worker's expected next
// claim (see above); false, doing nothing, when no expectation of the kind
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
		d.Notify(p.Kind, 1)
	}
	return []store.TaskInsertResult{res}, true, nil
}
