package rotaworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
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
	// Payload is the task's payload decoded into a T.
	Payload T
	// Raw is the payload as submitted.
	Raw json.RawMessage
	// Timeout is the run's time limit (0: none); the handler's context
	// ends when it passes.
	Timeout time.Duration
	// HeartbeatTimeout is the lease the worker's heartbeats renew.
	HeartbeatTimeout time.Duration

	st *runState // nil for a Task built by hand
	mu sync.Mutex
	// set by the handler, read by the worker after the handler returns
	result  json.RawMessage
	message string
}

func newTask[T any](st *runState, v T) *Task[T] {
	cr := st.claimed
	t := &Task[T]{
		ID: cr.TaskID, RunID: cr.RunID, Kind: cr.Kind, Priority: cr.Priority, Attempt: cr.Attempt,
		Payload: v, Raw: cr.Payload, Timeout: time.Duration(cr.TimeoutSeconds) * time.Second,
		HeartbeatTimeout: st.hbTimeout, st: st,
	}
	st.outputs = t.outputs
	return t
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
	w         *Worker
	kh        *kindHandler
	claimed   rota.ClaimedRun
	log       *slog.Logger
	hbTimeout time.Duration // at claim time; the run loop follows later changes
	interval  time.Duration // heartbeat period: a third of hbTimeout
	claimSent time.Time     // the lease started no earlier than this

	beatReq  chan beatRequest // Progress asks the run loop for a heartbeat
	loopDone chan struct{}    // closed when execute returns

	// Set once by newTask, before the handler runs; read after it returned.
	outputs func() (json.RawMessage, string)
}

func newRunState(w *Worker, kh *kindHandler, cr rota.ClaimedRun, sent time.Time) *runState {
	hb := time.Duration(cr.HeartbeatTimeoutSeconds) * time.Second
	if hb <= 0 {
		hb = DefaultHeartbeatTimeout
	}
	return &runState{
		w: w, kh: kh, claimed: cr, hbTimeout: hb, interval: max(hb/3, 20*time.Millisecond), claimSent: sent,
		log:     w.log.With("kind", cr.Kind, "task_id", cr.TaskID, "run_id", cr.RunID),
		beatReq: make(chan beatRequest), loopDone: make(chan struct{}),
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

// execute runs the handler of one claimed run in a select over its
// result, heartbeats (and Progress), the timeout, the lease and the
// worker's stop. The run's slot is released when the handler returns.
func (st *runState) execute(base context.Context) {
	defer close(st.loopDone)
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	if st.claimed.TimeoutSeconds > 0 {
		var c context.CancelFunc
		ctx, c = context.WithDeadlineCause(ctx, st.claimSent.Add(time.Duration(st.claimed.TimeoutSeconds)*time.Second), ErrTimeout)
		defer c()
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-st.kh.slots }()
		done <- st.call(ctx)
	}()

	ticker := time.NewTicker(st.interval)
	defer ticker.Stop()
	var (
		hb      = st.hbTimeout         // the task's lease length; a heartbeat reply may change it
		lease   = st.claimSent.Add(hb) // our view of the lease's end
		lost    bool                   // the run is no longer ours
		cause   error                  // why the handler was cancelled
		waitT   *time.Timer            // CancelWait after the cancellation
		waitC   <-chan time.Time
		ctxDone = ctx.Done()
		abandon = st.w.abandon
	)
	cancelWith := func(c error) {
		if cause != nil {
			return
		}
		cause = c
		cancel(c)
		st.log.Info("rotaworker: handler cancelled", "cause", c)
		waitT = time.NewTimer(st.w.cfg.CancelWait)
		waitC = waitT.C
	}
	defer func() {
		if waitT != nil {
			waitT.Stop()
		}
	}()
	beat := func(msg string) error {
		if lost {
			return context.Cause(ctx)
		}
		sent := time.Now()
		hctx, c := context.WithDeadline(base, lease)
		res, err := st.w.client.Heartbeat(hctx, st.claimed.RunID, st.w.cfg.ID, msg)
		c()
		st.log.Debug("rotaworker: heartbeat", "took", time.Since(sent), "err", err)
		switch {
		case err == nil:
			if res.HeartbeatTimeout > 0 && res.HeartbeatTimeout != hb {
				// The task's heartbeat timeout was changed: follow it.
				hb = res.HeartbeatTimeout
				ticker.Reset(max(hb/3, 20*time.Millisecond))
			}
			lease = sent.Add(hb)
			if res.Drain {
				st.log.Info("rotaworker: the server asked this worker to stop")
				st.w.graceful()
			}
			if res.Stop {
				cancelWith(ErrTaskStopped)
				return ErrTaskStopped
			}
			return nil
		case errors.Is(err, rota.ErrLeaseLost):
			lost = true
			cancelWith(err)
			return err
		case errors.Is(err, rota.ErrNotFound):
			lost = true
			err = fmt.Errorf("%w: %v", rota.ErrLeaseLost, err)
			cancelWith(err)
			return err
		case !time.Now().Before(lease):
			lost = true
			err = fmt.Errorf("%w: no heartbeat acknowledged within %s (last error: %v)", rota.ErrLeaseLost, hb, err)
			cancelWith(err)
			return err
		}
		st.log.Warn("rotaworker: heartbeat failed", "err", err)
		return err
	}

	for {
		select {
		case err := <-done:
			if !lost {
				st.finish(base, lease, err, cause)
			} else {
				st.log.Info("rotaworker: run abandoned: its lease was lost", "err", err)
			}
			return
		case <-ticker.C:
			if !lost {
				beat("")
			}
		case req := <-st.beatReq:
			req.reply <- beat(req.msg)
		case <-abandon:
			abandon = nil
			cancelWith(ErrWorkerStopping)
		case <-ctxDone:
			ctxDone = nil
			cancelWith(context.Cause(ctx))
		case <-waitC:
			if !lost {
				st.finish(base, lease, fmt.Errorf("the handler did not return within %s of its cancellation", st.w.cfg.CancelWait), cause)
			}
			return
		}
	}
}

// progress heartbeats at once through the run loop.
// beatRequest asks the run loop for a heartbeat now, with a progress note.
type beatRequest struct {
	msg   string
	reply chan error
}

func (st *runState) progress(ctx context.Context, msg string) error {
	req := beatRequest{msg: msg, reply: make(chan error, 1)}
	select {
	case st.beatReq <- req:
	case <-st.loopDone:
		return fmt.Errorf("rotaworker: progress after the run ended")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
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
// returns once the report is acknowledged or given up.
func (st *runState) finish(base context.Context, lease time.Time, err error, cause error) {
	id, runID := st.w.cfg.ID, st.claimed.RunID
	switch {
	case err == nil:
		var result json.RawMessage
		var msg string
		if st.outputs != nil {
			result, msg = st.outputs()
		}
		rep := rotaclient.Report{RunID: runID, Outcome: rotaclient.OutcomeSucceed, Message: capMessage(msg)}
		if result != nil {
			rep.Result = result
		}
		st.w.rep.report(base, st, lease, rep)
	case errors.Is(cause, ErrTimeout):
		// The server ends the run TIMEOUT at its own deadline (a report now
		// could reach it just before and record FAILED instead).
		st.log.Info("rotaworker: run timed out", "err", err)
	default:
		msg := err.Error()
		noRetry := IsNoRetry(err)
		switch {
		case errors.Is(cause, ErrWorkerStopping):
			// Hand the run back: another worker takes it at once and the
			// task's retries are not spent.
			msg = "worker " + id + " stopped before the run finished: " + msg
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
			st.log.Info("rotaworker: report refused: the run is no longer this worker's", "report", what, "err", err)
			return
		case errors.As(err, &re) && re.Code != rota.CodeUnavailable:
			st.log.Error("rotaworker: report refused", "report", what, "err", err)
			return
		}
		d := backoff(attempt)
		if time.Now().Add(d).After(lease) {
			st.log.Error("rotaworker: report failed; the server will retry the task when its lease lapses", "report", what, "err", err)
			return
		}
		st.log.Warn("rotaworker: report failed, retrying", "report", what, "err", err, "retry_in", d)
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
