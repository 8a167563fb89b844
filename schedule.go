package rota

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// A Schedule fires tasks of its kind on a timetable: a cron expression
// (CronExpr, evaluated in Timezone) or a calendar plan (Plan).
// Every fire becomes a run: a task of Kind with ScheduleID, FireTime and a
// schedule attempt, executed by the workers of that kind, or by Rota's HTTP
// executor when the schedule has a Target. Policies decide what a
// fire does when the previous run still runs (OverlapAction), failed
// (FailureAction), when too many runs are unfinished (ConcurrencyPolicy with
// MaxConcurrency) and what happens to fire times missed while no engine ran
// (MisfirePolicy).
//
// The configuration fields are set by users; the ScheduleState is kept by
// the engine. Version increases with every stored change of either, and
// every change is a compare-and-set on it.
type Schedule struct {
	ID       string // 32 lowercase hex characters
	Name     string // unique among schedules
	Kind     string // the kind of the tasks it fires
	Priority Priority
	Payload  json.RawMessage // the "task" value handed to each run

	CronExpr string    // 5, 6 or 7 fields, a macro or "@every d"; empty for a plan
	Timezone string    // IANA zone of CronExpr and of week/month plans; "" is UTC
	Plan     *PlanSpec // a calendar plan instead of CronExpr

	Enabled           bool
	MaxConcurrency    int // unfinished runs allowed at once (≥ 1)
	ConcurrencyPolicy ConcurrencyPolicy
	OverlapAction     OverlapAction
	FailureAction     FailureAction
	MisfirePolicy     MisfirePolicy
	CatchupLimit      int // fire times kept by CATCH_UP_LIMITED
	// TimeoutSeconds is the per-run time limit: 0 means the kind's
	// default, as for any task (none); the API turns an explicit ≤ 0
	// into 10.
	TimeoutSeconds int
	Target         *Target

	// BackoffSeconds and BackoffMaxSeconds configure FailureBackoff: after
	// n consecutive failures fires are skipped until BackoffSeconds ×
	// 2^(n−1) (at most BackoffMaxSeconds) have passed since the failed run
	// ended.
	BackoffSeconds    int
	BackoffMaxSeconds int
	// FailureThreshold and CooldownSeconds configure FailureHalfOpen: after
	// FailureThreshold consecutive failures the circuit opens for
	// CooldownSeconds.
	FailureThreshold int
	CooldownSeconds  int
	// JitterSeconds delays each fire by a deterministic offset in
	// [0, JitterSeconds) derived from the schedule id and the fire time.
	JitterSeconds int

	Version   int64 // increases with every change; the compare-and-set token
	CreatedAt time.Time
	UpdatedAt time.Time // last change of the configuration

	ScheduleState
}

// ScheduleState is what the engine remembers of a schedule between fires.
type ScheduleState struct {
	// HighWater is the last fire time handled (fired, skipped or dropped);
	// fire times at or before it are never fired again. Edits, pauses and
	// resumes move it to the instant of the change, so nothing fires
	// retroactively.
	HighWater time.Time
	// NextFire is the next instant the schedule is due: the next cron fire
	// time after HighWater, or the due time of the pending plan occurrence
	// (zero while a plan waits for its run to end, or when it ended).
	NextFire time.Time
	// LastRunID is the task id of the schedule's latest run that counts as
	// "the previous run" for the overlap and failure policies: every run
	// except SKIPPED ones whose reason is not SkipFailure.
	LastRunID string

	// Plan state: the pending occurrence's position in the
	// plan's series and its time, the run of it that is awaited (a plan
	// computes its next occurrence when the previous run ends), whether the
	// pending occurrence is a retry of a failed one, and the successful
	// executions so far (real_repet).
	PlanSeq   int64
	PlanAt    time.Time
	PlanRunID string
	PlanRetry bool
	RealRepet int64

	// Ended is set when a plan has no occurrence left; the schedule is then
	// disabled.
	Ended   bool
	EndedAt time.Time

	// MisfireDropped counts the fire times dropped by the misfire policy
	// (or by the catch-up cap) over the schedule's life, including those
	// recorded as SKIPPED runs.
	MisfireDropped int64

	// EndReason says why a plan ended (e.g. its time was already past).
	EndReason string
	// ErrorMessage is set when the schedule cannot go on (its next time
	// cannot be computed, its timetable no longer compiles, its target is
	// refused): it is in state "error" and fires nothing until resumed.
	ErrorMessage string

	// Failure state of FailureBackoff and FailureHalfOpen: the failures in
	// a row of the runs counted so far, the circuit of HALF_OPEN, the
	// instant before which fires are skipped, and the run last counted.
	ConsecutiveFailures int
	Circuit             Circuit
	NextAllowedAt       time.Time
	CountedRunID        string
}

// Circuit is the state of a HALF_OPEN schedule's circuit breaker.
type Circuit string

// The circuit states ("" reads as closed).
const (
	CircuitClosed   Circuit = "closed"
	CircuitOpen     Circuit = "open"
	CircuitHalfOpen Circuit = "half_open"
)

// The states of a schedule as the API shows them (State).
const (
	StateActive = "active" // enabled and firing
	StatePaused = "paused" // disabled by a user
	StateEnded  = "ended"  // a plan with no occurrence left
	StateError  = "error"  // cannot go on: see ErrorMessage
)

// State returns the schedule's state: error, ended, paused or active.
func (s *Schedule) State() string {
	switch {
	case s.ErrorMessage != "":
		return StateError
	case s.Ended:
		return StateEnded
	case !s.Enabled:
		return StatePaused
	}
	return StateActive
}

// PlanSpec is a calendar plan: Type is plan_type
// (none, time, second, minute, hour, day, week, month), Value plan_value,
// Repeat plan_repet (−1 forever, N > 0 times, 0 once), Time plan_time in
// unix seconds (0 unset) and NoKeep no_keep. See internal/schedule.Plan for
// the rules.
type PlanSpec struct {
	Type   string
	Value  int
	Repeat int
	Time   int64
	NoKeep bool
}

// Target makes Rota itself execute a schedule's runs: an HTTP request to
// URL with Method (default POST) and Headers, whose body is the run's
// payload. A 2xx answer is SUCCESS; any other is FAILED.
//
// Header values are secrets (tokens): the API shows them as "***", and a
// Target printed (%v, %+v, %s) or logged (slog) shows only their names.
type Target struct {
	URL     string
	Method  string
	Headers map[string]string
}

// String describes t with its header values masked.
func (t Target) String() string {
	names := slices.Sorted(maps.Keys(t.Headers))
	for i, n := range names {
		names[i] = n + ": ***"
	}
	return fmt.Sprintf("%s %s [%s]", t.Method, t.URL, strings.Join(names, ", "))
}

// GoString is String: %#v does not show header values either.
func (t Target) GoString() string { return t.String() }

// LogValue logs t with its header values masked.
func (t Target) LogValue() slog.Value {
	masked := make(map[string]string, len(t.Headers))
	for k := range t.Headers {
		masked[k] = "***"
	}
	return slog.GroupValue(slog.String("url", t.URL), slog.String("method", t.Method), slog.Any("headers", masked))
}

// ConcurrencyPolicy says what a fire does when MaxConcurrency runs of the
// schedule are already unfinished.
type ConcurrencyPolicy string

// The concurrency policies.
const (
	// ConcurrencySkip records the fire as a SKIPPED run (reason concurrency).
	ConcurrencySkip ConcurrencyPolicy = "SKIP"
	// ConcurrencyQueue stores the run held back: it is released (made
	// claimable) when a slot frees, oldest first.
	ConcurrencyQueue ConcurrencyPolicy = "QUEUE"
)

// Valid reports whether p is a defined policy.
func (p ConcurrencyPolicy) Valid() bool { return p == ConcurrencySkip || p == ConcurrencyQueue }

// OverlapAction says what a fire does when the previous run is unfinished.
type OverlapAction string

// The overlap actions.
const (
	// OverlapAllow goes on to the concurrency check (default).
	OverlapAllow OverlapAction = "ALLOW"
	// OverlapSkip records the fire as a SKIPPED run (reason overlap).
	OverlapSkip OverlapAction = "SKIP"
	// OverlapCancelPrev stops the unfinished runs and starts a new one.
	OverlapCancelPrev OverlapAction = "CANCEL_PREV"
	// OverlapParallel starts a new run regardless of MaxConcurrency.
	OverlapParallel OverlapAction = "PARALLEL"
)

// Valid reports whether a is a defined action.
func (a OverlapAction) Valid() bool {
	switch a {
	case OverlapAllow, OverlapSkip, OverlapCancelPrev, OverlapParallel:
		return true
	}
	return false
}

// FailureAction says what a fire does when the previous run ended FAILED,
// TIMEOUT or CANCELED.
type FailureAction string

// The failure actions.
const (
	// FailureRunNew starts a new run with attempt 1 (default).
	FailureRunNew FailureAction = "RUN_NEW"
	// FailureSkip records the fire as a SKIPPED run (reason failure).
	FailureSkip FailureAction = "SKIP"
	// FailureRetry starts a run whose attempt is the previous one's + 1.
	FailureRetry FailureAction = "RETRY"
	// FailureBackoff skips fires (reason backoff) for BackoffSeconds ×
	// 2^(failures−1), at most BackoffMaxSeconds, after a failed run; a
	// success resets it.
	FailureBackoff FailureAction = "BACKOFF"
	// FailureHalfOpen is a circuit breaker: after FailureThreshold failures
	// in a row fires are skipped (reason circuit_open) for
	// CooldownSeconds; the next fire is then a trial whose success closes
	// the circuit and whose failure opens it again.
	FailureHalfOpen FailureAction = "HALF_OPEN"
)

// Valid reports whether a is a defined action.
func (a FailureAction) Valid() bool {
	switch a {
	case FailureRunNew, FailureSkip, FailureRetry, FailureBackoff, FailureHalfOpen:
		return true
	}
	return false
}

// MisfirePolicy says what happens to fire times missed while no engine ran
// (downtime, a stall, a forward clock jump).
type MisfirePolicy string

// The misfire policies.
const (
	// MisfireFireNow fires every missed time (up to the engine's catch-up
	// cap, the latest ones).
	MisfireFireNow MisfirePolicy = "FIRE_NOW"
	// MisfireSkip fires only a fire time that is current (default).
	MisfireSkip MisfirePolicy = "SKIP"
	// MisfireCatchUpLimited fires the latest CatchupLimit fire times.
	MisfireCatchUpLimited MisfirePolicy = "CATCH_UP_LIMITED"
)

// Valid reports whether p is a defined policy.
func (p MisfirePolicy) Valid() bool {
	return p == MisfireFireNow || p == MisfireSkip || p == MisfireCatchUpLimited
}

// SkipReason says which policy skipped a fire.
type SkipReason string

// The skip reasons of SKIPPED runs.
const (
	SkipOverlap     SkipReason = "overlap"      // overlap_action SKIP
	SkipFailure     SkipReason = "failure"      // failure_action SKIP
	SkipConcurrency SkipReason = "concurrency"  // concurrency_policy SKIP
	SkipQueueFull   SkipReason = "queue_full"   // concurrency_policy QUEUE with a full queue
	SkipMisfire     SkipReason = "misfire"      // misfire_policy or the catch-up cap
	SkipBackoff     SkipReason = "backoff"      // failure_action BACKOFF, waiting
	SkipCircuitOpen SkipReason = "circuit_open" // failure_action HALF_OPEN, circuit open
	SkipDuplicate   SkipReason = "duplicate"    // a backfill fire time that already had a run
)

// ScheduleRun is one run of a schedule as the schedules API shows it: the
// task a fire created, with the schedule's view of it.
type ScheduleRun struct {
	TaskID        string
	ScheduleID    string
	FireTime      time.Time
	Attempt       int        // schedule attempt: 1, or the previous + 1 after a RETRY
	Status        Status     // the task's status
	Reason        SkipReason // for SKIPPED runs
	Triggered     bool       // fired by a manual trigger, outside the series
	Held          bool       // queued (QUEUE policy), waiting for a concurrency slot
	StopRequested bool       // a stop was asked (CANCEL_PREV or a user)
	CreatedAt     time.Time
	StartTime     time.Time
	EndTime       time.Time
	Message       string
}

// Unfinished reports whether the run is not terminal yet (SCHEDULED,
// held or not, or RUNNING).
func (r *ScheduleRun) Unfinished() bool { return !r.Status.Terminal() }

// Failed reports whether the run ended FAILED, TIMEOUT or CANCELED: the
// outcomes that trigger the failure action.
func (r *ScheduleRun) Failed() bool {
	switch r.Status {
	case StatusFailed, StatusTimeout, StatusCanceled:
		return true
	}
	return false
}

// HTTPWorkerID is the reserved worker id of Rota's HTTP executor: the runs
// of a schedule with a Target are pinned to it.
const HTTPWorkerID = "rota:http"
