// Package rotaworker runs Rota tasks in a Go program: register a handler
// per kind, then Run. Three lines are enough:
//
//	w := rotaworker.New(rotaworker.Config{Server: "http://127.0.0.1:8080"})
//	rotaworker.Handle(w, "email", send) // send(ctx, *rotaworker.Task[Email]) error
//	err := w.Run(ctx)
//
// The worker long-polls the server for tasks of its kinds, runs up to the
// kind's concurrency at once, heartbeats each run at a third of its
// heartbeat timeout and reports the outcome: a nil error is a success, an
// error a failure that the server retries (unless wrapped with [NoRetry] or
// out of retries), a panic a failure whose message holds the stack. With
// Config.MaxLocalRetries, unexpected failures are first retried in-process
// (see Local retries).
//
// A run's clocks (its timeout and its lease) start when the server handed
// it over, as the claim's answer states (started_at against the server's
// own clock), never when the claim was sent: a task that arrives late in a
// long poll keeps all of its time. The worker's timeout never fires before
// the server's deadline; the server enforces that deadline itself.
//
// # Cancellation
//
// A handler's context is cancelled, with a cause that tells why
// (context.Cause), when:
//   - the task is stopped on the server (cause [ErrTaskStopped]; the run
//     ends CANCELED),
//   - the task's timeout_seconds pass (cause [ErrTimeout]; the server ends
//     the run TIMEOUT),
//   - the run's lease is lost: the server refused a heartbeat (409) or no
//     heartbeat was acknowledged within the heartbeat timeout (cause
//     matches rota.ErrLeaseLost; the run is abandoned without a report,
//     the server has already given it up),
//   - the worker stops and the grace period is over (cause
//     [ErrWorkerStopping]; the run is released — handed back unfinished,
//     no retry spent — so that another worker takes it at once).
//
// Each is noticed within one heartbeat interval; a stop made through the
// node the worker talks to is noticed at once, for each run's heartbeat is
// held open by the server, which answers it as soon as the task is stopped
// (the first heartbeat goes out within a second of the start; runs that end
// sooner never heartbeat). A handler should return
// soon after its context is done; one that does not is waited for up to
// Config.CancelWait, then its run is reported anyway and the handler's
// goroutine is left to finish on its own (it still holds its concurrency
// slot until it returns).
//
// # Local retries
//
// With Config.MaxLocalRetries = N, a handler that fails unexpectedly is
// called again for the same run, at once, up to N times, before the worker
// reports the failure: a glitch that a second call fixes costs none of the
// task's retries (max_retries) and no trip through the server. Unexpected means: the handler panicked, or
// returned a non-nil error not marked with [NoRetry], while its context was
// still live. Never retried locally: an error marked with [NoRetry] (a
// payload that does not decode is one), and any failure once the handler's
// context is done — the task was stopped, its timeout passed, its lease
// was lost or the worker is stopping. The calls share the run: one lease
// (heartbeats go on between them), one timeout counted from the hand-over,
// one concurrency slot and one report; each gets a fresh [Task] whose
// LocalRetry counts the calls before it. A failure reported after local
// retries says how many in its message ("after 2 local retries: …").
//
// # Stopping
//
// [Worker.Stop] is a graceful stop: claim nothing more, let running
// handlers finish until Stop's ctx is done, then cancel the rest and
// release their runs (another worker takes them at once; no retry is spent). A remote stop (the server answers a claim or a
// heartbeat with drain, after `rota worker stop ID` or POST
// /api/workers/{id}/stop) and the cancellation of Run's ctx do the same with
// Config.Grace as the grace period, after which Run returns.
// [Worker.StopAndCancel] is a hard stop: handlers are cancelled at once.
// Either way Run returns only once every run's report was sent.
//
// # Prefetch
//
// While a kind's runs are quick (their handlers take under [QuickRun] on
// average), the worker holds up to Config.Prefetch runs of it beyond its
// concurrency: its claims ask for the free slots plus those, so that a
// handler that returns finds the next run in hand instead of waiting for a
// claim's round trip. By default the prefetch is as many runs as the
// kind's slots start, on average, within [PrefetchHorizon]: at least
// [DefaultPrefetch], at most the concurrency (runs of a few milliseconds
// come in claims of up to twice the concurrency: fewer, larger claims).
// A prefetched run is the worker's from the moment it arrives: its clocks
// (timeout and lease) count from the hand-over as any run's do, and it is
// heartbeated while it waits for a slot. It gets a slot as one frees; one
// that waits longer than [BufferWait] is handed back
// unstarted (released: another worker takes it at once, no retry spent) and
// the kind prefetches no more until its runs are quick again. When the
// worker stops, runs still waiting for a slot are released at once. A kind
// whose runs are slower, or not yet known, claims only its free slots.
//
// # Reports
//
// Outcomes are reported in batches (POST /api/runs/reports): a report made
// while none is in flight is sent at once, alone; those made while a
// request is in flight go together in the next one (at most
// [rotaclient.MaxReports]). A handler's concurrency slot is freed when it
// returns, before its report is acknowledged. With a server that has no
// batch endpoint the worker reports each run with a request of its own.
package rotaworker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/rotaclient"
)

// Defaults of Config.
const (
	DefaultServer     = "http://127.0.0.1:8080"
	DefaultPollWait   = 30 * time.Second
	DefaultGrace      = 30 * time.Second
	DefaultCancelWait = 2 * time.Second
	// DefaultHeartbeatTimeout is assumed for a run whose claim carries no
	// heartbeat timeout (the server's default).
	DefaultHeartbeatTimeout = 30 * time.Second
)

// Config configures a Worker. Zero values mean the documented defaults.
type Config struct {
	// Server is the Rota server's URL (default DefaultServer). Ignored when
	// Client is set.
	Server string
	// Token is the server's API token, if it requires one. Ignored when
	// Client is set.
	Token string
	// Client talks to the server; nil means a client for Server.
	Client *rotaclient.Client
	// ID identifies the worker to the server; it must be unique among the
	// running workers. Default: [DefaultID] (host-pid-random).
	ID string
	// Address is reported with claims and shown on the runs (default: the
	// server uses the IP address the worker connects from).
	Address string
	// Concurrency is how many tasks of one kind run at once when the
	// kind's HandlerOptions do not say (default 1).
	Concurrency int
	// PollWait is how long a claim waits on the server for work (default
	// DefaultPollWait, at most 60 s). A submit wakes it at once.
	PollWait time.Duration
	// Grace bounds a graceful stop that was not started by Stop: a remote
	// stop or the cancellation of Run's ctx (default DefaultGrace).
	Grace time.Duration
	// CancelWait is how long the worker waits for a cancelled handler to
	// return before reporting its run anyway (default DefaultCancelWait).
	CancelWait time.Duration
	// MaxLocalRetries is how many times a handler that panics or returns an
	// unexpected error is called again for the same run, at once and
	// in-process, before its failure is reported (default 0: none). See
	// "Local retries" in the package doc for what counts as unexpected.
	MaxLocalRetries int
	// Prefetch is how many runs of a kind the worker may hold beyond the
	// kind's concurrency, waiting for a slot, while the kind's runs are
	// quick (see Prefetch in the package doc): 0 means the default, which
	// grows with the kind's speed (PrefetchHorizon) from DefaultPrefetch up
	// to the concurrency; a negative number none.
	Prefetch int
	// Logger receives the worker's diagnostics (default slog.Default()).
	Logger *slog.Logger
	// Listen, when set ("127.0.0.1:0", ":8081"), runs the worker in push
	// mode (see push.go): it serves HTTP there, registers its address with
	// the server and runs the tasks the server posts to it instead of
	// claiming. PushAddress is the URL it registers (default
	// http://{the listen address}/, which must then name a host).
	Listen      string
	PushAddress string
}

// Cancellation causes of a handler's context, read with context.Cause. A
// lost lease has a cause matching rota.ErrLeaseLost.
var (
	// ErrTaskStopped: the task was stopped (or this worker is no longer
	// allowed to run it).
	ErrTaskStopped = errors.New("rotaworker: the task was stopped")
	// ErrTimeout: the task's timeout_seconds passed.
	ErrTimeout = errors.New("rotaworker: the run timed out")
	// ErrWorkerStopping: the worker is stopping and the grace period is over.
	ErrWorkerStopping = errors.New("rotaworker: the worker is stopping")
)

// DefaultID returns a worker id that is unique and readable:
// "host-pid-random", e.g. "web1-4242-9f3a1c".
func DefaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Worker claims and runs tasks. Create it with New, register handlers with
// Handle or Register, then call Run once.
type Worker struct {
	// Immutable after New.
	cfg    Config
	client *rotaclient.Client
	cfgErr error // reported by Run
	log    *slog.Logger
	clock  clock.Clock // the timers of prefetched runs (tests use a fake)
	rep    *reporter   // set by Run before any run starts

	plainBeats atomic.Bool // the server cannot hold heartbeats (HeartbeatWait)

	mu       sync.Mutex              // guards the fields below
	handlers map[string]*kindHandler // written before Run only
	kinds    []string                // registration order
	started  bool
	stopped  bool // a stop was asked before Run

	stopping  chan struct{} // closed when a stop begins: claim nothing more
	abandon   chan struct{} // closed when the grace is over: cancel handlers
	done      chan struct{} // closed when Run returns
	stopOnce  sync.Once
	abandOnce sync.Once

	// The runs whose loop has not started (see execute): abandonAll wakes
	// them.
	inlineMu  sync.Mutex
	inline    map[*runLoop]struct{}
	abandoned bool // abandonAll ran: a new run wakes its loop at once
}

// listInline adds l to the runs abandonAll wakes, or wakes it at once when
// abandonAll already ran.
func (w *Worker) listInline(l *runLoop) {
	w.inlineMu.Lock()
	if w.abandoned {
		w.inlineMu.Unlock()
		l.wake()
		return
	}
	if w.inline == nil {
		w.inline = make(map[*runLoop]struct{})
	}
	w.inline[l] = struct{}{}
	l.listed = true
	w.inlineMu.Unlock()
}

// unlistInline removes l from the runs abandonAll wakes.
func (w *Worker) unlistInline(l *runLoop) {
	w.inlineMu.Lock()
	if l.listed {
		delete(w.inline, l)
		l.listed = false
	}
	w.inlineMu.Unlock()
}

// wakeInline wakes every run whose loop has not started: their loops
// cancel them (the worker abandons its runs).
func (w *Worker) wakeInline() {
	w.inlineMu.Lock()
	w.abandoned = true
	ls := make([]*runLoop, 0, len(w.inline))
	for l := range w.inline {
		ls = append(ls, l)
		l.listed = false
	}
	clear(w.inline)
	w.inlineMu.Unlock()
	for _, l := range ls {
		l.wake()
	}
}

// New returns a Worker for cfg. It does not fail: a bad configuration is
// reported by Run, so that the three-line setup stays three lines.
func New(cfg Config) *Worker {
	w := &Worker{
		handlers: map[string]*kindHandler{},
		stopping: make(chan struct{}),
		abandon:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ID == "" {
		cfg.ID = DefaultID()
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.PollWait <= 0 {
		cfg.PollWait = DefaultPollWait
	}
	cfg.PollWait = min(cfg.PollWait, rotaclient.MaxClaimWait)
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.CancelWait <= 0 {
		cfg.CancelWait = DefaultCancelWait
	}
	cfg.MaxLocalRetries = max(cfg.MaxLocalRetries, 0)
	if cfg.Client == nil {
		if cfg.Server == "" {
			cfg.Server = DefaultServer
		}
		c, err := rotaclient.New(rotaclient.Config{BaseURL: cfg.Server, UserAgent: "rotaworker", Token: cfg.Token})
		if err != nil {
			w.cfgErr = fmt.Errorf("rotaworker: %w", err)
		}
		cfg.Client = c
	}
	w.cfg = cfg
	w.client = cfg.Client
	w.log = cfg.Logger.With("worker_id", cfg.ID)
	w.clock = clock.Real{}
	return w
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// HandlerOptions tune how one kind is run.
type HandlerOptions struct {
	// Concurrency is the most tasks of this kind run at once (default
	// Config.Concurrency).
	Concurrency int
}

// Handler runs tasks of one kind with their raw JSON payload. Work's
// contract is the one described for handlers in the package doc.
type Handler interface {
	Work(ctx context.Context, t *Task[json.RawMessage]) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, t *Task[json.RawMessage]) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, t *Task[json.RawMessage]) error { return f(ctx, t) }

// Register sets the handler of kind. It panics, as http.ServeMux does, on a
// programming error: an invalid kind name, a kind registered twice, a nil
// handler, or a call after Run started.
func (w *Worker) Register(kind string, h Handler, opts ...HandlerOptions) {
	if h == nil {
		panic("rotaworker: nil handler for kind " + kind)
	}
	register(w, kind, opts, func(ctx context.Context, t *Task[json.RawMessage]) error {
		return h.Work(ctx, t)
	}, func(raw json.RawMessage, p *json.RawMessage) error {
		*p = raw
		return nil
	})
}

// Handle registers fn as the handler of kind, decoding each task's payload
// into a T with encoding/json. A payload that does not decode fails the task
// at once (no retry: it would not decode any better). It panics on the
// programming errors listed at Register.
func Handle[T any](w *Worker, kind string, fn func(ctx context.Context, t *Task[T]) error, opts ...HandlerOptions) {
	if fn == nil {
		panic("rotaworker: nil handler for kind " + kind)
	}
	register(w, kind, opts, fn, func(raw json.RawMessage, p *T) error { return json.Unmarshal(raw, p) })
}

func register[T any](w *Worker, kind string, opts []HandlerOptions, fn func(context.Context, *Task[T]) error, decode func(raw json.RawMessage, into *T) error) {
	if !rota.ValidKind(kind) {
		panic(fmt.Sprintf("rotaworker: invalid kind %q (want %s)", kind, rota.KindPattern))
	}
	n := w.cfg.Concurrency
	for _, o := range opts {
		if o.Concurrency > 0 {
			n = o.Concurrency
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("rotaworker: Register after Run")
	}
	if _, dup := w.handlers[kind]; dup {
		panic("rotaworker: kind " + kind + " registered twice")
	}
	w.handlers[kind] = &kindHandler{
		kind:  kind,
		slots: make(chan struct{}, n),
		hand:  newHandFor(w.cfg.Prefetch, n),
		call: func(ctx context.Context, st *runState) error {
			t := newTask[T](st)
			if err := decode(st.claimed.Payload, &t.Payload); err != nil {
				var zero T
				return NoRetry(fmt.Errorf("decode the payload of task %s as %T: %w", st.claimed.TaskID, zero, err))
			}
			return fn(ctx, t)
		},
	}
	w.kinds = append(w.kinds, kind)
}

// kindHandler is one registered kind. Immutable after Register.
type kindHandler struct {
	kind  string
	slots chan struct{} // a token per running handler; cap = concurrency
	hand  *hand         // the runs held: running, prefetched or asked for
	call  func(ctx context.Context, st *runState) error
	runq  *runQueue // the goroutines that run its claimed runs; set by Run
}

// Run claims and runs tasks until the worker is stopped: by Stop or
// StopAndCancel, by a remote stop, or by the cancellation of ctx (a
// graceful stop with Config.Grace). It returns nil once every run it
// started is reported, or an error when the worker cannot run at all (bad
// configuration, no handler, Run called twice). Values of ctx reach the
// handlers' contexts; its cancellation does not cancel them directly.
func (w *Worker) Run(ctx context.Context) error {
	if w.cfgErr != nil {
		return w.cfgErr
	}
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("rotaworker: Run called twice")
	}
	if len(w.handlers) == 0 {
		w.mu.Unlock()
		return errors.New("rotaworker: no handler registered")
	}
	w.started = true
	stopped := w.stopped
	kinds := append([]string(nil), w.kinds...)
	w.mu.Unlock()
	defer close(w.done)
	if stopped {
		return nil
	}

	base := context.WithoutCancel(ctx)
	w.rep = newReporter(w, base)
	claimCtx, cancelClaims := context.WithCancel(base)
	defer cancelClaims()
	go func() {
		select {
		case <-ctx.Done():
			w.log.Info("rotaworker: context done, stopping gracefully", "grace", w.cfg.Grace)
			w.graceful()
		case <-w.stopping:
		}
		cancelClaims()
	}()

	w.log.Info("rotaworker: started", "kinds", kinds, "server", w.client.BaseURL())
	var loops, runs sync.WaitGroup
	push, err := w.pushMode(claimCtx, base, kinds, &loops, &runs) // nil without Config.Listen
	if err != nil {
		w.beginStop()
		return err
	}
	if push != nil {
		kinds = nil // push mode: no claims
	}
	for _, k := range kinds {
		kh := w.handlers[k]
		kh.runq = &runQueue{max: kh.hand.conc + kh.hand.maxPrefetch(), base: base, runs: &runs, stop: w.stopping}
		loops.Go(func() { w.claimLoop(claimCtx, base, kh, &runs) })
	}
	loops.Wait()
	runs.Wait()
	w.rep.wait()
	w.deregister(base)
	push.close()
	w.log.Info("rotaworker: stopped")
	return nil
}

// deregisterTimeout bounds the goodbye a stopping worker sends.
const deregisterTimeout = 5 * time.Second

// deregister tells the server that this worker stopped gracefully, so that
// it lists as stopped rather than lost. A worker that never claimed is not
// known there; a server that cannot be reached only costs a log line.
func (w *Worker) deregister(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, deregisterTimeout)
	defer cancel()
	if _, err := w.client.DeregisterWorker(ctx, w.cfg.ID); err != nil && !errors.Is(err, rota.ErrNotFound) {
		w.log.Warn("rotaworker: deregister", "err", err)
	}
}

// beginStop stops claiming.
func (w *Worker) beginStop() {
	w.stopOnce.Do(func() { close(w.stopping) })
}

// abandonAll cancels every running handler.
func (w *Worker) abandonAll() {
	w.beginStop()
	w.abandOnce.Do(func() {
		close(w.abandon)
		w.wakeInline()
	})
}

// graceful starts a graceful stop bounded by Config.Grace.
func (w *Worker) graceful() {
	select {
	case <-w.stopping:
		return // already stopping: keep that stop's grace
	default:
	}
	w.beginStop()
	go func() {
		t := time.NewTimer(w.cfg.Grace)
		defer t.Stop()
		select {
		case <-t.C:
			w.abandonAll()
		case <-w.done:
		case <-w.abandon:
		}
	}()
}

// markStopped makes a Run that has not started return at once; it reports
// whether Run had started.
func (w *Worker) markStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		w.stopped = true
	}
	return w.started
}

// Stop stops the worker gracefully: it claims nothing more and waits for
// the running handlers to finish. When ctx is done first, it cancels the
// remaining handlers, releases their runs (so that another worker takes
// them at once, without spending a retry), waits for Run to return and returns
// ctx.Err(). It returns nil once Run has returned after every handler
// finished, and at once if Run was not started (Run will then return
// without claiming). Calling it again, or after StopAndCancel, waits in the
// same way.
func (w *Worker) Stop(ctx context.Context) error {
	if !w.markStopped() {
		w.beginStop()
		return nil
	}
	w.beginStop()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	w.abandonAll()
	<-w.done
	return ctx.Err()
}

// StopAndCancel stops the worker at once: it claims nothing more, cancels
// every running handler (cause ErrWorkerStopping) and releases their runs
// (a handler that returns nil in time is reported as a success). It waits for Run to return or ctx to be done, whichever is
// first, and returns ctx.Err() in the latter case.
func (w *Worker) StopAndCancel(ctx context.Context) error {
	if !w.markStopped() {
		w.abandonAll()
		return nil
	}
	w.abandonAll()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claimLoop claims tasks of one kind while it has free slots and starts a
// run for each.
func (w *Worker) claimLoop(ctx, base context.Context, kh *kindHandler, runs *sync.WaitGroup) {
	log := w.log.With("kind", kh.kind)
	var fails int
	for {
		if !w.rep.waitRoom(w.stopping) {
			return
		}
		n, ok := kh.hand.reserve(w.stopping)
		if !ok {
			return
		}
		res, recv, err := w.claim(ctx, kh, n)
		if err != nil {
			kh.hand.unreserve(n)
			if ctx.Err() != nil {
				return
			}
			fails++
			d := backoff(fails)
			log.Warn("rotaworker: claim failed", "err", err, "retry_in", d)
			if !sleep(d, w.stopping) {
				return
			}
			continue
		}
		fails = 0
		w.startRuns(base, kh, res, recv, n, runs)
		if res.Drain {
			log.Info("rotaworker: the server asked this worker to stop")
			w.graceful()
			return
		}
	}
}

// claim long-polls for up to n runs of kh and returns them with the
// instant their answer arrived (the local clock's), from which the runs'
// clocks count.
func (w *Worker) claim(ctx context.Context, kh *kindHandler, n int) (rotaclient.ClaimResult, time.Time, error) {
	// Bound the long poll: a connection that silently died must not hang
	// the loop.
	cctx, cancel := context.WithTimeout(ctx, w.cfg.PollWait+15*time.Second)
	defer cancel()
	res, err := w.client.Claim(cctx, rotaclient.ClaimParams{
		WorkerID: w.cfg.ID, Kinds: []string{kh.kind}, Max: n, Wait: w.cfg.PollWait, Address: w.cfg.Address,
		Follow: true, // claimLoop claims again as soon as there is room
	})
	return res, time.Now(), err
}

// startRuns starts a run for each claimed one, n having been reserved for
// them, and gives back the reservations left over. Each run takes a
// concurrency slot before its handler is called, waiting for one if it was
// prefetched. A run's clocks start when the server handed it over
// (handedOver), not when the claim was sent nor when it got its slot: a
// task may arrive late in a long poll.
func (w *Worker) startRuns(base context.Context, kh *kindHandler, res rotaclient.ClaimResult, recv time.Time, n int, runs *sync.WaitGroup) {
	for i, cr := range res.Runs {
		st := newRunState(w, kh, cr, handedOver(recv, res.ServerTime, cr.StartedAt))
		if i >= n {
			// More than asked for: hand it back rather than exceed the
			// concurrency.
			st.loop.runs = runs
			runs.Add(1) // Done when its report is settled (runLoop.end)
			go st.finish(base, st.lease(), errors.New("claimed beyond the worker's concurrency"), ErrWorkerStopping)
			continue
		}
		// Runs take the free slots in the order the server handed them
		// over; the others wait for a slot.
		select {
		case kh.slots <- struct{}{}:
			st.slotted = true
		default:
		}
		runs.Add(1) // Done when the run ends (execute)
		kh.runq.start(st)
	}
	kh.hand.unreserve(n - min(n, len(res.Runs)))
}

// backoff is the delay after the nth consecutive failed claim: 100 ms
// doubling up to 5 s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}

// sleep waits d; false if stop closed first.
func sleep(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
