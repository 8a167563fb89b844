package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// Defaults of PushConfig.
const (
	// DefaultPushPoll is the longest the push dispatcher sleeps between
	// rounds when nothing wakes it (a submit, a report, a registration).
	DefaultPushPoll = time.Second
	// DefaultHealthInterval is how often each push worker is health-checked.
	DefaultHealthInterval = 5 * time.Second
	// DefaultHealthTimeout bounds one health check.
	DefaultHealthTimeout = 2 * time.Second
	// DefaultHealthFailures is how many health checks in a row a worker
	// fails before it is lost: out of the pool, its runs re-dispatched.
	DefaultHealthFailures = 2
	// DefaultAcceptTimeout bounds a delivery until the worker's answer
	// starts, when the task has no timeout of its own.
	DefaultAcceptTimeout = time.Hour
)

// maxPushAnswer bounds the body of a worker's answer to a delivery.
const maxPushAnswer = 2 << 20

// PushConfig configures a Push dispatcher. Zero values mean the defaults.
type PushConfig struct {
	// Dispatcher claims, reports and wakes; its store, clock, logger and
	// leadership are the push dispatcher's. Required.
	Dispatcher *Dispatcher
	// Client posts the deliveries and health checks. Required: a server
	// gives one that dials through the outbound address guard (netguard).
	Client *http.Client
	// Poll is the longest sleep between rounds (default DefaultPushPoll).
	Poll time.Duration
	// HealthInterval is how often a worker is checked (default
	// DefaultHealthInterval); HealthTimeout bounds a check (default
	// DefaultHealthTimeout); HealthFailures is how many failed checks in a
	// row make a worker lost (default DefaultHealthFailures).
	HealthInterval time.Duration
	HealthTimeout  time.Duration
	HealthFailures int
}

// Push is the push dispatcher, a leader duty. Each round it health-checks
// the registered push workers that are due (GET {address}/healthz), ends
// as FAILED — retried at once, one attempt spent, like a lapsed lease —
// the runs of the workers that are lost (HealthFailures failed checks in
// a row: re-dispatched immediately, not at lease lapse), and for every
// healthy worker with free capacity claims tasks of its kinds that are in
// push mode (store.TaskClaim for the worker's id: one task per free slot,
// with priority, pinning, pause, caps and rates as for any claim) and
// posts each to the worker's address (rotaapi.PushDelivery). The worker
// answers 202 and reports with the usual calls, or 200 with the outcome
// (rotaapi.PushResponse), which the dispatcher reports for it while
// keeping the run's lease alive; 429/503 hand the run back (released).
//
// A lost worker comes back into the pool at its first successful check.
// Health is kept in memory: a new leader checks every worker before it
// delivers to it.
type Push struct {
	service
	cfg PushConfig // immutable after NewPush
	d   *Dispatcher

	mu      sync.Mutex              // guards the fields below
	health  map[string]*pushHealth  // by worker id; owned by the loop, read by Healthy
	cancels map[string]workerCancel // ends the deliveries in flight to a worker
	rotate  int                     // where the next round starts among the workers

	deliveries sync.WaitGroup // deliveries in flight
}

// pushHealth is what the dispatcher knows of one worker's health.
type pushHealth struct {
	checked  bool      // at least one check was made
	healthy  bool      // the last check answered
	failures int       // failed checks in a row
	next     time.Time // when the next check is due
	busy     bool      // answered a delivery 429/503: no delivery until its next check answers
}

// NewPush returns a Push dispatcher; Start runs it.
func NewPush(cfg PushConfig) (*Push, error) {
	switch {
	case cfg.Dispatcher == nil:
		return nil, errors.New("dispatch: push: nil dispatcher")
	case cfg.Client == nil:
		return nil, errors.New("dispatch: push: nil client")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPushPoll
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = DefaultHealthInterval
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = DefaultHealthTimeout
	}
	if cfg.HealthFailures <= 0 {
		cfg.HealthFailures = DefaultHealthFailures
	}
	return &Push{
		service: service{name: "push"}, cfg: cfg, d: cfg.Dispatcher,
		health: map[string]*pushHealth{}, cancels: map[string]workerCancel{},
	}, nil
}

// Start runs the dispatcher in the background until ctx ends or Stop.
func (p *Push) Start(ctx context.Context) error {
	return p.start(ctx, func(ctx context.Context) {
		for {
			next, kinds := p.runOnce(ctx)
			if !p.wait(ctx, next, kinds) {
				return
			}
		}
	})
}

// Stop ends the loop and the deliveries in flight, waits for them and
// closes the client's idle connections. It is idempotent.
func (p *Push) Stop() {
	p.stop()
	p.mu.Lock()
	for _, c := range p.cancels {
		c.cancel()
	}
	p.mu.Unlock()
	p.deliveries.Wait()
	p.cfg.Client.CloseIdleConnections()
}

// Healthy reports whether the last health check of a worker answered
// (false for a worker not checked yet).
func (p *Push) Healthy(workerID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.health[workerID]
	return h != nil && h.healthy
}

// takesWork reports whether a worker gets deliveries: healthy, and not
// busy since its last check.
func (p *Push) takesWork(workerID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.health[workerID]
	return h != nil && h.healthy && !h.busy
}

// wait sleeps up to d, or until a submit of one of kinds (a push waiter
// registered like a long-poll claim) or a kick (a report, a
// registration) when kinds is not empty.
func (p *Push) wait(ctx context.Context, d time.Duration, kinds []string) bool {
	var wake, kick <-chan struct{}
	if len(kinds) > 0 {
		w := p.d.waiters.register(ClaimRequest{Kinds: kinds}) // never parked: never taken
		defer p.d.waiters.unregister(w)
		wake, kick = w.wake, p.d.pushKick
	}
	t := p.d.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-wake:
	case <-kick:
	case <-ctx.Done():
		return false
	}
	return true
}

// RunOnce runs one round now (tests) and returns how long the loop would
// sleep next.
func (p *Push) RunOnce(ctx context.Context) time.Duration {
	d, _ := p.runOnce(ctx)
	return d
}

// runOnce runs one round: health checks due, lost workers' runs, then
// deliveries. It returns how long to sleep and the push kinds served (to
// be woken by their submits).
func (p *Push) runOnce(ctx context.Context) (time.Duration, []string) {
	if _, leading := p.d.leading(); !leading {
		return p.cfg.Poll, nil
	}
	st := p.d.cfg.Store
	workers, err := st.PushWorkerList(ctx)
	if err != nil {
		p.d.cfg.Logger.Warn("dispatch: push: list workers", "err", err)
		return p.cfg.Poll, nil
	}
	if len(workers) == 0 {
		return p.cfg.Poll, nil
	}
	next := p.checkHealth(ctx, workers)
	p.rescueLost(ctx, workers)
	kinds, err := p.pushKinds(ctx)
	if err != nil {
		p.d.cfg.Logger.Warn("dispatch: push: list kinds", "err", err)
		return p.cfg.Poll, nil
	}
	served := p.deliverAll(ctx, kinds)
	return min(p.cfg.Poll, max(next.Sub(p.d.cfg.Clock.Now()), time.Millisecond)), served
}

// pushKinds returns the kinds in push mode.
func (p *Push) pushKinds(ctx context.Context) (map[string]bool, error) {
	kinds, err := p.d.cfg.Store.KindList(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, k := range kinds {
		if k.Dispatch == rota.DispatchPush {
			out[k.Name] = true
		}
	}
	return out, nil
}

// checkHealth checks the workers whose check is due, at once and
// concurrently, records the ones that answered as seen, and returns when
// the next check is due.
func (p *Push) checkHealth(ctx context.Context, workers []store.PushWorker) time.Time {
	now := p.d.cfg.Clock.Now()
	var due []store.PushWorker
	p.mu.Lock()
	known := make(map[string]bool, len(workers))
	for _, w := range workers {
		known[w.WorkerID] = true
		h := p.health[w.WorkerID]
		if h == nil {
			h = &pushHealth{}
			p.health[w.WorkerID] = h
		}
		if w.Stopped && w.Running == 0 {
			continue // gets nothing and holds nothing: not checked until it registers again
		}
		if !h.next.After(now) {
			due = append(due, w)
			h.next = now.Add(p.cfg.HealthInterval)
		}
	}
	for id := range p.health {
		if !known[id] {
			delete(p.health, id) // pruned
		}
	}
	p.mu.Unlock()
	ok := make([]bool, len(due))
	var wg sync.WaitGroup
	for i, w := range due {
		wg.Go(func() { ok[i] = p.check(ctx, w.Address) })
	}
	wg.Wait()
	var seen []string
	for i, w := range due {
		if p.noteHealth(w.WorkerID, ok[i]) {
			seen = append(seen, w.WorkerID)
		}
	}
	if err := p.d.cfg.Store.PushWorkersSeen(ctx, seen, now); err != nil {
		p.d.cfg.Logger.Warn("dispatch: push: record healthy workers", "err", err)
	}
	return p.nextCheck(now)
}

// nextCheck is the earliest check due after now.
func (p *Push) nextCheck(now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := now.Add(p.cfg.HealthInterval)
	for _, h := range p.health {
		if h.next.Before(next) {
			next = h.next
		}
	}
	return next
}

// check asks a worker's health: GET {address}/healthz answering 2xx.
func (p *Push) check(ctx context.Context, address string) bool {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.HealthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, HealthURL(address), nil)
	if err != nil {
		return false
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// HealthURL is the health check URL of a push worker's address:
// {address}/healthz (one slash between them).
func HealthURL(address string) string { return strings.TrimRight(address, "/") + "/healthz" }

// noteHealth records a check's answer and reports it. A worker that
// fails a check leaves the pool (no new deliveries) until one answers; at
// HealthFailures failures in a row it is lost: its deliveries in flight
// are cancelled and its runs re-dispatched (rescueLost).
func (p *Push) noteHealth(id string, ok bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.health[id]
	log := p.d.cfg.Logger
	switch {
	case ok && h.checked && !h.healthy:
		log.Info("dispatch: push worker answers again: back in the pool", "worker_id", id)
	case !ok && h.failures+1 == p.cfg.HealthFailures:
		log.Warn("dispatch: push worker stopped answering health checks: lost, its runs re-dispatched",
			"worker_id", id, "failures", h.failures+1)
	}
	h.checked = true
	if ok {
		h.healthy, h.failures, h.busy = true, 0, false
		return true
	}
	h.healthy = false
	h.failures++
	if c, ok := p.cancels[id]; ok && h.failures >= p.cfg.HealthFailures {
		c.cancel()
		delete(p.cancels, id)
	}
	return false
}

// lost reports whether a worker failed HealthFailures checks in a row.
func (p *Push) lost(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.health[id]
	return h != nil && h.failures >= p.cfg.HealthFailures
}

// rescueLost ends the runs of the lost workers as failed, retried at once:
// their tasks are claimable again now, not when the leases lapse.
func (p *Push) rescueLost(ctx context.Context, workers []store.PushWorker) {
	var ids []string
	for _, w := range workers {
		if w.Running > 0 && p.lost(w.WorkerID) {
			ids = append(ids, w.WorkerID)
		}
	}
	if len(ids) == 0 {
		return
	}
	runs, err := p.d.cfg.Store.WorkerRunsActive(ctx, ids)
	if err != nil {
		p.d.cfg.Logger.Warn("dispatch: push: read the runs of lost workers", "err", err)
		return
	}
	var ps []store.RunCompleteParams
	for _, id := range ids {
		for _, r := range runs[id] {
			ps = append(ps, store.RunCompleteParams{RunID: r.RunID, WorkerID: id, Retry: true, Backoff: noBackoff,
				Message: "push worker " + id + " stopped answering health checks"})
		}
	}
	_, errs := p.d.CompleteMany(ctx, ps)
	for i, err := range errs {
		if err != nil && !errors.Is(err, rota.ErrLeaseLost) && !errors.Is(err, rota.ErrNotFound) {
			p.d.cfg.Logger.Warn("dispatch: push: re-dispatch a lost worker's run", "run", ps[i].RunID, "err", err)
		}
	}
}

// deliverAll claims for every healthy worker with free slots, starting
// one further each round so that no worker is always served first, and
// returns the push kinds the workers serve. The workers are read again,
// under the lock deregistrations take (DeregisterWorker): a claim made for
// a worker records it as seen, which would undo a deregistration made
// since the read.
func (p *Push) deliverAll(ctx context.Context, pushKinds map[string]bool) []string {
	p.d.pushMu.Lock()
	defer p.d.pushMu.Unlock()
	workers, err := p.d.cfg.Store.PushWorkerList(ctx)
	if err != nil || len(workers) == 0 {
		if err != nil {
			p.d.cfg.Logger.Warn("dispatch: push: list workers", "err", err)
		}
		return nil
	}
	served := map[string]bool{}
	p.mu.Lock()
	start := p.rotate % len(workers)
	p.rotate++
	p.mu.Unlock()
	for i := range workers {
		w := workers[(start+i)%len(workers)]
		var kinds []string
		for _, k := range w.Kinds {
			if pushKinds[k] {
				kinds = append(kinds, k)
				served[k] = true
			}
		}
		if len(kinds) == 0 || w.Free() == 0 || !p.takesWork(w.WorkerID) || ctx.Err() != nil {
			continue
		}
		res, err := p.d.Claim(ctx, ClaimRequest{WorkerID: w.WorkerID, Address: w.Address, Kinds: kinds, Max: w.Free()})
		if err != nil {
			p.d.cfg.Logger.Warn("dispatch: push: claim", "worker_id", w.WorkerID, "err", err)
			continue
		}
		for _, run := range res.Runs {
			p.deliver(ctx, w, run)
		}
	}
	out := make([]string, 0, len(served))
	for k := range served {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// workerCtx returns the context of the deliveries to a worker, ended
// when the worker is lost or ctx (the loop's) ends.
func (p *Push) workerCtx(ctx context.Context, id string) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.cancels[id]; ok {
		return c.ctx
	}
	wctx, cancel := context.WithCancel(ctx)
	p.cancels[id] = workerCancel{wctx, cancel}
	return wctx
}

// workerCancel is the context of the deliveries to one worker.
type workerCancel struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// deliver posts a claimed run to its worker in the background.
func (p *Push) deliver(ctx context.Context, w store.PushWorker, run rota.ClaimedRun) {
	wctx := p.workerCtx(ctx, w.WorkerID)
	p.deliveries.Go(func() {
		if err := p.post(wctx, w, run); err != nil {
			p.handBack(context.WithoutCancel(ctx), w.WorkerID, run, err)
		}
	})
}

// noBackoff retries at once: the run of a lost worker, like a lapsed
// lease, was not refused, its worker vanished.
func noBackoff(int) time.Duration { return 0 }

// errBusy is a worker's refusal of a delivery (429, 503): no free slot.
var errBusy = errors.New("the worker has no free slot")

// post delivers one run and applies the answer: 202 (the worker reports
// itself) or 200 with the outcome (reported here). While the answer is
// awaited, the run's lease is renewed for the worker.
func (p *Push) post(ctx context.Context, w store.PushWorker, run rota.ClaimedRun) error {
	body, err := json.Marshal(rotaapi.PushDelivery{
		ClaimedRun: rotaapi.ClaimedRunOf(&run), WorkerID: w.WorkerID, ServerTimeMs: p.d.cfg.Clock.Now().UnixMilli(),
	})
	if err != nil {
		return fmt.Errorf("encode the delivery: %w", err)
	}
	limit := DefaultAcceptTimeout
	if run.TimeoutSeconds > 0 {
		limit = time.Duration(run.TimeoutSeconds)*time.Second + time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.Address, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("make the delivery request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	stopBeats := p.keepLease(ctx, w.WorkerID, run)
	resp, err := p.cfg.Client.Do(req)
	stopBeats()
	if err != nil {
		return fmt.Errorf("post to %s: %w", w.Address, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		return errBusy
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("post to %s: status %d", w.Address, resp.StatusCode)
	}
	return p.applyAnswer(ctx, w.WorkerID, run, resp.Body)
}

// applyAnswer reports the outcome a worker answered with (status 200).
func (p *Push) applyAnswer(ctx context.Context, workerID string, run rota.ClaimedRun, r io.Reader) error {
	var ans rotaapi.PushResponse
	dec := json.NewDecoder(io.LimitReader(r, maxPushAnswer))
	if err := dec.Decode(&ans); err != nil {
		return fmt.Errorf("decode the worker's answer: %w", err)
	}
	rp := store.RunCompleteParams{RunID: run.RunID, WorkerID: workerID, Message: ans.Message}
	switch ans.Outcome {
	case rotaapi.OutcomeSucceed:
		if len(ans.Result) > 0 && !json.Valid(ans.Result) {
			return errors.New("the worker's answer has an invalid result")
		}
		rp.Success, rp.Result = true, ans.Result
	case rotaapi.OutcomeFail:
		rp.Retry = ans.Retry == nil || *ans.Retry
	case rotaapi.OutcomeRelease:
		rp.Release = true
	default:
		return fmt.Errorf("the worker's answer has outcome %q: want succeed, fail or release", ans.Outcome)
	}
	_, err := p.d.Complete(context.WithoutCancel(ctx), rp)
	if err != nil && !errors.Is(err, rota.ErrLeaseLost) {
		p.d.cfg.Logger.Warn("dispatch: push: report a worker's answer", "run", run.RunID, "err", err)
	}
	return nil
}

// keepLease heartbeats a run for its worker, at a third of its lease,
// until the returned func is called.
func (p *Push) keepLease(ctx context.Context, workerID string, run rota.ClaimedRun) func() {
	ctx, cancel := context.WithCancel(ctx)
	every := max(time.Duration(run.HeartbeatTimeoutSeconds)*time.Second/3, time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleep(ctx, p.d.cfg.Clock, every, nil) {
			if _, err := p.d.Heartbeat(ctx, run.RunID, workerID, ""); errors.Is(err, rota.ErrLeaseLost) {
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// handBack applies a delivery's failure: a run whose worker is lost ends
// failed (rescueLost's rule); any other run is released (CANCELED, no
// attempt spent, claimable again at once); a worker that could not be
// reached is checked again before it gets more.
func (p *Push) handBack(ctx context.Context, workerID string, run rota.ClaimedRun, cause error) {
	rp := store.RunCompleteParams{RunID: run.RunID, WorkerID: workerID, Release: true,
		Message: "push delivery failed: " + cause.Error()}
	if p.lost(workerID) {
		rp.Release, rp.Retry, rp.Backoff = false, true, noBackoff
		rp.Message = "push worker " + workerID + " stopped answering health checks"
	} else {
		p.noteRefusal(workerID, errors.Is(cause, errBusy))
	}
	if _, err := p.d.Complete(ctx, rp); err != nil && !errors.Is(err, rota.ErrLeaseLost) {
		p.d.cfg.Logger.Warn("dispatch: push: hand back a run", "run", run.RunID, "err", err)
	}
}

// noteRefusal takes a worker that refused a delivery out of the pool
// until its next check answers: checked at once when it could not be
// reached, at its next due check when busy (so that refusals do not loop).
func (p *Push) noteRefusal(workerID string, busy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.health[workerID]
	switch {
	case h == nil:
	case busy:
		h.busy = true
	default:
		h.healthy, h.next = false, time.Time{}
	}
}

// RegisterWorker records a push worker (store.PushStore.WorkerRegister)
// and wakes the push dispatcher of this node.
func (d *Dispatcher) RegisterWorker(ctx context.Context, p store.WorkerRegisterParams) (*store.PushWorker, error) {
	p.Now = d.cfg.Clock.Now()
	w, err := d.cfg.Store.WorkerRegister(ctx, p)
	if err != nil {
		return nil, err
	}
	d.kickPush()
	return w, nil
}

// DeregisterWorker records that a worker stopped gracefully
// (store.Store.WorkerDeregister), never while this node's push dispatcher
// claims for it, and releases the runs handed to its boxes (between.go),
// which no claim of it will take.
func (d *Dispatcher) DeregisterWorker(ctx context.Context, id string) (*rota.Worker, error) {
	d.pushMu.Lock()
	defer d.pushMu.Unlock()
	w, err := d.cfg.Store.WorkerDeregister(ctx, id, d.cfg.Clock.Now())
	if err == nil {
		d.dropBoxes(ctx, id)
	}
	return w, err
}

// kickPush wakes this node's push dispatcher, if it serves push kinds: a
// slot may have freed or a worker registered.
func (d *Dispatcher) kickPush() {
	select {
	case d.pushKick <- struct{}{}:
	default:
	}
}
