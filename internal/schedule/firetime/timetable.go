package firetime

import (
	"fmt"
	"time"

	"github.com/rotahq/rota"
)

// This file turns a stored rota.Schedule into its timetable (Compile) and
// previews it (NextFires): what the engine fires and what the schedules
// API shows, from the same functions.

// FieldTimezone is the API field of a schedule's time zone.
const FieldTimezone = "timezone"

// Timetable is a schedule's timetable: a cron expression or a plan, and the
// zone both are read in.
type Timetable struct {
	Cron *Cron          // nil for a plan
	Plan *Plan          // nil for a cron expression
	Loc  *time.Location // the zone both are read in
}

// PlanOf is the Plan of a stored plan.
func PlanOf(ps *rota.PlanSpec) Plan {
	return Plan{Type: PlanType(ps.Type), Value: ps.Value, Repeat: ps.Repeat, Time: ps.Time, NoKeep: ps.NoKeep}
}

// Compile parses the timetable of s. Errors are *FieldError values naming
// the API field (cron_expr, timezone, plan.*).
func Compile(s *rota.Schedule) (Timetable, error) {
	var c Timetable
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil || s.Timezone == "Local" {
		return c, &FieldError{Field: FieldTimezone, Reason: fmt.Sprintf("unknown IANA time zone %q", s.Timezone), Err: err}
	}
	c.Loc = loc
	switch {
	case s.CronExpr != "" && s.Plan != nil:
		return c, &FieldError{Field: FieldCronExpr, Reason: "give cron_expr or plan, not both"}
	case s.Plan != nil:
		p := PlanOf(s.Plan)
		if err := p.Validate(); err != nil {
			return c, err
		}
		c.Plan = &p
	case s.CronExpr != "":
		expr, err := ExpandH(s.CronExpr, s.Name)
		if err != nil {
			return c, err
		}
		cr, err := ParseCron(expr, loc)
		if err != nil {
			return c, err
		}
		c.Cron = cr
	default:
		return c, &FieldError{Field: FieldCronExpr, Reason: "is required (or give a plan)"}
	}
	return c, nil
}

// Validate checks the timetable of s: the cron expression or the plan, and
// the time zone. Errors are *FieldError values naming the API field and
// wrap ErrInvalid.
func Validate(s *rota.Schedule) error {
	_, err := Compile(s)
	return err
}

// NeverSkips reports whether a plan runs its occurrences however late
// (no_keep for time and interval plans).
func NeverSkips(p *Plan) bool {
	return p.NoKeep && (p.Type == PlanTime || p.IsInterval())
}

// LaterOf returns the later of a and b.
func LaterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// LateAdvance returns the occurrence that replaces occ, which came due
// long before now and is dropped: for an interval plan the next one of its
// series at or after now (the dropped one used its place); for a week or
// month plan the next time at or after now with the same position (a
// missed week or month does not use up a repetition); false for a time or
// none plan, which then ends.
func LateAdvance(p *Plan, occ Occurrence, now time.Time, loc *time.Location) (Occurrence, bool) {
	switch {
	case p.IsInterval():
		prev := Occurrence{At: occ.At.Add(-time.Duration(p.Interval()) * time.Second), Seq: occ.Seq - 1}
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
	c, err := Compile(s)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return []time.Time{}, nil
	}
	if c.Cron != nil {
		return append([]time.Time{}, c.Cron.NextN(from, n)...), nil
	}
	if s.Ended {
		return []time.Time{}, nil
	}
	if s.PlanSeq == 0 {
		return append([]time.Time{}, c.Plan.NextN(from, n, c.Loc)...), nil
	}
	out := []time.Time{}
	occ, ok := Occurrence{At: s.PlanAt, Seq: s.PlanSeq}, true
	for guard := 0; ok && len(out) < n && guard < n+10000; guard++ {
		if !occ.At.Before(from) {
			out = append(out, occ.At)
		}
		occ, ok = c.Plan.After(occ, LaterOf(occ.At, from), c.Loc)
	}
	return out, nil
}
