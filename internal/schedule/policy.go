package schedule

import (
	"time"

	"github.com/rotahq/rota"
)

// This file holds the pure decision logic of the run policies:
// what each fire time does given the schedule's unfinished runs and its
// previous run. The engine calls it inside the store's fire transaction with
// the live run state, so decisions never race with runs ending.
//
// Definitions (documented in docs and on rota.Schedule):
//
//   - The previous run is the schedule's latest run that is not a SKIPPED
//     record of a reason other than failure (overlap, concurrency, queue
//     and misfire skips are transparent: a failure is still answered after
//     them, and a failure skip answers it once).
//   - Overlap: the previous run is unfinished — SCHEDULED (waiting for a
//     worker, or held by QUEUE) or RUNNING — and no stop was asked of it.
//     the original rule checks RUNNING only; in a queue a fired run may wait for a
//     worker, and it is still the round in progress.
//   - Live runs: unfinished runs without a stop request. Active runs: live
//     runs that are not held. max_concurrency bounds the active runs.
//   - CANCEL_PREV stops every live run (the newest round supersedes all the
//     earlier ones), so that the new run never finds the concurrency limit
//     taken by a round it has just canceled.
//   - PARALLEL ignores max_concurrency for this fire only when it overlaps.
//   - QUEUE holds a run back (stored, not claimable) while the limit is
//     reached and releases held runs oldest first as slots free; at most
//     maxQueued are held, further fires are SKIPPED with reason queue_full.

// Defaults of the BACKOFF and HALF_OPEN failure actions, used when the
// schedule's field is 0.
const (
	DefaultBackoffSeconds    = 60
	DefaultBackoffMaxSeconds = 3600
	DefaultFailureThreshold  = 3
	DefaultCooldownSeconds   = 300
)

// policy is a schedule's run policies, defaults applied.
type policy struct {
	maxConcurrency int
	concurrency    rota.ConcurrencyPolicy
	overlap        rota.OverlapAction
	failure        rota.FailureAction
	maxQueued      int
	backoff        time.Duration // BACKOFF: first delay
	backoffMax     time.Duration // BACKOFF: cap
	threshold      int           // HALF_OPEN: failures that open the circuit
	cooldown       time.Duration // HALF_OPEN: how long it stays open
}

// orDefault returns v, or def when v ≤ 0.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func policyOf(s *rota.Schedule, maxQueued int) policy {
	p := policy{
		maxConcurrency: s.MaxConcurrency,
		concurrency:    s.ConcurrencyPolicy,
		overlap:        s.OverlapAction,
		failure:        s.FailureAction,
		maxQueued:      maxQueued,
	}
	if p.maxConcurrency < 1 {
		p.maxConcurrency = 1
	}
	if !p.concurrency.Valid() {
		p.concurrency = rota.ConcurrencySkip
	}
	if !p.overlap.Valid() {
		p.overlap = rota.OverlapAllow
	}
	if !p.failure.Valid() {
		p.failure = rota.FailureRunNew
	}
	if p.maxQueued < 1 {
		p.maxQueued = DefaultMaxQueued
	}
	p.backoff = time.Duration(orDefault(s.BackoffSeconds, DefaultBackoffSeconds)) * time.Second
	p.backoffMax = time.Duration(orDefault(s.BackoffMaxSeconds, DefaultBackoffMaxSeconds)) * time.Second
	p.threshold = orDefault(s.FailureThreshold, DefaultFailureThreshold)
	p.cooldown = time.Duration(orDefault(s.CooldownSeconds, DefaultCooldownSeconds)) * time.Second
	return p
}

// failState is the failure state of a schedule (rota.ScheduleState's
// ConsecutiveFailures, Circuit, NextAllowedAt and CountedRunID) as decide
// updates it.
type failState struct {
	failures    int
	circuit     rota.Circuit
	nextAllowed time.Time
	counted     string // the run whose outcome was counted last
}

func failStateOf(st *rota.ScheduleState) *failState {
	return &failState{failures: st.ConsecutiveFailures, circuit: st.Circuit, nextAllowed: st.NextAllowedAt, counted: st.CountedRunID}
}

// store writes fs back into st.
func (fs *failState) store(st *rota.ScheduleState) {
	st.ConsecutiveFailures, st.Circuit, st.NextAllowedAt, st.CountedRunID = fs.failures, fs.circuit, fs.nextAllowed, fs.counted
}

// backoffDelay is BACKOFF's wait after n consecutive failures:
// backoff × 2^(n−1), at most backoffMax.
func (p policy) backoffDelay(n int) time.Duration {
	d := p.backoff
	for i := 1; i < n && d < p.backoffMax; i++ {
		d *= 2
	}
	return min(d, p.backoffMax)
}

// count takes in the outcome of the previous run, once per run: a failure
// adds to the failures in a row (and sets BACKOFF's wait or opens
// HALF_OPEN's circuit), a success resets them and closes the circuit.
func (fs *failState) count(p policy, last *rota.ScheduleRun, ft time.Time) {
	if last == nil || last.Unfinished() || last.Status == rota.StatusSkipped || last.TaskID == fs.counted {
		return
	}
	fs.counted = last.TaskID
	end := last.EndTime
	if end.IsZero() {
		end = ft
	}
	if !last.Failed() {
		fs.failures, fs.nextAllowed = 0, time.Time{}
		if p.failure == rota.FailureHalfOpen {
			fs.circuit = rota.CircuitClosed
		}
		return
	}
	fs.failures++
	switch p.failure {
	case rota.FailureBackoff:
		fs.nextAllowed = end.Add(p.backoffDelay(fs.failures))
	case rota.FailureHalfOpen:
		if fs.circuit == rota.CircuitHalfOpen || fs.failures >= p.threshold {
			fs.circuit, fs.nextAllowed = rota.CircuitOpen, end.Add(p.cooldown)
		}
	}
}

// gate returns the skip reason of fire time ft under BACKOFF and
// HALF_OPEN ("" when it may fire), moving an open circuit whose cool-down
// passed to half_open (ft is then its trial). trialLive says a run fired
// while the circuit was half_open is still unfinished.
func (fs *failState) gate(p policy, ft time.Time, trialLive bool) rota.SkipReason {
	switch p.failure {
	case rota.FailureBackoff:
		if !fs.nextAllowed.IsZero() && ft.Before(fs.nextAllowed) {
			return rota.SkipBackoff
		}
	case rota.FailureHalfOpen:
		switch fs.circuit {
		case rota.CircuitOpen:
			if ft.Before(fs.nextAllowed) {
				return rota.SkipCircuitOpen
			}
			fs.circuit = rota.CircuitHalfOpen
		case rota.CircuitHalfOpen:
			if trialLive {
				return rota.SkipCircuitOpen
			}
		}
	}
	return ""
}

// verdictKind is what a fire does.
type verdictKind int

const (
	verdictRun  verdictKind = iota // a run, claimable at once
	verdictHold                    // a run held back by QUEUE
	verdictSkip                    // a SKIPPED record
)

// verdict is the decision for one fire time.
type verdict struct {
	fireTime time.Time
	kind     verdictKind
	attempt  int
	reason   rota.SkipReason // verdictSkip
	retry    bool            // attempt follows a failed run (failure_action RETRY)
	cancel   []string        // runs stopped before this one (CANCEL_PREV)
	taskID   string          // id of the new run
}

// decision is the outcome of decide.
type decision struct {
	release  []string  // held runs to release, oldest first
	verdicts []verdict // one per fire time, in order
	cancel   []string  // every run to stop
	last     string    // the new previous run (task id); "" when unchanged
	heldLeft int       // held runs after the decision
	openLeft int       // unfinished runs after the decision (stopped ones included)
}

// runSet is the simulated run state while decide walks the fire times.
type runSet struct {
	open     []rota.ScheduleRun
	last     *rota.ScheduleRun
	canceled map[string]bool
}

func (rs *runSet) live(r *rota.ScheduleRun) bool {
	return r.Unfinished() && !r.StopRequested && !rs.canceled[r.TaskID]
}

func (rs *runSet) counts() (active, held int) {
	for i := range rs.open {
		r := &rs.open[i]
		if !rs.live(r) {
			continue
		}
		if r.Held {
			held++
		} else {
			active++
		}
	}
	return active, held
}

// decide applies the policies to each fire time in order, given the
// schedule's unfinished runs (oldest first) and its previous run. newID
// makes the task ids of new runs. It keeps no failure state: BACKOFF and
// HALF_OPEN need decideFailing.
func decide(p policy, open []rota.ScheduleRun, last *rota.ScheduleRun, fires []time.Time, newID func() string) decision {
	return decideFailing(p, open, last, fires, newID, nil)
}

// decideFailing is decide with the schedule's failure state fs (nil: none
// kept), which it counts the previous run's outcome into and which gates
// the fires of BACKOFF and HALF_OPEN schedules.
func decideFailing(p policy, open []rota.ScheduleRun, last *rota.ScheduleRun, fires []time.Time, newID func() string, fs *failState) decision {
	rs := runSet{open: append([]rota.ScheduleRun(nil), open...), canceled: map[string]bool{}}
	if last != nil {
		l := *last
		rs.last = &l
	}
	var d decision
	// Held runs are older than any new fire: release them first.
	if p.concurrency == rota.ConcurrencyQueue {
		d.release = rs.releaseHeld(p.maxConcurrency)
	}
	for _, ft := range fires {
		d.verdicts = append(d.verdicts, rs.fireOne(p, ft, newID, fs, &d))
	}
	for i := range d.verdicts {
		if d.verdicts[i].kind == verdictSkip && d.verdicts[i].taskID == "" {
			d.verdicts[i].taskID = newID()
		}
	}
	d.openLeft, d.heldLeft = rs.left()
	return d
}

// releaseHeld releases held runs, oldest first, while fewer than max runs
// are active, and returns their task ids.
func (rs *runSet) releaseHeld(max int) []string {
	var out []string
	active, _ := rs.counts()
	for i := range rs.open {
		r := &rs.open[i]
		if active >= max {
			break
		}
		if rs.live(r) && r.Held {
			r.Held = false
			out = append(out, r.TaskID)
			active++
		}
	}
	return out
}

// left counts the unfinished runs (stopped ones included) and the live
// held ones.
func (rs *runSet) left() (open, held int) {
	for i := range rs.open {
		r := &rs.open[i]
		if !r.Unfinished() {
			continue
		}
		open++
		if rs.live(r) && r.Held {
			held++
		}
	}
	return open, held
}

// fireOne decides fire time ft: the failure gate (BACKOFF, HALF_OPEN), the
// overlap action, the failure action, then the concurrency limit. A run
// it makes becomes the previous run; d collects the cancels and the new
// previous run.
func (rs *runSet) fireOne(p policy, ft time.Time, newID func() string, fs *failState, d *decision) verdict {
	v := verdict{fireTime: ft, attempt: 1}
	if fs != nil {
		fs.count(p, rs.last, ft)
		if reason := fs.gate(p, ft, rs.last != nil && rs.live(rs.last)); reason != "" {
			v.kind, v.reason = verdictSkip, reason
			return v
		}
	}
	ignoreLimit := false
	if rs.last != nil && rs.live(rs.last) {
		switch p.overlap {
		case rota.OverlapSkip:
			v.kind, v.reason = verdictSkip, rota.SkipOverlap
			return v
		case rota.OverlapCancelPrev:
			v.cancel = rs.cancelLive()
			d.cancel = append(d.cancel, v.cancel...)
		case rota.OverlapParallel:
			ignoreLimit = true
		}
	}
	if rs.last != nil && rs.last.Failed() {
		switch p.failure {
		case rota.FailureSkip:
			v.kind, v.reason = verdictSkip, rota.SkipFailure
			v.taskID = newID()
			// A failure skip answers the failure: it becomes the
			// previous run.
			rs.last = &rota.ScheduleRun{TaskID: v.taskID, FireTime: ft, Status: rota.StatusSkipped, Reason: rota.SkipFailure}
			d.last = v.taskID
			return v
		case rota.FailureRetry:
			v.attempt, v.retry = rs.last.Attempt+1, true
		}
	}
	if !ignoreLimit {
		if active, held := rs.counts(); active >= p.maxConcurrency {
			switch {
			case p.concurrency == rota.ConcurrencySkip:
				v.kind, v.reason = verdictSkip, rota.SkipConcurrency
				return v
			case held >= p.maxQueued:
				v.kind, v.reason = verdictSkip, rota.SkipQueueFull
				return v
			default:
				v.kind = verdictHold
			}
		}
	}
	v.taskID = newID()
	run := rota.ScheduleRun{TaskID: v.taskID, FireTime: ft, Attempt: v.attempt, Status: rota.StatusScheduled, Held: v.kind == verdictHold}
	rs.open = append(rs.open, run)
	rs.last = &rs.open[len(rs.open)-1]
	d.last = v.taskID
	return v
}

// cancelLive marks every live run canceled (CANCEL_PREV) and returns them.
func (rs *runSet) cancelLive() []string {
	var out []string
	for i := range rs.open {
		r := &rs.open[i]
		if rs.live(r) {
			rs.canceled[r.TaskID] = true
			out = append(out, r.TaskID)
		}
	}
	return out
}

// misfireSelection splits the due fire times of one schedule.
type misfireSelection struct {
	fire    []time.Time // to fire (policies apply), oldest first
	record  []time.Time // dropped, recorded as SKIPPED (misfire), oldest first
	dropped int64       // every dropped fire time, recorded or not
}

// selectMisfires applies a misfire policy. latest holds the latest due fire
// times in (high-water, now], oldest first, and earlier counts the due ones
// before them. A fire time is current when now is less than grace after it;
// the others were missed. SKIP fires the current one only; CATCH_UP_LIMITED
// the latest limit (at least 1) fire times; FIRE_NOW the latest maxCatchUp.
// Every fire time not fired is dropped; the latest maxRecords of them are
// recorded.
func selectMisfires(pol rota.MisfirePolicy, limit int, latest []time.Time, earlier int64, now time.Time, grace time.Duration, maxCatchUp, maxRecords int) misfireSelection {
	var keep int
	switch pol {
	case rota.MisfireFireNow:
		keep = maxCatchUp
	case rota.MisfireCatchUpLimited:
		keep = min(max(limit, 1), maxCatchUp)
	default: // SKIP
		for _, t := range latest {
			if now.Sub(t) < grace {
				keep++
			}
		}
	}
	keep = min(keep, len(latest))
	cut := len(latest) - keep
	sel := misfireSelection{fire: latest[cut:], dropped: earlier + int64(cut)}
	rec := latest[:cut]
	if len(rec) > maxRecords {
		rec = rec[len(rec)-maxRecords:]
	}
	sel.record = rec
	return sel
}
