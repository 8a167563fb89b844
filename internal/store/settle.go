package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rotahq/rota"
)

// RunOutcome is how a run ended, from its task's point of view.
type RunOutcome int

// The run outcomes.
const (
	OutcomeSuccess        RunOutcome = iota
	OutcomeFailure                   // the worker reported failure
	OutcomeLeaseLapsed               // no heartbeat within the lease
	OutcomeDeadlinePassed            // the task's timeout passed
	OutcomeReleased                  // the worker handed the run back unfinished
)

// SettleTask is the state of an unfinished task when one of its runs ends.
// Running already excludes the run that ended.
type SettleTask struct {
	Workers, MaxRetries                     int
	HeartbeatTimeoutSeconds, TimeoutSeconds int
	Running, Successes, Failures            int
	StopRequested                           bool // the task itself was stopped
	RunAt, EndTime                          time.Time
	Message                                 string
	Result                                  json.RawMessage
}

// SettleRun is how a run ended.
type SettleRun struct {
	Outcome       RunOutcome
	StopRequested bool            // the run was asked to stop (task stop, narrowed worker ids)
	Message       string          // the worker's report ("" for expiries)
	Result        json.RawMessage // success only
	Retry         bool            // failure only
	Now           time.Time
	Backoff       func(n int) time.Duration // nil: retry at once
}

// Settled is the task after the run ended: what a backend stores.
type Settled struct {
	Status              rota.Status
	Done, Avail         bool
	Successes, Failures int
	RunAt, EndTime      time.Time
	Message             string
	Result              json.RawMessage
	StopOthers          bool // ask the task's other running runs to stop (it just failed for good)
}

// Settle computes a task's next state after one of its runs ended: the
// rules of RunComplete and RunExpire in one place, so that every backend
// applies them alike. It is pure; backends store its result.
func Settle(t SettleTask, r SettleRun) Settled {
	now := r.Now
	s := Settled{Successes: t.Successes, Failures: t.Failures, RunAt: t.RunAt, EndTime: t.EndTime,
		Message: r.Message, Result: t.Result}
	var terminal rota.Status
	switch {
	case r.StopRequested || r.Outcome == OutcomeReleased:
		if t.StopRequested {
			// The task keeps the reason it was stopped for; the run keeps
			// what its worker reported.
			s.Message = t.Message
			if t.Running == 0 {
				terminal = rota.StatusCanceled
			}
		} else if t.Running == 0 {
			// Only this run was stopped (its worker is no longer allowed)
			// or it was handed back: the task goes back to the queue,
			// nothing counted against it.
			s.RunAt = now
			if s.Message == "" {
				s.Message = "released by its worker"
			}
		}
	case r.Outcome == OutcomeSuccess:
		s.Successes++
		if len(r.Result) > 0 {
			s.Result = r.Result
		}
		if s.Successes >= t.Workers {
			terminal = rota.StatusSuccess
		}
	default:
		s.Failures++
		if s.Message == "" {
			switch r.Outcome {
			case OutcomeLeaseLapsed:
				s.Message = fmt.Sprintf("lease expired: no heartbeat within %ds", t.HeartbeatTimeoutSeconds)
			case OutcomeDeadlinePassed:
				s.Message = fmt.Sprintf("timeout: the run exceeded %ds", t.TimeoutSeconds)
			default:
				s.Message = "failed"
			}
		}
		switch {
		case (r.Outcome == OutcomeFailure && !r.Retry) || s.Failures > t.MaxRetries:
			terminal = rota.StatusFailed
			if r.Outcome == OutcomeDeadlinePassed {
				terminal = rota.StatusTimeout
			}
			s.StopOthers = t.Running > 0
		case r.Outcome == OutcomeLeaseLapsed || r.Backoff == nil:
			s.RunAt = now // a vanished worker's task is taken over at once
		default:
			s.RunAt = now.Add(r.Backoff(s.Failures))
		}
	}
	s.Status = rota.StatusScheduled
	if t.Running > 0 {
		s.Status = rota.StatusRunning
	}
	if terminal != "" {
		s.Status, s.Done, s.EndTime = terminal, true, now
	}
	s.Avail = !s.Done && !t.StopRequested && t.Running+s.Successes < t.Workers
	return s
}

// ReportSettle is how a worker's report p ends its run: the run's status
// (CANCELED for a released run or one asked to stop) and the SettleRun for
// its task. Now is p.Now at the stored precision (milliseconds, UTC).
func ReportSettle(p RunCompleteParams, runStopRequested bool) (rota.Status, SettleRun) {
	out, status := OutcomeFailure, rota.StatusFailed
	switch {
	case p.Release:
		out, status = OutcomeReleased, rota.StatusCanceled
	case p.Success:
		out, status = OutcomeSuccess, rota.StatusSuccess
	}
	if runStopRequested {
		status = rota.StatusCanceled
	}
	return status, SettleRun{
		Outcome: out, StopRequested: runStopRequested, Message: p.Message, Result: p.Result, Retry: p.Retry,
		Now: FromMillis(Millis(p.Now)), Backoff: p.Backoff,
	}
}

// ExpirySettle is how a run whose lease or deadline passed at now ends
// (TIMEOUT): the run's message and the SettleRun for its task; a passed
// deadline (not zero, at or before now) counts before a lapsed lease.
func ExpirySettle(deadline, now time.Time, runStopRequested bool, backoff func(n int) time.Duration) (string, SettleRun) {
	run := SettleRun{Outcome: OutcomeLeaseLapsed, StopRequested: runStopRequested, Now: FromMillis(Millis(now)), Backoff: backoff}
	msg := "lease expired: no heartbeat in time"
	if !deadline.IsZero() && Millis(deadline) <= Millis(now) {
		run.Outcome = OutcomeDeadlinePassed
		msg = "timeout: the run exceeded its time limit"
	}
	return msg, run
}

// RunExpiresAt is when a run stops being held: its lease end or its
// deadline (0: none), whichever comes first; unix milliseconds.
func RunExpiresAt(lease, deadline int64) int64 {
	if deadline != 0 && deadline < lease {
		return deadline
	}
	return lease
}

// Settle applies the end of one of the task's runs to the row (its
// Running count already excludes the run) and returns what Settle
// decided, for what the row does not hold (StopOthers).
func (t *TaskRow) Settle(run SettleRun) Settled {
	st := Settle(SettleTask{
		Workers: t.Workers, MaxRetries: t.MaxRetries,
		HeartbeatTimeoutSeconds: t.HeartbeatTimeoutSeconds, TimeoutSeconds: t.TimeoutSeconds,
		Running: t.Running, Successes: t.Successes, Failures: t.Failures, StopRequested: t.StopRequested,
		RunAt: t.RunAt, EndTime: t.EndTime, Message: t.Message, Result: t.Result,
	}, run)
	t.Done, t.Avail, t.Successes, t.Failures = st.Done, st.Avail, st.Successes, st.Failures
	t.Status, t.RunAt, t.EndTime, t.Message, t.Result = st.Status, st.RunAt, st.EndTime, st.Message, st.Result
	t.IsSucceed = st.Status == rota.StatusSuccess
	return st
}
