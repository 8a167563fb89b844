package rotaapi

import (
	"encoding/json"

	"github.com/rotahq/rota"
)

// Plan is a calendar plan, the alternative to a cron expression (the rules
// are internal/schedule.Plan's).
type Plan struct {
	// PlanType is none, time, second, minute, hour, day, week or month.
	PlanType string `json:"plan_type"`
	// PlanValue is the plan's step (or day) in its unit.
	PlanValue int `json:"plan_value"`
	// PlanRepet is the number of executions: -1 forever, N > 0 times, 0
	// once.
	PlanRepet int `json:"plan_repet"`
	// PlanTime is the plan's time, unix seconds; 0 when unset.
	PlanTime int64 `json:"plan_time"`
	// NoKeep is the plan's no_keep flag.
	NoKeep bool `json:"no_keep"`
}

// Target makes Rota itself run each fire of a schedule as an HTTP request
// instead of handing it to workers.
type Target struct {
	// URL is the absolute http or https URL called.
	URL string `json:"url"`
	// Method is GET, POST, PUT, PATCH or DELETE. In a request "" (or
	// absent) means POST; the server always sends it.
	Method string `json:"method,omitempty"`
	// Headers are sent with each request. Absent in a request means none;
	// the server always sends them ({} when none).
	Headers map[string]string `json:"headers,omitzero"`
}

// ScheduleRequest is the body of POST /api/schedules and PATCH
// /api/schedules/{id}. In a create, name, kind, task and one of cron_expr
// or plan are required and absent fields take the server's defaults; in a
// PATCH, absent fields are left as they are, a cron_expr replaces a plan
// and a plan a cron_expr.
type ScheduleRequest struct {
	// Name is unique among schedules, 1 to 200 characters.
	Name *string `json:"name,omitempty"`
	// Kind is the kind of the tasks fired.
	Kind *string `json:"kind,omitempty"`
	// Task is the payload handed to each run: any JSON value but null.
	Task json.RawMessage `json:"task,omitempty"`
	// Priority of the fired tasks; default mid.
	Priority *rota.Priority `json:"priority,omitempty"`
	// CronExpr is a cron expression, evaluated in Timezone; not with Plan.
	CronExpr *string `json:"cron_expr,omitempty"`
	// Timezone is an IANA zone; default (and "") UTC.
	Timezone *string `json:"timezone,omitempty"`
	// Plan is a calendar plan; not with CronExpr.
	Plan *Plan `json:"plan,omitempty"`
	// Enabled is false for a paused schedule; default true.
	Enabled *bool `json:"enabled,omitempty"`
	// MaxConcurrency is the number of unfinished runs allowed at once;
	// default 1.
	MaxConcurrency *int `json:"max_concurrency,omitempty"`
	// ConcurrencyPolicy is SKIP or QUEUE (any case); default SKIP.
	ConcurrencyPolicy *rota.ConcurrencyPolicy `json:"concurrency_policy,omitempty"`
	// OverlapAction is ALLOW, SKIP, CANCEL_PREV or PARALLEL (any case);
	// default ALLOW.
	OverlapAction *rota.OverlapAction `json:"overlap_action,omitempty"`
	// FailureAction is RUN_NEW, SKIP, RETRY, BACKOFF or HALF_OPEN (any
	// case); default RUN_NEW.
	FailureAction *rota.FailureAction `json:"failure_action,omitempty"`
	// MisfirePolicy is FIRE_NOW, SKIP or CATCH_UP_LIMITED (any case);
	// default SKIP.
	MisfirePolicy *rota.MisfirePolicy `json:"misfire_policy,omitempty"`
	// CatchupLimit is the number of missed fire times kept by
	// CATCH_UP_LIMITED.
	CatchupLimit *int `json:"catchup_limit,omitempty"`
	// TimeoutSeconds limits each run; absent, the kind's default (none), as
	// for any task; ≤ 0 means 10.
	TimeoutSeconds *int `json:"timeout_seconds,omitempty"`
	// BackoffSeconds is BACKOFF's first wait after a failure; default 60.
	BackoffSeconds *int `json:"backoff_seconds,omitempty"`
	// BackoffMaxSeconds caps BACKOFF's doubling wait; default 3600.
	BackoffMaxSeconds *int `json:"backoff_max_seconds,omitempty"`
	// FailureThreshold is the failures in a row that open HALF_OPEN's
	// circuit; default 3.
	FailureThreshold *int `json:"failure_threshold,omitempty"`
	// CooldownSeconds is how long HALF_OPEN's circuit stays open; default
	// 300.
	CooldownSeconds *int `json:"cooldown_seconds,omitempty"`
	// JitterSeconds delays each run by a deterministic offset in
	// [0, JitterSeconds) from the schedule id and fire time; default 0.
	JitterSeconds *int `json:"jitter_seconds,omitempty"`
	// Target is a Target object; null removes the schedule's target. It is
	// raw so that the server tells null from absent and names the field
	// at fault ("target.url").
	Target json.RawMessage `json:"target,omitempty"`
}

// SchedulePreviewRequest is the body of POST /api/schedules/preview: a
// schedule whose fire times are listed, nothing saved. Only the timetable
// matters: name, kind and task may be left out.
type SchedulePreviewRequest struct {
	ScheduleRequest
	// N is the number of fire times, 1 to 1000; default 10.
	N *int `json:"n,omitempty"`
	// From lists the fire times after this instant, unix seconds; default
	// the server's now.
	From *int64 `json:"from,omitempty"`
}

// SchedulePlan is the plan of a Schedule, with its progress.
type SchedulePlan struct {
	Plan
	// Seq is the position of the pending or running occurrence.
	Seq int64 `json:"seq"`
	// PlanAt is that occurrence's time; unix seconds, 0 when unset.
	PlanAt int64 `json:"plan_at"`
	// RealRepet counts the successful executions.
	RealRepet int64 `json:"real_repet"`
	// Remaining is the number of executions left; -1 forever.
	Remaining int64 `json:"remaining"`
}

// Schedule is a schedule as the API shows it.
type Schedule struct {
	// ScheduleID is the schedule's id.
	ScheduleID string `json:"schedule_id"`
	// Name is the schedule's unique name.
	Name string `json:"name"`
	// Kind is the kind of the tasks fired.
	Kind string `json:"kind"`
	// Priority of the fired tasks.
	Priority rota.Priority `json:"priority"`
	// Task is the payload handed to each run.
	Task json.RawMessage `json:"task"`
	// CronExpr is the cron expression, "" with a plan.
	CronExpr string `json:"cron_expr"`
	// Timezone is the IANA zone of the timetable.
	Timezone string `json:"timezone"`
	// Plan is the calendar plan, null with a cron expression.
	Plan *SchedulePlan `json:"plan"`
	// Enabled is false for a paused schedule.
	Enabled bool `json:"enabled"`
	// MaxConcurrency is the number of unfinished runs allowed at once.
	MaxConcurrency int `json:"max_concurrency"`
	// ConcurrencyPolicy is what a fire does when MaxConcurrency runs are
	// unfinished.
	ConcurrencyPolicy rota.ConcurrencyPolicy `json:"concurrency_policy"`
	// OverlapAction is what a fire does while the previous run is
	// unfinished.
	OverlapAction rota.OverlapAction `json:"overlap_action"`
	// FailureAction is what a fire does after a failed previous run.
	FailureAction rota.FailureAction `json:"failure_action"`
	// MisfirePolicy is what becomes of fire times missed.
	MisfirePolicy rota.MisfirePolicy `json:"misfire_policy"`
	// CatchupLimit is the number of missed fire times kept by
	// CATCH_UP_LIMITED.
	CatchupLimit int `json:"catchup_limit"`
	// TimeoutSeconds limits each run.
	TimeoutSeconds int `json:"timeout_seconds"`
	// Target is the HTTP target, null when the runs go to workers.
	Target *Target `json:"target"`
	// Version counts the schedule's changes.
	Version int64 `json:"version"`
	// CreatedAt is when the schedule was created; unix seconds, 0 when unset.
	CreatedAt int64 `json:"created_at"`
	// UpdatedAt is when it last changed; unix seconds, 0 when unset.
	UpdatedAt int64 `json:"updated_at"`
	// NextFireTime is the next fire; 0 when none (disabled, ended, or a
	// plan waiting for its run to end); unix seconds, 0 when unset.
	NextFireTime int64 `json:"next_fire_time"`
	// HighWater is the last fire time handled; unix seconds, 0 when unset.
	HighWater int64 `json:"high_water"`
	// LastRunID is the task id of the last run.
	LastRunID string `json:"last_run_id"`
	// MisfireDropped counts the fire times dropped by the misfire policy.
	MisfireDropped int64 `json:"misfire_dropped"`
	// Ended is true once a plan has run all its executions.
	Ended bool `json:"ended"`
	// EndedAt is when it ended; unix seconds, 0 when unset.
	EndedAt int64 `json:"ended_at"`
	// State is active, paused, ended or error.
	State string `json:"state"`
	// ErrorMessage says why a schedule in state error cannot go on.
	ErrorMessage string `json:"error_message"`
	// EndReason says why a plan ended without running, if it did.
	EndReason string `json:"end_reason"`
	// EffectiveTimeoutSeconds is the time limit its runs get: 0 for none
	// (the kind's default).
	EffectiveTimeoutSeconds int `json:"effective_timeout_seconds"`
	// BackoffSeconds, BackoffMaxSeconds, FailureThreshold and
	// CooldownSeconds are the settings of BACKOFF and HALF_OPEN, defaults
	// applied.
	BackoffSeconds    int `json:"backoff_seconds"`
	BackoffMaxSeconds int `json:"backoff_max_seconds"`
	FailureThreshold  int `json:"failure_threshold"`
	CooldownSeconds   int `json:"cooldown_seconds"`
	// JitterSeconds is the jitter of its runs; 0 for none.
	JitterSeconds int `json:"jitter_seconds"`
	// ConsecutiveFailures counts the failed, timed-out or canceled runs in
	// a row, as counted when the schedule fires.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// Circuit is HALF_OPEN's circuit: closed, open or half_open.
	Circuit rota.Circuit `json:"circuit"`
	// NextAllowedAt is the instant before which fires are skipped (BACKOFF,
	// an open circuit); unix seconds, 0 when none.
	NextAllowedAt int64 `json:"next_allowed_at"`
}

// ScheduleList is the data of GET /api/schedules: a page of schedules,
// newest first.
type ScheduleList struct {
	// Schedules are the page's schedules; [] when none.
	Schedules []Schedule `json:"schedules"`
	Page
}

// ScheduleIDResponse is the data of POST /api/schedules and DELETE
// /api/schedules/{id}.
type ScheduleIDResponse struct {
	// ScheduleID is the schedule's id.
	ScheduleID string `json:"schedule_id"`
	// Message says what became of a schedule created ended (a past plan);
	// absent otherwise.
	Message string `json:"message,omitempty"`
}

// TriggerRequest is the optional body of POST
// /api/schedules/{id}/trigger.
type TriggerRequest struct {
	// Force bypasses the overlap and concurrency policies.
	Force bool `json:"force,omitempty"`
}

// BackfillRequest is the body of POST /api/schedules/{id}/backfill.
type BackfillRequest struct {
	// From is the first instant of the range, unix seconds, included.
	From *int64 `json:"from"`
	// To ends the range, unix seconds, excluded; at most 1000 fire times
	// between them.
	To *int64 `json:"to"`
	// Force bypasses the overlap and concurrency policies.
	Force bool `json:"force,omitempty"`
}

// BackfillSkip is a fire time a backfill did not queue.
type BackfillSkip struct {
	// FireTime is the fire time, unix seconds.
	FireTime int64 `json:"fire_time"`
	// Reason is a policy's skip reason, or duplicate when it had a run.
	Reason string `json:"reason"`
}

// BackfillResponse is the data of POST /api/schedules/{id}/backfill.
type BackfillResponse struct {
	// Queued are the fire times given a run, unix seconds; [] when none.
	Queued []int64 `json:"queued"`
	// Skipped are the others, with why; [] when none.
	Skipped []BackfillSkip `json:"skipped"`
}

// TriggerResponse is the data of POST /api/schedules/{id}/trigger.
type TriggerResponse struct {
	// TaskID is the new run's task id.
	TaskID string `json:"task_id"`
	// FireTime is the instant of the trigger, the run's fire time;
	// unix seconds, 0 when unset.
	FireTime int64 `json:"fire_time"`
	// Status is SCHEDULED, or SKIPPED when a policy skipped the trigger.
	Status rota.Status `json:"status"`
	// Reason is the skip reason (overlap, concurrency, queue_full), else "".
	Reason rota.SkipReason `json:"reason"`
	// Held is true when QUEUE holds the run for a slot.
	Held bool `json:"held"`
	// Message is the run's message.
	Message string `json:"message"`
}

// ScheduleRun is one run of a schedule.
type ScheduleRun struct {
	// TaskID is the run's task id.
	TaskID string `json:"task_id"`
	// FireTime is the fire time the run stands for; unix seconds, 0 when unset.
	FireTime int64 `json:"fire_time"`
	// Attempt counts the task's runs.
	Attempt int `json:"attempt"`
	// Status is the run's status (SKIPPED for a fire that was not run).
	Status rota.Status `json:"status"`
	// Reason is why a SKIPPED run was skipped, else "".
	Reason rota.SkipReason `json:"reason"`
	// Triggered is true for a manual trigger.
	Triggered bool `json:"triggered"`
	// Held is true while a queued (QUEUE) run waits for a slot.
	Held bool `json:"held"`
	// CreatedAt is when the run was recorded; unix seconds, 0 when unset.
	CreatedAt int64 `json:"created_at"`
	// StartTime is when it started: unix seconds, 0 before.
	StartTime int64 `json:"start_time"`
	// EndTime is when it ended: unix seconds, 0 before.
	EndTime int64 `json:"end_time"`
	// Message is the run's last message.
	Message string `json:"message"`
}

// ScheduleRunList is the data of GET /api/schedules/{id}/runs: a page of
// runs, newest fire first.
type ScheduleRunList struct {
	// Runs are the page's runs; [] when none.
	Runs []ScheduleRun `json:"runs"`
	Page
}

// FireTimes is the data of GET /api/schedules/{id}/next and POST
// /api/schedules/preview.
type FireTimes struct {
	// FireTimes are the nominal fire times, in order, unix seconds; []
	// when none.
	FireTimes []int64 `json:"fire_times"`
	// RunTimes are the instants the runs become claimable, unix ms: the
	// fire times delayed by the schedule's jitter.
	RunTimes []int64 `json:"run_times"`
}
