package schedule

import (
	"fmt"
	"time"

	"github.com/rotahq/rota"
)

// This file turns a stored rota.Schedule into its timetable (compile) and
// computes the state of a schedule that is created, edited, paused or
// resumed (Arm). The HTTP API uses both; the engine compiles what it loads.

// FieldTimezone is the API field of a schedule's time zone.
const FieldTimezone = "timezone"

// compiled is a schedule's timetable: a cron expression or a plan, and the
// zone both are read in.
type compiled struct {
	cron *Cron
	plan *Plan
	loc  *time.Location
}

func planOf(ps *rota.PlanSpec) Plan {
	return Plan{Type: PlanType(ps.Type), Value: ps.Value, Repeat: ps.Repeat, Time: ps.Time, NoKeep: ps.NoKeep}
}

// compile parses the timetable of s. Errors are *FieldError values naming
// the API field (cron_expr, timezone, plan.*).
func compile(s *rota.Schedule) (compiled, error) {
	var c compiled
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil || s.Timezone == "Local" {
		return c, &FieldError{Field: FieldTimezone, Reason: fmt.Sprintf("unknown IANA time zone %q", s.Timezone), Err: err}
	}
	c.loc = loc
	switch {
	case s.CronExpr != "" && s.Plan != nil:
		return c, &FieldError{Field: FieldCronExpr, Reason: "give cron_expr or plan, not both"}
	case s.Plan != nil:
		p := planOf(s.Plan)
		if err := p.Validate(); err != nil {
			return c, err
		}
		c.plan = &p
	case s.CronExpr != "":
		expr, err := ExpandH(s.CronExpr, s.Name)
		if err != nil {
			return c, err
		}
		cr, err := ParseCron(expr, loc)
		if err != nil {
			return c, err
		}
		c.cron = cr
	default:
		return c, &FieldError{Field: FieldCronExpr, Reason: "is required (or give a plan)"}
	}
	return c, nil
}

// Validate checks the timetable of s: the cron expression or the plan, and
// the time zone. Errors are *FieldError values naming the API field and
// wrap ErrInvalid.
func Validate(s *rota.Schedule) error {
	_, err := compile(s)
	return err
}

// neverSkips reports whether a plan runs its occurrences however late
// (no_keep for time and interval plans, seed 004 §3.3).
func neverSkips(p *Plan) bool {
	return p.NoKeep && (p.Type == PlanTime || p.isInterval())
}

// PastPlanReason is the EndReason of a plan that ends on arrival: its
// plan_time (or its whole interval series) is already past and no_keep is
// not set, so seed 004 drops it without running.
const PastPlanReason = "ended without running: plan_time (or the whole series) was already past and no_keep is not set (seed 004)"

// Arm computes the state of s, a schedule being created (prev nil) or
// replacing prev (an edit, a pause, a resume) at now:
//
//   - HighWater moves to now (never back): fire times at or before the
//     change are never fired, so an edit does not fire retroactively and a
//     resume applies the misfire policy from the moment of the resume, not
//     from the pause.
//   - A cron schedule's NextFire is its first fire time after that (zero
//     while disabled).
//   - A plan starts over (First at now, real_repet 0) when it is new, its
//     plan or time zone changed, or it had ended and is enabled again. An
//     unchanged plan keeps its series; a pending occurrence that came due
//     while it was paused is realigned as its type says (intervals without
//     no_keep and week/month plans move to their next time, no_keep plans
//     run at once, a time plan without no_keep ends).
//
// It fails with a *FieldError when the timetable is invalid. A new plan
// that would never run (a past plan_time without no_keep; an interval
// series entirely in the past) is armed ended and disabled, with
// EndReason PastPlanReason and real_repet 0.
func Arm(s *rota.Schedule, prev *rota.Schedule, now time.Time) error {
	c, err := compile(s)
	if err != nil {
		return err
	}
	now = now.UTC()
	hw := now
	if prev != nil && prev.HighWater.After(hw) {
		hw = prev.HighWater
	}
	if prev != nil {
		// The state is the engine's, but for the error, which the caller
		// decides (a resume clears it).
		errMsg := s.ErrorMessage
		s.ScheduleState = prev.ScheduleState
		s.ErrorMessage = errMsg
	}
	s.HighWater = hw
	if c.cron != nil {
		s.PlanSeq, s.PlanAt, s.PlanRunID, s.PlanRetry, s.RealRepet, s.Ended, s.EndedAt = 0, time.Time{}, "", false, 0, false, time.Time{}
		s.NextFire = time.Time{}
		if s.Enabled {
			if next, ok := c.cron.Next(hw); ok {
				s.NextFire = next
			}
		}
		return nil
	}
	p := c.plan
	restart := prev == nil || prev.Plan == nil || *prev.Plan != *s.Plan || prev.Timezone != s.Timezone ||
		(s.Enabled && prev.Ended)
	if restart {
		occ, ok := p.First(now, c.loc)
		s.PlanRunID, s.PlanRetry, s.RealRepet, s.EndReason = "", false, 0, ""
		if !ok {
			// Seed 004: a past time plan without no_keep (an interval
			// series entirely past) ends without running.
			s.PlanSeq, s.PlanAt, s.NextFire = 0, time.Time{}, time.Time{}
			s.Ended, s.EndedAt, s.Enabled = true, now, false
			s.EndReason = PastPlanReason
			return nil
		}
		s.PlanSeq, s.PlanAt = occ.Seq, occ.At
		s.Ended, s.EndedAt = false, time.Time{}
		s.NextFire = Due(occ, now)
		return nil
	}
	if s.Enabled && !s.Ended && s.PlanRunID == "" && !s.NextFire.IsZero() && s.NextFire.Before(now) && !s.PlanRetry {
		if neverSkips(p) {
			s.NextFire = now
			return nil
		}
		if occ, ok := lateAdvance(p, Occurrence{At: s.PlanAt, Seq: s.PlanSeq}, now, c.loc); ok {
			s.PlanSeq, s.PlanAt, s.NextFire = occ.Seq, occ.At, laterOf(occ.At, now)
		} else {
			s.Ended, s.EndedAt, s.NextFire, s.Enabled = true, now, time.Time{}, false
		}
	}
	return nil
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// lateAdvance returns the occurrence that replaces occ, which came due
// long before now and is dropped: for an interval plan the next one of its
// series at or after now (the dropped one used its place); for a week or
// month plan the next time at or after now with the same position (a
// missed week or month does not use up a repetition); false for a time or
// none plan, which then ends.
func lateAdvance(p *Plan, occ Occurrence, now time.Time, loc *time.Location) (Occurrence, bool) {
	switch {
	case p.isInterval():
		prev := Occurrence{At: occ.At.Add(-time.Duration(p.interval()) * time.Second), Seq: occ.Seq - 1}
		if prev.At.IsZero() {
			prev.At = time.Unix(1, 0).UTC()
		}
		return p.After(prev, now, loc)
	case p.Type == PlanWeek || p.Type == PlanMonth:
		return p.After(Occurrence{At: occ.At, Seq: occ.Seq - 1}, now, loc)
	}
	return Occurrence{}, false
}

// NextFires returns up to n fire times of s after from (cron), or its next
// n plan executions as if each finished the moment it started (plans): the
// schedules API's preview. A plan with state continues from its pending
// occurrence; an ended plan has none. Errors are as Validate's.
func NextFires(s *rota.Schedule, from time.Time, n int) ([]time.Time, error) {
	c, err := compile(s)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return []time.Time{}, nil
	}
	if c.cron != nil {
		return append([]time.Time{}, c.cron.NextN(from, n)...), nil
	}
	if s.Ended {
		return []time.Time{}, nil
	}
	if s.PlanSeq == 0 {
		return append([]time.Time{}, c.plan.NextN(from, n, c.loc)...), nil
	}
	out := []time.Time{}
	occ, ok := Occurrence{At: s.PlanAt, Seq: s.PlanSeq}, true
	for guard := 0; ok && len(out) < n && guard < n+10000; guard++ {
		if !occ.At.Before(from) {
			out = append(out, occ.At)
		}
		occ, ok = c.plan.After(occ, laterOf(occ.At, from), c.loc)
	}
	return out, nil
}
