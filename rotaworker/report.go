package rotaworker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// maxBatchBytes bounds the messages and results of one batch of reports,
// well under the server's request limit; a single larger report still goes,
// alone.
const maxBatchBytes = 4 << 20

// reporter sends the reports of a worker's runs in batches (POST
// /api/runs/reports), group-commit style: a report made while no request is
// in flight goes at once, alone; those made while one is in flight wait for
// it and go together in the next. A server without the batch endpoint
// switches the worker to one request per report for the rest of its life.
//
// A run ends (runLoop.end) when its report is acknowledged or given up,
// so Run (and Stop) wait for every report as they wait for the runs.
//
// Reports waiting for their acknowledgement are bounded: a handler frees
// its slot when it returns, so a server that acknowledges reports slower
// than it hands out runs would otherwise let them pile up (a run's state
// each). Once maxWaitingReports wait, the claim loops wait
// for room (waitRoom) before they claim again.
type reporter struct {
	// Immutable.
	w    *Worker
	base context.Context // Run's context without its cancellation

	flushers sync.WaitGroup // the flush goroutine, for Run to wait for

	mu      sync.Mutex       // guards the fields below
	queue   []*pendingReport // waiting for the next batch, in arrival order
	running bool             // a flush goroutine is sending the queue
	single  bool             // the server has no batch endpoint
	waiting int              // reports made and not yet acknowledged or given up
	room    chan struct{}    // closed when waiting drops below the bound; nil while below
}

// maxWaitingReports is how many reports may wait for their
// acknowledgement before the worker stops claiming: a full batch.
const maxWaitingReports = rotaclient.MaxReports

func newReporter(w *Worker, base context.Context) *reporter {
	return &reporter{w: w, base: base}
}

// pendingReport is one run's report on its way.
type pendingReport struct {
	// Immutable.
	r     *reporter
	base  context.Context
	st    *runState
	rep   rotaclient.Report
	lease time.Time // retry no later than this: the server gives the run up then
	size  int       // bytes counted against maxBatchBytes
}

// report sends rep for st and returns: the run ends (runLoop.end) once
// the report is acknowledged, refused or given up (logged in each case,
// as send does). The run's goroutine does not wait for it: a report costs
// no goroutine parked on a channel.
func (r *reporter) report(base context.Context, st *runState, lease time.Time, rep rotaclient.Report) {
	p := &st.pending // a run reports once
	*p = pendingReport{r: r, base: base, st: st, rep: rep, lease: lease,
		size: 128 + len(rep.RunID) + len(rep.Message)}
	if raw, ok := rep.Result.(json.RawMessage); ok {
		p.size += len(raw)
	}
	r.mu.Lock()
	r.waiting++
	if r.single {
		r.mu.Unlock()
		go p.sendOne() // its run's goroutine goes on to the next run (runQueue)
		return
	}
	r.queue = append(r.queue, p)
	if !r.running {
		r.running = true
		r.flushers.Go(r.flush)
	}
	r.mu.Unlock()
}

// finished ends the report's run, the report settled.
func (p *pendingReport) finished() {
	p.r.done()
	p.st.loop.end()
}

// sendOne sends the report with its single-report endpoint, then ends
// its run.
func (p *pendingReport) sendOne() {
	p.st.sendOne(p.base, p.lease, p.rep)
	p.finished()
}

// done counts a report as no longer waiting and makes room for claims when
// the waiting ones drop below the bound.
func (r *reporter) done() {
	r.mu.Lock()
	r.waiting--
	if r.room != nil && r.waiting < maxWaitingReports {
		close(r.room)
		r.room = nil
	}
	r.mu.Unlock()
}

// waitRoom returns once fewer than maxWaitingReports reports wait for
// their acknowledgement; false if stop closed first.
func (r *reporter) waitRoom(stop <-chan struct{}) bool {
	r.mu.Lock()
	if r.waiting < maxWaitingReports {
		r.mu.Unlock()
		return true
	}
	if r.room == nil {
		r.room = make(chan struct{})
	}
	room := r.room
	r.mu.Unlock()
	select {
	case <-room:
		return true
	case <-stop:
		return false
	}
}

// wait waits for the flush goroutine to end; call it once no run can
// report any more.
func (r *reporter) wait() { r.flushers.Wait() }

// flush sends the queue in batches until it is empty.
func (r *reporter) flush() {
	fails := 0 // consecutive failed attempts
	for {
		r.mu.Lock()
		batch := r.take()
		if len(batch) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		retry, stop, err := r.send(batch)
		if stop {
			return
		}
		if len(retry) == 0 {
			fails = 0
			continue
		}
		// As send does for one report: retry transport failures with a
		// backoff, until the lease would have lapsed.
		fails++
		d := backoff(fails)
		keep := retry[:0]
		for _, p := range retry {
			if time.Now().Add(d).After(p.lease) {
				p.st.log().Error("rotaworker: report failed; the server will retry the task when its lease lapses", "report", p.rep.Outcome, "err", err)
				p.finished()
				continue
			}
			keep = append(keep, p)
		}
		if len(keep) == 0 {
			continue
		}
		r.w.log.Warn("rotaworker: report failed, retrying", "reports", len(keep), "err", err, "retry_in", d)
		r.mu.Lock()
		r.queue = append(keep, r.queue...)
		r.mu.Unlock()
		time.Sleep(d)
	}
}

// take removes the next batch from the queue: at most MaxReports reports
// and maxBatchBytes (but at least one report). r.mu is held.
func (r *reporter) take() []*pendingReport {
	n, size := 0, 0
	for n < len(r.queue) && n < rotaclient.MaxReports {
		size += r.queue[n].size
		if n > 0 && size > maxBatchBytes {
			break
		}
		n++
	}
	batch := r.queue[:n:n]
	r.queue = r.queue[n:]
	if len(r.queue) == 0 {
		r.queue = nil // let the backing array go
	}
	return batch
}

// send sends one batch and settles its reports. It returns those to retry
// after a backoff with the error why, and stop when the server has no batch
// endpoint (the flusher has then handed every report back and must end).
func (r *reporter) send(batch []*pendingReport) (retry []*pendingReport, stop bool, err error) {
	reps := make([]rotaclient.Report, len(batch))
	for i, p := range batch {
		reps[i] = p.rep
	}
	ctx, cancel := context.WithTimeout(r.base, 10*time.Second)
	res, err := r.w.client.Reports(ctx, r.w.cfg.ID, reps)
	cancel()
	var re *rota.Error
	switch {
	case err == nil:
		for i, p := range batch {
			if e := res[i].Err; e != nil && errors.As(e, &re) && re.Code == rota.CodeUnavailable {
				retry, err = append(retry, p), e
				continue
			}
			p.settled(res[i].Err)
		}
		return retry, false, err
	case errors.Is(err, rota.ErrNotFound) || errors.As(err, &re) && re.Code == rota.CodeMethod:
		// An older server: no batch endpoint. Every report from now on,
		// and those waiting, go one by one.
		r.w.log.Info("rotaworker: the server has no batch report endpoint; reporting runs one by one", "err", err)
		r.mu.Lock()
		r.single, r.running = true, false
		rest := r.queue
		r.queue = nil
		r.mu.Unlock()
		for _, p := range append(batch, rest...) {
			p.handBack()
		}
		return nil, true, nil
	case errors.As(err, &re) && re.Code != rota.CodeUnavailable:
		// The whole batch was refused and nothing applied (invalid input,
		// too large, unauthorized...): let each report get its own verdict.
		r.w.log.Warn("rotaworker: batch report refused; reporting its runs one by one", "reports", len(batch), "err", err)
		for _, p := range batch {
			p.handBack()
		}
		return nil, false, nil
	}
	return batch, false, err
}

// settled logs the server's verdict on the report, as send does, and
// releases its run.
func (p *pendingReport) settled(err error) {
	switch {
	case err == nil:
	case errors.Is(err, rota.ErrLeaseLost):
		p.st.log().Info("rotaworker: report refused: the run is no longer this worker's", "report", p.rep.Outcome, "err", err)
	default:
		p.st.log().Error("rotaworker: report refused", "report", p.rep.Outcome, "err", err)
	}
	p.finished()
}

// handBack sends the report with the single-report endpoints, on a
// goroutine of its own (as its run's goroutine did before reports were
// left to the reporter).
func (p *pendingReport) handBack() {
	go p.sendOne()
}

// sendOne delivers rep with its single-report endpoint (the protocol before
// batches), retrying as send does.
func (st *runState) sendOne(base context.Context, lease time.Time, rep rotaclient.Report) {
	id := st.w.cfg.ID
	st.send(base, lease, string(rep.Outcome), func(ctx context.Context) error {
		switch rep.Outcome {
		case rotaclient.OutcomeSucceed:
			return st.w.client.Succeed(ctx, rep.RunID, rotaclient.SucceedParams{WorkerID: id, Message: rep.Message, Result: rep.Result})
		case rotaclient.OutcomeRelease:
			return st.w.client.Release(ctx, rep.RunID, id, rep.Message)
		default:
			return st.w.client.Fail(ctx, rep.RunID, rotaclient.FailParams{WorkerID: id, Message: rep.Message, NoRetry: rep.NoRetry})
		}
	})
}
