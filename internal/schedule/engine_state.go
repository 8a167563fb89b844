package schedule

import (
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/schedule/firetime"
)

// This file computes the state of a schedule that is created, edited,
// paused or resumed (Arm), from its timetable (firetime.Compile).

// PastPlanReason is the EndReason of a plan that ends on arrival: its
// plan_time (or its whole interval series) is already past and no_keep is
// not set, so it is dropped without running.
const PastPlanReason = "ended without running: plan_time (or the whole series) was already past and no_keep is not set"

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
// It fails with a *firetime.FieldError when the timetable is invalid. A new plan
// that would never run (a past plan_time without no_keep; an interval
// series entirely in the past) is armed ended and disabled, with
// EndReason PastPlanReason and real_repet 0.
func Arm(s *rota.Schedule, prev *rota.Schedule, now time.Time) error {
	c, err := firetime.Compile(s)
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
	if c.Cron != nil {
		s.PlanSeq, s.PlanAt, s.PlanRunID, s.PlanRetry, s.RealRepet, s.Ended, s.EndedAt = 0, time.Time{}, "", false, 0, false, time.Time{}
		s.NextFire = time.Time{}
		if s.Enabled {
			if next, ok := c.Cron.Next(hw); ok {
				s.NextFire = next
			}
		}
		return nil
	}
	p := c.Plan
	restart := prev == nil || prev.Plan == nil || *prev.Plan != *s.Plan || prev.Timezone != s.Timezone ||
		(s.Enabled && prev.Ended)
	if restart {
		occ, ok := p.First(now, c.Loc)
		s.PlanRunID, s.PlanRetry, s.RealRepet, s.EndReason = "", false, 0, ""
		if !ok {
			// A past time plan without no_keep (an interval
			// series entirely past) ends without running.
			s.PlanSeq, s.PlanAt, s.NextFire = 0, time.Time{}, time.Time{}
			s.Ended, s.EndedAt, s.Enabled = true, now, false
			s.EndReason = PastPlanReason
			return nil
		}
		s.PlanSeq, s.PlanAt = occ.Seq, occ.At
		s.Ended, s.EndedAt = false, time.Time{}
		s.NextFire = firetime.Due(occ, now)
		return nil
	}
	if s.Enabled && !s.Ended && s.PlanRunID == "" && !s.NextFire.IsZero() && s.NextFire.Before(now) && !s.PlanRetry {
		if firetime.NeverSkips(p) {
			s.NextFire = now
			return nil
		}
		if occ, ok := firetime.LateAdvance(p, firetime.Occurrence{At: s.PlanAt, Seq: s.PlanSeq}, now, c.Loc); ok {
			s.PlanSeq, s.PlanAt, s.NextFire = occ.Seq, occ.At, firetime.LaterOf(occ.At, now)
		} else {
			s.Ended, s.EndedAt, s.NextFire, s.Enabled = true, now, time.Time{}, false
		}
	}
	return nil
}
