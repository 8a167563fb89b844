package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/schedule/firetime"
	"github.com/rotahq/rota/internal/store"
)

// This file is the service layer of schedule changes, which the HTTP
// handlers call after decoding and checking a request's fields: creating,
// editing, pausing, resuming and deleting a schedule (each arms its state
// with Arm and is a compare-and-set on its Version, retried when the
// engine fired meanwhile), and the changes that create runs outside the
// engine's series, manual triggers and backfills. Any node may call it
// (not only the leader): a trigger or a backfill is one compare-and-set
// ScheduleFire whose decision is computed from the live run state inside
// the store's transaction, exactly as the engine's fires are. Every change
// is told to the local engine (Changed).

// MaxBackfill is the most fire times one backfill may cover.
const MaxBackfill = 1000

// Fields of the backfill request.
const (
	FieldFrom = "from"
	FieldTo   = "to"
)

// casAttempts is how often a change is retried when the engine (or
// another change) moved the schedule's Version meanwhile.
const casAttempts = 8

// ServiceConfig configures a Service. Store and Dispatcher are required.
type ServiceConfig struct {
	Store      store.ScheduleStore
	Dispatcher Dispatcher
	Now        func() time.Time  // default time.Now
	IDs        *rota.IDGenerator // ids of new schedules and runs; default a new one
	NewID      func() string     // overrides IDs when set (the dispatcher's)
	Metrics    *metrics.Metrics  // optional
	Events     func(rota.Event)  // optional: task and schedule.* events of new runs
	Changed    func(id string)   // optional: tells the local engine a schedule changed
	MaxQueued  int               // held runs of a QUEUE schedule; default DefaultMaxQueued
}

// Service triggers and backfills schedules (see the file comment).
type Service struct {
	cfg ServiceConfig // immutable after NewService
}

// NewService checks cfg and applies its defaults.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Store == nil || cfg.Dispatcher == nil {
		return nil, errors.New("schedule: service needs Store and Dispatcher")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IDs == nil {
		cfg.IDs = &rota.IDGenerator{}
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	return &Service{cfg: cfg}, nil
}

func (sv *Service) newID() string {
	if sv.cfg.NewID != nil {
		return sv.cfg.NewID()
	}
	return sv.cfg.IDs.New(sv.cfg.Now())
}

func (sv *Service) changed(id string) {
	if sv.cfg.Changed != nil {
		sv.cfg.Changed(id)
	}
}

// Create gives s (a new schedule, its fields checked) an id, arms its
// state (Arm: a plan that would never run is stored ended, with its
// EndReason) and stores it. Errors: a *firetime.FieldError of the timetable;
// rota.ErrConflict for a taken name.
func (sv *Service) Create(ctx context.Context, s rota.Schedule) (*rota.Schedule, error) {
	now := sv.cfg.Now()
	s.ID = sv.newID()
	if err := Arm(&s, nil, now); err != nil {
		return nil, err
	}
	got, err := sv.cfg.Store.ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: s, Now: now})
	if err != nil {
		return nil, err
	}
	sv.changed(got.ID)
	return got, nil
}

// Edit reads schedule id, applies mod (which checks and sets fields),
// re-arms it (nothing fires retroactively) and stores it, reading it again
// when the engine changed it meanwhile. It returns the schedule before and
// after. Errors: mod's; a *firetime.FieldError of the timetable; rota.ErrNotFound;
// rota.ErrConflict for a taken name (or a schedule changing too fast).
func (sv *Service) Edit(ctx context.Context, id string, mod func(s *rota.Schedule) error) (prev, got *rota.Schedule, err error) {
	for try := 1; ; try++ {
		prev, err := sv.cfg.Store.ScheduleGet(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		s := *prev
		if err := mod(&s); err != nil {
			return nil, nil, err
		}
		now := sv.cfg.Now()
		if err := Arm(&s, prev, now); err != nil {
			return nil, nil, err
		}
		got, err := sv.cfg.Store.ScheduleUpdate(ctx, store.ScheduleUpdateParams{Schedule: s, Now: now})
		if err == nil {
			sv.changed(id)
			return prev, got, nil
		}
		if !errors.Is(err, rota.ErrConflict) || try == casAttempts {
			return nil, nil, err
		}
		// A stale version (the engine fired meanwhile): read it again. A
		// taken name is a conflict for the caller.
		if other, lerr := sv.cfg.Store.ScheduleGetByName(ctx, s.Name); lerr == nil && other.ID != s.ID {
			return nil, nil, err
		}
	}
}

// Pause disables schedule id: it fires nothing until resumed.
func (sv *Service) Pause(ctx context.Context, id string) (prev, got *rota.Schedule, err error) {
	return sv.Edit(ctx, id, func(s *rota.Schedule) error { s.Enabled = false; return nil })
}

// Resume enables schedule id and takes it out of the error state (its
// ErrorMessage cleared: resume once the cause is fixed; the engine puts it
// back in the error state if it still cannot go on). The fire times of the
// pause are not caught up: the misfire policy applies from the resume on.
func (sv *Service) Resume(ctx context.Context, id string) (prev, got *rota.Schedule, err error) {
	return sv.Edit(ctx, id, func(s *rota.Schedule) error { s.Enabled, s.ErrorMessage = true, ""; return nil })
}

// Delete deletes schedule id (see store.ScheduleStore.ScheduleDelete).
func (sv *Service) Delete(ctx context.Context, id string) error {
	if err := sv.cfg.Store.ScheduleDelete(ctx, store.ScheduleDeleteParams{ID: id, Now: sv.cfg.Now()}); err != nil {
		return err
	}
	sv.changed(id)
	return nil
}

// TriggerResult is the run a trigger made.
type TriggerResult struct {
	Run rota.ScheduleRun // SCHEDULED (maybe held), or SKIPPED with its reason
}

// Trigger fires schedule id once, now, outside its series (paused or
// not). Unless force, the overlap and concurrency policies apply as to any
// fire (a skip is recorded as a SKIPPED run with its reason; CANCEL_PREV
// stops the unfinished runs; QUEUE holds the run); the failure action and
// the misfire policy do not (the trigger is the operator's answer). The
// run is the schedule's previous run from then on, unless skipped.
// rota.ErrNotFound for an unknown schedule.
func (sv *Service) Trigger(ctx context.Context, id string, force bool) (*TriggerResult, error) {
	now := sv.cfg.Now()
	if force {
		r, err := sv.cfg.Store.ScheduleTrigger(ctx, store.ScheduleTriggerParams{ID: id, TaskID: sv.newID(), Now: now})
		if err != nil {
			return nil, err
		}
		s, err := sv.cfg.Store.ScheduleGet(ctx, id)
		if err != nil {
			return nil, err
		}
		sv.announce(ctx, s, []rota.ScheduleRun{*r}, nil, nil)
		sv.changed(id)
		return &TriggerResult{Run: *r}, nil
	}
	res, err := sv.fireCAS(ctx, id, now, func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
		s := st.Schedule
		pol := policyOf(&s, sv.cfg.MaxQueued)
		pol.failure = rota.FailureRunNew
		d := decide(pol, st.Open, st.Last, []time.Time{now}, sv.newID)
		runs := runsOf(d.verdicts)
		for i := range runs {
			runs[i].Triggered = true
		}
		state := s.ScheduleState
		if d.last != "" {
			state.LastRunID = d.last
		}
		return store.ScheduleDecision{Runs: runs, Release: d.release, Cancel: d.cancel, State: state}, nil
	})
	if err != nil {
		return nil, err
	}
	if len(res.Inserted) != 1 {
		return nil, fmt.Errorf("trigger schedule %s: the run was not stored", id)
	}
	return &TriggerResult{Run: res.Inserted[0]}, nil
}

// BackfillSkip is a fire time a backfill did not queue, and why: a policy's
// skip reason, or "duplicate" when the fire time already had a run.
type BackfillSkip struct {
	FireTime time.Time
	Reason   rota.SkipReason
}

// BackfillResult is what a backfill did.
type BackfillResult struct {
	Queued  []time.Time // fire times given a run (claimable, or held by QUEUE)
	Skipped []BackfillSkip
}

// BackfillTimes returns the fire times of cron schedule s in [from, to),
// checking the request: a plan cannot be backfilled (its occurrences
// depend on its executions), to must follow from and not be in the future
// (after now), and at most MaxBackfill fire times fit in one request.
// Errors are *firetime.FieldError values naming the request field.
func BackfillTimes(s *rota.Schedule, from, to, now time.Time) ([]time.Time, error) {
	c, err := firetime.Compile(s)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Cron == nil:
		return nil, &firetime.FieldError{Field: firetime.FieldCronExpr, Reason: "only a cron schedule can be backfilled: a plan's occurrences depend on its executions"}
	case !to.After(from):
		return nil, &firetime.FieldError{Field: FieldTo, Reason: "must be after from"}
	case to.After(now):
		return nil, &firetime.FieldError{Field: FieldTo, Reason: "must not be in the future: the engine fires what is to come"}
	}
	var out []time.Time
	for t, ok := c.Cron.Next(from.Add(-time.Nanosecond)); ok && t.Before(to); t, ok = c.Cron.Next(t) {
		if len(out) == MaxBackfill {
			return nil, &firetime.FieldError{Field: FieldTo, Reason: fmt.Sprintf("the range holds more than %d fire times: backfill it in parts", MaxBackfill)}
		}
		out = append(out, t)
	}
	return out, nil
}

// Backfill creates one run for each fire time in [from, to) of schedule id
// (see BackfillTimes) that has none yet: the store's unique key on
// (schedule, fire time) makes a repeated backfill add nothing. Unless
// force, the overlap and concurrency policies apply, counting the
// backfill's own runs; the failure action and misfire policy do not. The
// schedule's series and previous run are left as they are.
func (sv *Service) Backfill(ctx context.Context, id string, from, to time.Time, force bool) (*BackfillResult, error) {
	s, err := sv.cfg.Store.ScheduleGet(ctx, id)
	if err != nil {
		return nil, err
	}
	fires, err := BackfillTimes(s, from, to, sv.cfg.Now())
	if err != nil {
		return nil, err
	}
	out := &BackfillResult{Queued: []time.Time{}, Skipped: []BackfillSkip{}}
	if len(fires) == 0 {
		return out, nil
	}
	res, err := sv.fireCAS(ctx, id, sv.cfg.Now(), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
		s := st.Schedule
		var vs []verdict
		var d decision
		if force {
			for _, ft := range fires {
				vs = append(vs, verdict{fireTime: ft, kind: verdictRun, attempt: 1, taskID: sv.newID()})
			}
		} else {
			pol := policyOf(&s, sv.cfg.MaxQueued)
			pol.failure = rota.FailureRunNew
			d = decide(pol, st.Open, st.Last, fires, sv.newID)
			vs = d.verdicts
		}
		return store.ScheduleDecision{Runs: runsOf(vs), Release: d.release, Cancel: d.cancel, State: s.ScheduleState}, nil
	})
	if err != nil {
		return nil, err
	}
	for _, r := range res.Inserted {
		if r.Status == rota.StatusSkipped {
			out.Skipped = append(out.Skipped, BackfillSkip{FireTime: r.FireTime, Reason: r.Reason})
		} else {
			out.Queued = append(out.Queued, r.FireTime)
		}
	}
	for _, ft := range res.Duplicates {
		out.Skipped = append(out.Skipped, BackfillSkip{FireTime: ft, Reason: rota.SkipDuplicate})
	}
	return out, nil
}

// fireCAS applies decide to schedule id with ScheduleFire, reading the
// schedule again when its Version moved, then announces the new runs
// (metrics, events, wake-ups, CANCEL_PREV stops).
func (sv *Service) fireCAS(ctx context.Context, id string, now time.Time, decide func(store.ScheduleRunState) (store.ScheduleDecision, error)) (*store.ScheduleFireResult, error) {
	for try := 1; ; try++ {
		s, err := sv.cfg.Store.ScheduleGet(ctx, id)
		if err != nil {
			return nil, err
		}
		res, err := sv.cfg.Store.ScheduleFire(ctx, []store.ScheduleFireParams{{ID: s.ID, Version: s.Version, Now: now, Decide: decide}})
		if err != nil {
			return nil, err
		}
		r := &res[0]
		if r.Err != nil {
			if errors.Is(r.Err, rota.ErrConflict) && try < casAttempts {
				continue
			}
			return nil, r.Err
		}
		sv.announce(ctx, r.Schedule, r.Inserted, r.Released, r.Cancel)
		sv.changed(id)
		return r, nil
	}
}

// announce counts and reports new runs of s, wakes their workers and stops
// the runs CANCEL_PREV canceled.
func (sv *Service) announce(ctx context.Context, s *rota.Schedule, runs []rota.ScheduleRun, released, cancel []string) {
	ready := len(released)
	for i := range runs {
		r := &runs[i]
		sv.cfg.Metrics.Run(r.Status)
		sv.cfg.Metrics.Skip(r.Reason)
		emitRun(sv.cfg.Events, s, r)
		if r.Status == rota.StatusScheduled && !r.Held {
			ready++
		}
	}
	if ready > 0 {
		n := ready
		if s.Target != nil {
			n = -1 // pinned runs: wake every waiter of the kind
		}
		sv.cfg.Dispatcher.Notify(s.Kind, n)
	}
	stopCanceled(ctx, sv.cfg.Dispatcher, s, cancel, nil)
}

// emitRun reports a new run of s: the task event any new task has, and
// schedule.fired or schedule.skipped (Message: the skip reason).
func emitRun(events func(rota.Event), s *rota.Schedule, r *rota.ScheduleRun) {
	if events == nil {
		return
	}
	ev := rota.Event{Time: r.CreatedAt, Type: rota.EventTask, Kind: s.Kind, TaskID: r.TaskID, Status: r.Status,
		Attempt: 0, Message: r.Message, ScheduleID: s.ID, FireTime: r.FireTime}
	events(ev)
	ev.Type, ev.Message = rota.EventScheduleFired, ""
	if r.Status == rota.StatusSkipped {
		ev.Type, ev.Message = rota.EventScheduleSkipped, string(r.Reason)
	}
	events(ev)
}

// stopCanceled stops the runs CANCEL_PREV canceled, through the normal
// stop path.
func stopCanceled(ctx context.Context, d Dispatcher, s *rota.Schedule, ids []string, warn func(id string, err error)) {
	for _, id := range ids {
		msg := fmt.Sprintf("canceled: a newer run of schedule %q started (overlap_action CANCEL_PREV)", s.Name)
		if _, err := d.StopTask(context.WithoutCancel(ctx), id, msg); err != nil && !errors.Is(err, rota.ErrConflict) && !errors.Is(err, rota.ErrNotFound) && warn != nil {
			warn(id, err)
		}
	}
}
