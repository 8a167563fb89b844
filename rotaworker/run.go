package rotaworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// Task is one run of a task, as its handler sees it. The worker fills it;
// tests of a handler may build one by hand (Progress, SetResult and
// SetMessage then do nothing but record).
type Task[T any] struct {
	ID       string        // the task's id
	RunID    string        // this run's id (its lease token)
	Kind     string        // the task's kind
	Priority rota.Priority // the task's priority level
	Attempt  int           // 1 for the first run
	// LocalRetry is how many times the handler was already called for this
	// run and failed unexpectedly (0 for the first call; see
	// Config.MaxLocalRetries).
	LocalRetry int
	// Payload is the task's payload decoded into a T.
	Payload T
	// Raw is the payload as submitted.
	Raw json.RawMessage
	// Timeout is the run's time limit (0: none); the handler's context
	// ends when it passes.
	Timeout time.Duration
	// HeartbeatTimeout is the lease the worker's heartbeats renew.
	HeartbeatTimeout time.Duration
	// ScheduleID is the schedule that fired the task ("" for a task
	// submitted otherwise).
	ScheduleID string
	// FireTime is the nominal fire time the task stands for (zero when
	// ScheduleID is ""): a job about "the day that just ended" reads its
	// day from it, not from the clock, so a late or retried run does the
	// same work.
	FireTime time.Time

	st *runState // nil for a Task built by hand
	mu sync.Mutex
	// set by the handler, read by the worker after the handler returns
	result  json.RawMessage
	message string
}

// newTask makes the Task of one call of st's handler; its Payload is left
// for the caller to decode into (in place: a T decoded apart would be one
// more allocation a run).
func newTask[T any](st *runState) *Task[T] {
	cr := &st.claimed
	t := &Task[T]{
		ID: cr.TaskID, RunID: cr.RunID, Kind: cr.Kind, Priority: cr.Priority, Attempt: cr.Attempt, LocalRetry: st.localRetry,
		Raw: cr.Payload, Timeout: time.Duration(cr.TimeoutSeconds) * time.Second,
		HeartbeatTimeout: st.heartbeatTimeout(), ScheduleID: cr.ScheduleID, FireTime: cr.FireTime, st: st,
	}
	st.outputs = t
	return t
}

// outputter is a Task's result and message, whatever its T (an interface
// holding the *Task, where a method value would be an allocation).
type outputter interface {
	outputs() (json.RawMessage, string)
}

// SetResult records v, encoded with encoding/json, as the task's result
// when the handler succeeds (a json.RawMessage is kept as is; nil clears
// it). It fails only when v cannot be encoded.
func (t *Task[T]) SetResult(v any) error {
	var b json.RawMessage
	switch r := v.(type) {
	case nil:
	case json.RawMessage:
		if !json.Valid(r) {
			return errors.New("rotaworker: SetResult: invalid JSON")
		}
		b = r
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Errorf("rotaworker: SetResult: %w", err)
		}
	}
	t.mu.Lock()
	t.result = b
	t.mu.Unlock()
	return nil
}

// SetMessage records the message reported with a successful run (a failed
// run reports its error).
func (t *Task[T]) SetMessage(msg string) {
	t.mu.Lock()
	t.message = msg
	t.mu.Unlock()
}

func (t *Task[T]) outputs() (json.RawMessage, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result, t.message
}

// Progress tells the server the handler is still working: it heartbeats the
// run at once, with msg as the run's progress note (shown as its message;
// "" leaves it). It returns nil when the lease was renewed, ErrTaskStopped when
// the task must stop, an error matching rota.ErrLeaseLost when the run is
// no longer this worker's (the handler's context is then cancelled too), or
// a transport error.
func (t *Task[T]) Progress(ctx context.Context, msg string) error {
	if t.st == nil {
		return nil
	}
	return t.st.progress(ctx, msg)
}

// runState is one claimed run being executed.
type runState struct {
	// Immutable.
	w       *Worker
	kh      *kindHandler
	claimed rota.ClaimedRun
	// start is when the run started on the server, as an instant of the
	// local monotonic clock (see handedOver): its lease and timeout count
	// from then.
	start time.Time

	// Shared between the run loop, its heartbeat goroutine and Progress.
	hb       atomic.Int64 // the task's lease length (ns); a heartbeat reply may change it
	leaseEnd atomic.Int64 // our view of the lease's end, as an offset from start (ns)

	// The run's logger, made at its first use (most runs never log, and
	// a handler's With formats its attributes).
	logOnce sync.Once
	logger  *slog.Logger

	// Set by startRuns before execute: the run took a concurrency slot as it
	// arrived (else it waits for one).
	slotted bool

	// Set by newTask before each call of the handler; read after it returned.
	outputs outputter
	// Owned by the goroutine running execute.
	loop runLoop
	// The run's report on its way (reporter.report); one a run.
	pending pendingReport
	// Owned by the handler's goroutine: the calls of the handler that
	// failed unexpectedly so far.
	localRetry int
}

func newRunState(w *Worker, kh *kindHandler, cr rota.ClaimedRun, start time.Time) *runState {
	hb := time.Duration(cr.HeartbeatTimeoutSeconds) * time.Second
	if hb <= 0 {
		hb = DefaultHeartbeatTimeout
	}
	st := &runState{
		w: w, kh: kh, claimed: cr, start: start,
	}
	st.hb.Store(int64(hb))
	st.leaseEnd.Store(int64(hb))
	return st
}

// log is the run's logger: the worker's with the run's kind, task and run.
func (st *runState) log() *slog.Logger {
	st.logOnce.Do(func() {
		cr := st.claimed
		st.logger = st.w.log.With("kind", cr.Kind, "task_id", cr.TaskID, "run_id", cr.RunID)
	})
	return st.logger
}

// handedOver converts the instant a run started on the server into the
// local monotonic clock. recv is when the claim's answer arrived; the
// server said it answered at serverNow, the run having started at
// startedAt, both by its own clock. Only their difference is used (the
// clocks may differ), and it is counted back from recv, which comes after
// the server's answer: the result is never earlier than the server's
// start, so the worker's clocks never run out before the server's. A server
// that sends no times is taken to have started the run at recv.
func handedOver(recv, serverNow, startedAt time.Time) time.Time {
	if serverNow.IsZero() || startedAt.IsZero() {
		return recv
	}
	return recv.Add(-max(serverNow.Sub(startedAt), 0))
}

// heartbeatTimeout is the task's current lease length.
func (st *runState) heartbeatTimeout() time.Duration { return time.Duration(st.hb.Load()) }

// interval is the heartbeat period: a third of the heartbeat timeout.
func (st *runState) interval() time.Duration {
	return max(st.heartbeatTimeout()/3, 20*time.Millisecond)
}

// lease is our view of the lease's end.
func (st *runState) lease() time.Time { return st.start.Add(time.Duration(st.leaseEnd.Load())) }

// renew records a heartbeat sent at sent and acknowledged with a lease of
// hb: the server renewed it no earlier than sent.
func (st *runState) renew(sent time.Time, hb time.Duration) {
	end := int64(sent.Sub(st.start) + hb)
	for {
		old := st.leaseEnd.Load()
		if end <= old || st.leaseEnd.CompareAndSwap(old, end) {
			return
		}
	}
}

// call runs the handler, turning a panic into an error with the stack.
func (st *runState) call(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n\n%s", p, debug.Stack())
		}
	}()
	return st.kh.call(ctx, st)
}

// callWithRetries calls the handler, again after an unexpected failure
// while Config.MaxLocalRetries allows (see "Local retries" in the package
// doc). A failure after local retries says how many there were.
func (st *runState) callWithRetries(ctx context.Context) error {
	for {
		err := st.call(ctx)
		if err == nil || !st.retryLocally(ctx, err) {
			if err != nil && st.localRetry > 0 {
				err = fmt.Errorf("after %s: %w", localRetries(st.localRetry), err)
			}
			return err
		}
		st.localRetry++
		st.log().Warn("rotaworker: handler failed, retrying locally", "err", err,
			"local_retry", st.localRetry, "max_local_retries", st.w.cfg.MaxLocalRetries)
	}
}

// localRetries is "1 local retry" or "n local retries".
func localRetries(n int) string {
	if n == 1 {
		return "1 local retry"
	}
	return fmt.Sprintf("%d local retries", n)
}

// retryLocally reports whether a call that failed with err is to be made
// again: the failure is unexpected (not NoRetry, the handler's context
// still live) and local retries are left.
func (st *runState) retryLocally(ctx context.Context, err error) bool {
	return st.localRetry < st.w.cfg.MaxLocalRetries && !IsNoRetry(err) && ctx.Err() == nil
}

// execute runs one claimed run: the handler, on this goroutine, then its
// report. Nothing else is started for a run that ends quietly (most do:
// they end before their first heartbeat is due). The run loop (run: a
// select over the handler's result, heartbeats and Progress, the timeout,
// the lease and the worker's stop) is started by wake, on its own
// goroutine, as soon as it has something to watch: the first heartbeat
// is due (never later than the timeout, which is whole seconds), Progress
// is called, or the worker abandons its runs. From then on the loop owns
// the run's end, as it did when every run had one: this goroutine only
// hands it the handler's result. The run's slot is released when the
// handler returns; runs.Done is called once the run is reported or given
// up.
func (st *runState) execute(base context.Context, runs *sync.WaitGroup) {
	l := &st.loop
	l.init(st, base, runs)
	err := l.handle()
	if l.state.CompareAndSwap(runInline, runEnded) {
		l.endInline(err)
		return
	}
	l.wakeMu.Lock() // takeLoop set done under it, after the state moved
	done := l.done
	l.wakeMu.Unlock()
	done <- err // buffered: the loop may have ended the run already (CancelWait)
}

// States of a run's loop (runLoop.state).
const (
	runInline  int32 = iota // the handler runs; no loop watches it
	runLooping              // the loop was started: it ends the run
	runEnded                // the handler returned before anything woke the loop
)

// runLoop is the state of one run's loop. It lives in the runState (one
// allocation a run). Set by init before anything can wake the loop; then
// owned by the loop's goroutine once woken, else by execute's.
type runLoop struct {
	st        *runState
	base      context.Context
	runs      *sync.WaitGroup // Done once the run is ended
	ctx       context.Context // the handler's
	cancel    context.CancelCauseFunc
	stopTimer context.CancelFunc // releases the timeout's timer; nil without a timeout
	lost      bool               // the run is no longer ours
	cause     error              // why the handler was cancelled
	waitT     *time.Timer        // CancelWait after the cancellation
	waitC     <-chan time.Time

	// Waking the loop.
	state  atomic.Int32 // runInline, runLooping or runEnded
	wakeMu sync.Mutex   // serializes wake
	wakeT  *time.Timer  // wakes the loop when the first beat is due
	// Made by takeLoop when it starts the loop (under wakeMu).
	done     chan error       // the handler's result, to the loop
	beatReq  chan beatRequest // Progress asks the loop for a heartbeat
	loopDone chan struct{}    // closed when the loop ended the run
	listed   bool             // in the worker's list of runs to wake on abandon (Worker.inlineMu)
	firstDue time.Time        // when the first heartbeat is due

	// Heartbeats. The goroutine that sends them (and its context) is
	// started when the first is due: most runs end sooner and never
	// heartbeat.
	firstT     *time.Timer        // the first beat, when the loop woke before it was due
	firstC     <-chan time.Time   // nil once the first beat is due or beats ended
	beats      <-chan beatResult  // the heartbeat goroutine's outcomes; nil until it starts
	stopBeats  context.CancelFunc // ends the heartbeat goroutine; nil until it starts
	beatsEnded chan struct{}      // closed when the heartbeat goroutine returns
}

func (l *runLoop) init(st *runState, base context.Context, runs *sync.WaitGroup) {
	l.st, l.base, l.runs = st, base, runs
	l.ctx, l.cancel = context.WithCancelCause(base)
	if t := st.claimed.TimeoutSeconds; t > 0 {
		// The server's deadline is its start plus the timeout; st.start is
		// never earlier than that start.
		l.ctx, l.stopTimer = context.WithDeadlineCause(l.ctx, st.start.Add(time.Duration(t)*time.Second), ErrTimeout)
	}
	// The first beat is due no later than the timeout (a whole number of
	// seconds, at least one): this timer wakes the loop in time for both.
	l.firstDue = st.start.Add(min(st.interval(), firstBeat))
	l.wakeMu.Lock() // the timer may fire at once: its loop reads wakeT after takeLoop
	l.wakeT = time.AfterFunc(time.Until(l.firstDue), l.wakeOnTimer)
	l.wakeMu.Unlock()
	st.w.listInline(l) // woken by abandonAll
}

// wake starts the run loop on a goroutine of its own unless it runs
// already or the run ended.
func (l *runLoop) wake() {
	l.wakeMu.Lock()
	started := l.takeLoop()
	l.wakeMu.Unlock()
	if started {
		go l.loop()
	}
}

// wakeOnTimer is wake on the timer's goroutine: the first beat is due.
func (l *runLoop) wakeOnTimer() {
	l.wakeMu.Lock()
	started := l.takeLoop()
	l.wakeMu.Unlock()
	if started {
		l.loop()
	}
}

// wakeForProgress wakes the loop and returns its channels for Progress;
// false when the run ended without one.
func (l *runLoop) wakeForProgress() (req chan beatRequest, loopDone chan struct{}, ok bool) {
	l.wakeMu.Lock()
	started := l.takeLoop()
	req, loopDone = l.beatReq, l.loopDone
	l.wakeMu.Unlock()
	if started {
		go l.loop()
	}
	return req, loopDone, req != nil
}

// takeLoop moves the run from inline to looping and makes the loop's
// channels; false if it was not inline. l.wakeMu is held: execute's
// goroutine, failing to end the run inline, reads done under it.
func (l *runLoop) takeLoop() bool {
	if !l.state.CompareAndSwap(runInline, runLooping) {
		return false
	}
	l.done, l.beatReq, l.loopDone = make(chan error, 1), make(chan beatRequest), make(chan struct{})
	return true
}

// loop runs the run loop until the run is reported or given up.
func (l *runLoop) loop() {
	l.wakeT.Stop()
	l.st.w.unlistInline(l)
	if d := time.Until(l.firstDue); d > 0 {
		l.firstT = time.NewTimer(d)
		l.firstC = l.firstT.C
	} else {
		l.startBeats()
	}
	err, cause, report := l.run(l.done)
	l.close()
	if report {
		l.st.finishWith(l.base, err, cause) // ends the run once reported
	} else {
		l.end()
	}
}

// endInline ends a run whose handler returned before anything woke the
// loop: as the loop would on the handler's result.
func (l *runLoop) endInline(err error) {
	l.wakeT.Stop()
	l.st.w.unlistInline(l)
	cause := error(nil)
	if l.ctx.Err() != nil {
		// The timeout passed before the loop noticed it (its timer ran
		// late): the server ends the run itself.
		cause = context.Cause(l.ctx)
	}
	if l.stopTimer != nil {
		l.stopTimer()
	}
	l.cancel(nil)
	l.st.finishWith(l.base, err, cause) // ends the run once reported
}

// end marks the run ended, once its report was acknowledged or given up
// (or it needs none): Progress fails from now on and Run stops waiting
// for it.
func (l *runLoop) end() {
	if l.loopDone != nil { // the loop ended it
		close(l.loopDone)
	}
	l.runs.Done()
}

// endBeats ends the run's heartbeats, or keeps them from starting.
func (l *runLoop) endBeats() {
	l.firstC = nil
	if l.firstT != nil {
		l.firstT.Stop()
	}
	if l.stopBeats != nil {
		l.stopBeats()
	}
}

func (l *runLoop) close() {
	l.endBeats()
	if l.beatsEnded != nil {
		<-l.beatsEnded
	}
	if l.waitT != nil {
		l.waitT.Stop()
	}
	if l.stopTimer != nil {
		l.stopTimer()
	}
	l.cancel(nil)
}

// takeSlot takes the run's concurrency slot unless it took it as it
// arrived (startRuns); see waitSlot.
func (st *runState) takeSlot(ctx context.Context) error {
	if st.slotted {
		return nil
	}
	return waitSlot(ctx, st.kh.slots, st.w.stopping, st.w.clock)
}

// handle runs the handler once the run has a concurrency slot (a
// prefetched run waits for one, its lease kept by its heartbeats) and
// returns its result, or why it was never called (errNotStarted,
// errBufferWait, or the cause of the run's ctx).
func (l *runLoop) handle() error {
	st := l.st
	arrived := time.Now()
	if err := st.takeSlot(l.ctx); err != nil {
		if errors.Is(err, errBufferWait) {
			st.kh.hand.slow(time.Since(arrived))
		}
		st.kh.hand.leave(0)
		return err
	}
	began := time.Now()
	defer func() {
		<-st.kh.slots
		st.kh.hand.leave(max(time.Since(began), time.Nanosecond))
	}()
	return st.callWithRetries(l.ctx)
}

// cancelWith cancels the handler with cause c (once) and starts waiting
// CancelWait for it to return.
func (l *runLoop) cancelWith(c error) {
	if l.cause != nil {
		return
	}
	l.cause = c
	l.cancel(c)
	l.st.log().Info("rotaworker: handler cancelled", "cause", c)
	l.waitT = time.NewTimer(l.st.w.cfg.CancelWait)
	l.waitC = l.waitT.C
}

// run is the select loop: it returns once the run is to be reported,
// with the handler's result (or why it is reported without it) and why it
// was cancelled; report is false when the run was given up (its lease was
// lost).
func (l *runLoop) run(done <-chan error) (err, cause error, report bool) {
	st := l.st
	ctxDone, abandon := l.ctx.Done(), st.w.abandon
	for {
		select {
		case err := <-done:
			l.endBeats() // no heartbeat races the report
			if l.lost {
				st.log().Info("rotaworker: run abandoned: its lease was lost", "err", err)
				return nil, nil, false
			}
			return err, l.cause, true
		case <-l.firstC:
			l.firstC = nil
			l.startBeats()
		case b := <-l.beats:
			l.onBeat(b)
		case req := <-l.beatReq:
			if l.lost {
				req.reply <- context.Cause(l.ctx)
				continue
			}
			req.reply <- l.onBeat(st.beat(l.base, req.msg, 0))
		case <-abandon:
			abandon = nil
			l.cancelWith(ErrWorkerStopping)
		case <-ctxDone:
			ctxDone = nil
			l.cancelWith(context.Cause(l.ctx))
		case <-l.waitC:
			if l.lost {
				return nil, nil, false
			}
			return fmt.Errorf("the handler did not return within %s of its cancellation", st.w.cfg.CancelWait), l.cause, true
		}
	}
}

// finishWith reports the handler's result err (or why it was never
// called), cause being why it was cancelled (nil if it was not).
func (st *runState) finishWith(base context.Context, err, cause error) {
	if errors.Is(err, errNotStarted) || errors.Is(err, errBufferWait) {
		cause = ErrWorkerStopping // hand it back: another worker takes it at once
	}
	st.finish(base, st.lease(), err, cause)
}

// MaxMessage is the longest message the worker reports (the server keeps
// no more); longer ones are cut, keeping their start, and marked.
const MaxMessage = 64 << 10

func capMessage(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	cut := MaxMessage - 32
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n…(truncated)"
}

// finish reports the outcome of a run whose lease we still hold. err is
// the handler's result, cause why it was cancelled (nil if it was not). It
// returns once the report is on its way; the run ends (runLoop.end) once
// it is acknowledged or given up.
func (st *runState) finish(base context.Context, lease time.Time, err error, cause error) {
	id, runID := st.w.cfg.ID, st.claimed.RunID
	switch {
	case err == nil:
		var result json.RawMessage
		var msg string
		if st.outputs != nil {
			result, msg = st.outputs.outputs()
		}
		rep := rotaclient.Report{RunID: runID, Outcome: rotaclient.OutcomeSucceed, Message: capMessage(msg)}
		if result != nil {
			rep.Result = result
		}
		st.w.rep.report(base, st, lease, rep)
	case errors.Is(cause, ErrTimeout):
		// The server ends the run TIMEOUT at its own deadline (a report now
		// could reach it just before and record FAILED instead).
		st.log().Info("rotaworker: run timed out", "err", err)
		st.loop.end()
	default:
		msg := err.Error()
		noRetry := IsNoRetry(err)
		switch {
		case errors.Is(cause, ErrWorkerStopping):
			// Hand the run back: another worker takes it at once and the
			// task's retries are not spent.
			msg = "worker " + id + " stopped before the run finished: " + msg
			if errors.Is(err, errBufferWait) {
				msg = "worker " + id + " handed the run back unstarted: " + err.Error()
			}
			st.w.rep.report(base, st, lease, rotaclient.Report{RunID: runID, Outcome: rotaclient.OutcomeRelease, Message: capMessage(msg)})
			return
		case errors.Is(cause, ErrTaskStopped):
			msg = "stopped: " + msg
		}
		st.w.rep.report(base, st, lease, rotaclient.Report{RunID: runID, Outcome: rotaclient.OutcomeFail, Message: capMessage(msg), NoRetry: noRetry})
	}
}

// send delivers a report with one request of its own, retrying transport
// failures until the lease would have lapsed (after that the server has
// given the run up).
func (st *runState) send(base context.Context, lease time.Time, what string, f func(ctx context.Context) error) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(base, 10*time.Second)
		err := f(ctx)
		cancel()
		var re *rota.Error
		switch {
		case err == nil:
			return
		case errors.Is(err, rota.ErrLeaseLost):
			st.log().Info("rotaworker: report refused: the run is no longer this worker's", "report", what, "err", err)
			return
		case errors.As(err, &re) && re.Code != rota.CodeUnavailable:
			st.log().Error("rotaworker: report refused", "report", what, "err", err)
			return
		}
		d := backoff(attempt)
		if time.Now().Add(d).After(lease) {
			st.log().Error("rotaworker: report failed; the server will retry the task when its lease lapses", "report", what, "err", err)
			return
		}
		st.log().Warn("rotaworker: report failed, retrying", "report", what, "err", err, "retry_in", d)
		time.Sleep(d)
	}
}

// noRetryError marks an error that must not be retried.
type noRetryError struct{ err error }

func (e *noRetryError) Error() string { return e.err.Error() }
func (e *noRetryError) Unwrap() error { return e.err }

// NoRetry wraps err so that the failure it reports is final: the task
// fails at once whatever retries it has left. NoRetry(nil) is nil.
func NoRetry(err error) error {
	if err == nil {
		return nil
	}
	return &noRetryError{err: err}
}

// IsNoRetry reports whether err's chain holds an error made by NoRetry.
func IsNoRetry(err error) bool {
	var e *noRetryError
	return errors.As(err, &e)
}
