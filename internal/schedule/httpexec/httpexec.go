// Package httpexec is Rota's HTTP executor: it runs the runs of schedules
// that have an HTTP target inside the server, as a worker (see Executor).
// It dials only through the server's outbound address guard.
package httpexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/netguard"
	"github.com/rotahq/rota/internal/store"
)

// Defaults of Config.
const (
	// DefaultHTTPTimeout is the time limit of a target request whose
	// schedule has timeout_seconds ≤ 0.
	DefaultHTTPTimeout = 10 * time.Second
	// DefaultHTTPMaxInFlight caps the requests in flight at once.
	DefaultHTTPMaxInFlight = 64
	// DefaultHTTPMessageBytes caps the answer body kept in a failed run's
	// message.
	DefaultHTTPMessageBytes = 1024
	// HTTPBodyBytes caps the answer body read from a target; the rest is
	// not read.
	HTTPBodyBytes = 64 << 10
)

// Dispatcher is what the HTTP executor needs of the dispatcher: it is a
// worker like any other. *dispatch.Dispatcher implements it.
type Dispatcher interface {
	Claim(ctx context.Context, r dispatch.ClaimRequest) (store.TaskClaimResult, error)
	Heartbeat(ctx context.Context, runID, workerID, message string) (store.RunHeartbeatResult, error)
	Complete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error)
}

// TaskGetter reads a task (store.Store implements it).
type TaskGetter interface {
	TaskGet(ctx context.Context, id string) (*rota.Task, error)
}

// Config configures an Executor. Zero values mean the
// defaults.
type Config struct {
	Schedules  store.ScheduleStore // required: targets and their kinds
	Tasks      TaskGetter          // required: the schedule of a claimed run
	Dispatcher Dispatcher          // required
	// Guard is the only way out: every address a target resolves to, and
	// every redirect, is checked at dial time. Default: a guard with no
	// allow list (loopback, private, link-local… are refused).
	Guard   *netguard.Guard
	Clock   clock.Clock      // default clock.Real; drives timeouts and heartbeats
	Logger  *slog.Logger     // default slog.Default()
	Metrics *metrics.Metrics // optional

	MaxInFlight  int           // default DefaultHTTPMaxInFlight
	MessageBytes int           // default DefaultHTTPMessageBytes
	ClaimWait    time.Duration // long-poll wait of a claim (default 5s)
	KindsRefresh time.Duration // how often the target kinds are read again (default 5s; Changed: at once)
	// StopPoll is how often a request in flight checks whether its run
	// was asked to stop (a read, not a heartbeat), so that a stop aborts
	// it within that time (default DefaultHTTPStopPoll).
	StopPoll time.Duration
}

// DefaultHTTPStopPoll is the default Config.StopPoll: a stop
// aborts the request in flight within half a second.
const DefaultHTTPStopPoll = 500 * time.Millisecond

// Executor runs the runs of schedules that have a Target (the HTTP
// executor) inside the server: it is a worker whose id is
// rota.HTTPWorkerID, to which those runs are pinned. It claims through the
// dispatcher, heartbeats while the request is in flight and reports through
// the dispatcher, so runs are leased, stopped and timed out exactly like
// any worker's. It claims only the tasks pinned to it (PinnedOnly): a task
// submitted by hand to the kind of a target schedule, unpinned, is left to
// the kind's ordinary workers.
//
// Each request carries the run's payload as its body and the headers
// Rota-Run-Id, Rota-Task-Id, Rota-Schedule-Id and Rota-Fire-Time (unix
// seconds). A 2xx answer ends the run SUCCESS; any other ends it FAILED
// with the status and the start of the body in its message; no answer
// within the run's timeout ends it TIMEOUT (the store ends it so when the
// deadline passes; the executor cancels the request at the same moment);
// a stop (CANCEL_PREV, a user) cancels the request and the run ends
// CANCELED.
type Executor struct {
	cfg    Config       // immutable after New
	client *http.Client // cfg.Guard's: no global timeout, redirects checked

	slots   chan struct{} // one per request in flight
	wg      sync.WaitGroup
	quit    chan struct{}
	done    chan struct{}
	started atomic.Bool
	stop    sync.Once
	ctx     context.Context // canceled by Stop, or when Start's context ends
	abort   context.CancelFunc
	unhook  func() bool // set by Start: detaches halt from Start's context

	mu          sync.Mutex // guards the fields below
	kinds       []string
	kindsAt     time.Time
	claimCancel context.CancelFunc // ends the claim in progress (Changed)
}

// New checks cfg and applies its defaults.
func New(cfg Config) (*Executor, error) {
	if cfg.Schedules == nil || cfg.Tasks == nil || cfg.Dispatcher == nil {
		return nil, errors.New("httpexec: HTTP executor needs Schedules, Tasks and Dispatcher")
	}
	if cfg.Guard == nil {
		g, err := netguard.New(netguard.Config{})
		if err != nil {
			return nil, fmt.Errorf("httpexec: %w", err)
		}
		cfg.Guard = g
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultHTTPMaxInFlight
	}
	if cfg.MessageBytes <= 0 {
		cfg.MessageBytes = DefaultHTTPMessageBytes
	}
	if cfg.ClaimWait <= 0 {
		cfg.ClaimWait = 5 * time.Second
	}
	if cfg.KindsRefresh <= 0 {
		cfg.KindsRefresh = 5 * time.Second
	}
	if cfg.StopPoll <= 0 {
		cfg.StopPoll = DefaultHTTPStopPoll
	}
	// The root of the requests' contexts, for ClaimOnce and Execute called
	// before Start too; Stop cancels it, and so does the end of the context
	// given to Start (see halt).
	ctx, cancel := context.WithCancel(context.Background())
	return &Executor{
		cfg: cfg, client: cfg.Guard.Client(), slots: make(chan struct{}, cfg.MaxInFlight),
		quit: make(chan struct{}), done: make(chan struct{}), ctx: ctx, abort: cancel,
	}, nil
}

// Start claims and runs target runs in the background until Stop or until
// ctx ends (which stops it as Stop does, without waiting).
func (x *Executor) Start(ctx context.Context) error {
	if x.started.Swap(true) {
		return errors.New("httpexec: HTTP executor already started")
	}
	x.unhook = context.AfterFunc(ctx, x.halt)
	go x.loop()
	return nil
}

// halt stops claiming and cancels the requests in flight, once.
func (x *Executor) halt() {
	x.stop.Do(func() {
		close(x.quit)
		x.abort()
	})
}

// Stop stops claiming, cancels the requests in flight (their runs end
// CANCELED or are taken over when their lease lapses) and waits for them.
// It is idempotent.
func (x *Executor) Stop() {
	x.halt()
	if x.started.Load() {
		x.unhook()
		<-x.done
	}
	x.wg.Wait()
}

func (x *Executor) loop() {
	defer close(x.done)
	for {
		select {
		case <-x.quit:
			return
		default:
		}
		n, err := x.ClaimOnce(x.ctx, x.cfg.ClaimWait)
		if err != nil && x.ctx.Err() == nil {
			x.cfg.Logger.Warn("http executor: claim", "err", err)
		}
		if n == 0 {
			t := x.cfg.Clock.NewTimer(x.cfg.KindsRefresh / 5)
			select {
			case <-t.C():
			case <-x.quit:
				t.Stop()
				return
			}
			t.Stop()
		}
	}
}

// targetKinds returns the kinds of target schedules, read again every
// KindsRefresh.
func (x *Executor) targetKinds(ctx context.Context) ([]string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.cfg.Clock.Now()
	if x.kinds != nil && now.Sub(x.kindsAt) < x.cfg.KindsRefresh && !now.Before(x.kindsAt) {
		return x.kinds, nil
	}
	kinds, err := x.cfg.Schedules.ScheduleTargetKinds(ctx)
	if err != nil {
		return nil, err
	}
	x.kinds, x.kindsAt = append([]string{}, kinds...), now
	return x.kinds, nil
}

// Changed tells the executor that a schedule changed on this node: it
// reads the target kinds again at once, ending a claim in progress that
// waits on the old ones, so a new target kind is served without delay.
// (A changed target URL, method or headers needs nothing: each request
// reads its schedule when it starts.) Safe from any goroutine.
func (x *Executor) Changed() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.kinds = nil
	if x.claimCancel != nil {
		x.claimCancel()
	}
}

// ClaimOnce claims as many target runs as there are free slots (waiting up
// to wait for some) and starts executing them in the background. It
// returns how many it started.
func (x *Executor) ClaimOnce(ctx context.Context, wait time.Duration) (int, error) {
	kinds, err := x.targetKinds(ctx)
	if err != nil || len(kinds) == 0 {
		return 0, err
	}
	// Take one slot first (waiting for it), then any free ones.
	select {
	case x.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, nil
	}
	free := 1
	for free < x.cfg.MaxInFlight {
		select {
		case x.slots <- struct{}{}:
			free++
			continue
		default:
		}
		break
	}
	cctx, cancel := context.WithCancel(ctx)
	x.mu.Lock()
	x.claimCancel = cancel
	x.mu.Unlock()
	res, err := x.cfg.Dispatcher.Claim(cctx, dispatch.ClaimRequest{
		WorkerID: rota.HTTPWorkerID, Kinds: kinds, Max: free, Wait: wait, PinnedOnly: true,
	})
	x.mu.Lock()
	x.claimCancel = nil
	x.mu.Unlock()
	cancel()
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		err = nil // ended by Changed: claim again with the new kinds
	}
	for range free - len(res.Runs) {
		<-x.slots
	}
	if err != nil {
		return 0, err
	}
	for _, r := range res.Runs {
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			defer func() { <-x.slots }()
			x.Execute(x.ctx, r)
		}()
	}
	return len(res.Runs), nil
}

// Errors that end a request early, as the cause of its context.
var (
	errRunTimeout = errors.New("the run's timeout passed")
	errRunStopped = errors.New("the run was asked to stop")
	errLeaseLost  = errors.New("the run's lease was lost")
)

// Execute runs one claimed run to its end and reports it. It returns the
// status the run ended in as the executor saw it ("" when the report was
// refused, e.g. the lease was lost).
func (x *Executor) Execute(ctx context.Context, c rota.ClaimedRun) rota.Status {
	task, err := x.cfg.Tasks.TaskGet(ctx, c.TaskID)
	var sched *rota.Schedule
	if err == nil && task.ScheduleID != "" {
		sched, err = x.cfg.Schedules.ScheduleGet(ctx, task.ScheduleID)
	}
	// Defensive: the executor claims only tasks pinned to it, but nothing
	// stops a client from pinning a task to rota.HTTPWorkerID by hand, and
	// a run's schedule may have been deleted or lost its target since.
	// With no target to call, such a task fails with the reason rather
	// than wait forever.
	if err != nil || sched == nil || sched.Target == nil {
		why := "it has no schedule with an HTTP target"
		if err != nil {
			why = err.Error()
		}
		return x.report(ctx, c, false, fmt.Sprintf("Rota's HTTP executor cannot run task %s: %s", c.TaskID, why), nil)
	}
	timeout := time.Duration(c.TimeoutSeconds) * time.Second // 0: none, as for any task
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatch := x.watch(rctx, cancel, c, timeout)
	defer stopWatch()

	t := sched.Target
	method := t.Method
	if method == "" {
		method = http.MethodPost
	}
	// The target's headers go to its own host only, never past a
	// redirect to another.
	secrets := make([]string, 0, len(t.Headers))
	for k := range t.Headers {
		secrets = append(secrets, k)
	}
	req, err := http.NewRequestWithContext(netguard.WithSecretHeaders(rctx, secrets), method, t.URL, bytes.NewReader(c.Payload))
	if err != nil {
		return x.report(ctx, c, false, "bad target: "+err.Error(), nil)
	}
	if err := x.cfg.Guard.CheckURL(t.URL); err != nil {
		x.refuse(ctx, sched, err.Error())
		return x.report(ctx, c, false, err.Error(), nil)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Rota-Run-Id", c.RunID)
	req.Header.Set("Rota-Task-Id", c.TaskID)
	req.Header.Set("Rota-Schedule-Id", sched.ID)
	if !task.FireTime.IsZero() {
		req.Header.Set("Rota-Fire-Time", strconv.FormatInt(task.FireTime.Unix(), 10))
	}
	resp, err := x.client.Do(req)
	if err != nil {
		switch cause := context.Cause(rctx); {
		case errors.Is(cause, errRunTimeout):
			return x.report(ctx, c, false, fmt.Sprintf("timeout: no answer from %s within %v", t.URL, timeout), errRunTimeout)
		case errors.Is(cause, errRunStopped):
			return x.report(ctx, c, false, "canceled: the request was aborted because the run was stopped", nil)
		case errors.Is(cause, errLeaseLost):
			return ""
		case ctx.Err() != nil:
			return x.report(ctx, c, false, "aborted: Rota's HTTP executor stopped (server shutdown) before an answer came", nil)
		}
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			x.refuse(ctx, sched, refused.Error())
			return x.report(ctx, c, false, refused.Error(), nil)
		}
		return x.report(ctx, c, false, redact("request failed: "+err.Error(), t.Headers), nil)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, HTTPBodyBytes))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return x.report(ctx, c, true, fmt.Sprintf("HTTP %d", resp.StatusCode), nil)
	}
	quoted := capText([]byte(redact(string(body), t.Headers)), x.cfg.MessageBytes)
	return x.report(ctx, c, false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, quoted), nil)
}

// refuse puts schedule s in the error state (the plan error state): its
// target is refused by the server's address guard, so it cannot go on; it
// fires nothing until fixed and resumed. The change goes through the
// store (compare-and-set, retried when the engine moved the Version), so
// every node's engine sees it at its next poll.
func (x *Executor) refuse(ctx context.Context, s *rota.Schedule, why string) {
	ctx = context.WithoutCancel(ctx)
	for range 5 {
		cur, err := x.cfg.Schedules.ScheduleGet(ctx, s.ID)
		if err != nil || cur.ErrorMessage != "" {
			return
		}
		cur.ErrorMessage = "the target is refused by the server's address guard: " + why
		cur.NextFire = time.Time{}
		_, err = x.cfg.Schedules.ScheduleUpdate(ctx, store.ScheduleUpdateParams{Schedule: *cur, Now: x.cfg.Clock.Now()})
		if err == nil || !errors.Is(err, rota.ErrConflict) {
			if err != nil {
				x.cfg.Logger.Warn("http executor: put schedule in the error state", "schedule", s.ID, "err", err)
			}
			return
		}
	}
}

// redact replaces the target's header values in msg (an answer that
// echoes them, an error quoting them) with "***": a run's message is
// shown to anyone who can read runs.
func redact(msg string, headers map[string]string) string {
	for _, v := range headers {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "***")
		}
	}
	return msg
}

// watch cancels the request when the run's timeout passes (none when
// timeout is 0), when it was asked to stop (checked every StopPoll, and by
// each heartbeat) and when the lease is lost; it heartbeats every third of
// the lease meanwhile.
func (x *Executor) watch(ctx context.Context, cancel context.CancelCauseFunc, c rota.ClaimedRun, timeout time.Duration) func() {
	hb := time.Duration(c.HeartbeatTimeoutSeconds) * time.Second / 3
	if hb <= 0 {
		hb = time.Second
	}
	done := make(chan struct{})
	// The timers start now, before the request is sent.
	var deadline clock.Timer
	var deadlineC <-chan time.Time
	if timeout > 0 {
		deadline = x.cfg.Clock.NewTimer(timeout)
		deadlineC = deadline.C()
	}
	beat := x.cfg.Clock.NewTimer(hb)
	poll := x.cfg.Clock.NewTimer(x.cfg.StopPoll)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer beat.Stop()
		defer poll.Stop()
		if deadline != nil {
			defer deadline.Stop()
		}
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-deadlineC:
				cancel(errRunTimeout)
				return
			case <-poll.C():
				if x.stopAsked(ctx, c) {
					cancel(errRunStopped)
					return
				}
				poll.Reset(x.cfg.StopPoll)
			case <-beat.C():
				res, err := x.cfg.Dispatcher.Heartbeat(ctx, c.RunID, rota.HTTPWorkerID, "")
				switch {
				case errors.Is(err, rota.ErrLeaseLost), errors.Is(err, rota.ErrNotFound):
					cancel(errLeaseLost)
					return
				case err == nil && res.Stop:
					cancel(errRunStopped)
					return
				}
				beat.Reset(hb)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// stopAsked reports whether run c was asked to stop (a user's stop,
// CANCEL_PREV), reading its task.
func (x *Executor) stopAsked(ctx context.Context, c rota.ClaimedRun) bool {
	t, err := x.cfg.Tasks.TaskGet(ctx, c.TaskID)
	if err != nil {
		return false // the heartbeat decides
	}
	for _, r := range t.Runs {
		if r.ID == c.RunID {
			return r.StopRequested
		}
	}
	return false
}

// report completes the run and returns the status it ended in.
func (x *Executor) report(ctx context.Context, c rota.ClaimedRun, ok bool, msg string, why error) rota.Status {
	task, err := x.cfg.Dispatcher.Complete(context.WithoutCancel(ctx), store.RunCompleteParams{
		RunID: c.RunID, WorkerID: rota.HTTPWorkerID, Success: ok, Message: msg,
	})
	var status rota.Status
	switch {
	case err == nil:
		status = task.Status
		for _, r := range task.Runs {
			if r.ID == c.RunID {
				status = r.Status
			}
		}
	case errors.Is(err, rota.ErrLeaseLost) && errors.Is(why, errRunTimeout):
		// The store saw the deadline pass and ended the run TIMEOUT.
		status = rota.StatusTimeout
	default:
		x.cfg.Logger.Warn("http executor: report", "task", c.TaskID, "run", c.RunID, "err", err)
		return ""
	}
	// The end of the run is counted from the dispatcher's task event
	// (metrics.ObserveEvent), as for a worker's run.
	return status
}

// capText returns b as text cut to n bytes on a rune boundary.
func capText(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}
