package firetime

import (
	"math"
	"time"
)

// PlanType is a plan's plan_type.
type PlanType string

// The plan types.
const (
	// PlanNone runs once, immediately.
	PlanNone PlanType = "none"
	// PlanTime runs once at plan_time.
	PlanTime PlanType = "time"
	// PlanSecond runs every plan_value seconds.
	PlanSecond PlanType = "second"
	// PlanMinute runs every plan_value minutes.
	PlanMinute PlanType = "minute"
	// PlanHour runs every plan_value hours.
	PlanHour PlanType = "hour"
	// PlanDay runs every plan_value days of exactly 24 hours.
	PlanDay PlanType = "day"
	// PlanWeek runs on weekday plan_value (Sunday 0) at plan_time's time of day.
	PlanWeek PlanType = "week"
	// PlanMonth runs on day plan_value of each month at plan_time's time of day.
	PlanMonth PlanType = "month"
)

// Limits of plan fields.
const (
	// MaxPlanInterval is the largest plan_value of second, minute, hour and
	// day plans ("less than 32767").
	MaxPlanInterval = 32766
	// maxPlanTime is 9999-12-31T23:59:59Z.
	maxPlanTime = 253402300799
)

// Plan is a calendar plan, as carried by the
// API's plan object. The zero Plan is invalid (it has no plan_type).
//
// Validity (Validate) and meaning, type by type:
//
//   - none: runs once, at the moment the plan is received. plan_value,
//     plan_repet, plan_time and no_keep are ignored.
//   - time: runs once at plan_time, which is required (> 0). plan_repet is
//     ignored (plan_repet has no effect: it runs once). If plan_time is already
//     past when the plan is received, it still runs (immediately) when
//     no_keep is set, and is dropped without running otherwise.
//   - second, minute, hour, day: an interval of plan_value units, 1 ≤
//     plan_value ≤ MaxPlanInterval (the plan rules say 0 ≤ v < 32767; a zero
//     interval would fire continuously and the original reference code
//     refuses it, so Rota does too). A day is exactly 24 hours: these types
//     are delays, not wall-clock times — use a cron expression or a week
//     plan for "every day at 09:00". The series starts at plan_time, or at
//     the moment of receipt when plan_time is 0, and its occurrences are
//     start + k·interval for k = 1, 2, …: the first one comes one interval
//     after the start. plan_repet must not be 0.
//     With no_keep unset the series is fixed: occurrences already in the
//     past when a next time is computed — at receipt, or when an execution
//     ends, so time lost to a long execution counts — are skipped and use
//     up their place in the series; when even the series' last occurrence
//     (number plan_repet) is past, the plan ends, maybe never having run.
//     With no_keep set nothing is skipped: the first occurrence is
//     plan_time + interval even if that is past (it then runs at once), and
//     each later one comes one interval after the previous execution ended.
//   - week: plan_value is a weekday 0–6, Sunday 0; runs at the time of day
//     of plan_time in the schedule's zone (plan_time 0 means 00:00:00).
//     plan_repet must not be 0. Occurrences are always in the future: a
//     week missed while the scheduler was down is not made up and does not
//     use up a repetition.
//   - month: plan_value is a day −31…31: 1…31 is that day, clamped to the
//     month's last day; 0 is the last day; −k is the last day minus k,
//     clamped to the 1st. Time of day, plan_repet and missed months as for
//     week.
//
// plan_repet is the total number of executions: −1 forever, N > 0 at most
// N, 0 once (only meaningful for none and time, which run once anyway);
// values below −1 are invalid. plan_time must be 0 or a Unix time before
// year 10000. no_keep means nothing for week and month (the plan rules define it
// only for time and the interval types).
//
// A wall time of a week or month plan that falls in a daylight-saving gap
// runs at the end of the gap; one that happens twice runs the first time.
//
// The caller keeps the returned Occurrence (At and Seq) as the plan's state
// and counts successful executions as real_repet. For week, month and
// no_keep interval plans Seq equals real_repet once the occurrence has
// succeeded (a failed execution is retried at the same occurrence); for
// interval plans without no_keep, Seq also counts skipped
// occurrences. After reporting false means the plan is finished.
type Plan struct {
	// Type is plan_type; required.
	Type PlanType `json:"plan_type"`
	// Value is plan_value: the interval, weekday or day of month.
	Value int `json:"plan_value"`
	// Repeat is plan_repet: -1 forever, N > 0 executions, 0 once.
	Repeat int `json:"plan_repet"`
	// Time is plan_time in Unix seconds, 0 when unset.
	Time int64 `json:"plan_time"`
	// NoKeep is no_keep: run past times (time) / never skip (intervals).
	NoKeep bool `json:"no_keep"`
}

// Occurrence is one scheduled execution of a plan.
type Occurrence struct {
	// At is when to execute, in UTC, a whole second. It may be in the past
	// (a time plan with no_keep, a no_keep interval whose first occurrence
	// has passed): the execution is due at once.
	At time.Time
	// Seq is the 1-based position of At in the plan's series of
	// occurrences; the plan has no more after Seq reaches plan_repet.
	Seq int64
}

func planError(field, reason string) *FieldError {
	return &FieldError{Field: field, Reason: reason}
}

// Validate reports whether the plan is valid (see Plan). Errors are
// *FieldError values naming the API field, e.g. "plan.plan_value: week day
// must be 0-6 (Sunday 0)", and wrap ErrInvalid.
func (p Plan) Validate() error {
	switch p.Type {
	case PlanNone, PlanTime, PlanSecond, PlanMinute, PlanHour, PlanDay, PlanWeek, PlanMonth:
	default:
		return planError(FieldPlanType, "must be one of none, time, second, minute, hour, day, week, month")
	}
	if p.Repeat < -1 {
		return planError(FieldPlanRepet, "must be -1 (forever), 0 (once) or a positive number of executions")
	}
	if p.Time < 0 || p.Time > maxPlanTime {
		return planError(FieldPlanTime, "must be 0 or Unix seconds before year 10000")
	}
	switch p.Type {
	case PlanNone:
		return nil
	case PlanTime:
		if p.Time == 0 {
			return planError(FieldPlanTime, "is required for plan_type time")
		}
		return nil
	case PlanSecond, PlanMinute, PlanHour, PlanDay:
		if p.Value < 1 || p.Value > MaxPlanInterval {
			return planError(FieldPlanValue, "interval must be 1-32766")
		}
	case PlanWeek:
		if p.Value < 0 || p.Value > 6 {
			return planError(FieldPlanValue, "week day must be 0-6 (Sunday 0)")
		}
	case PlanMonth:
		if p.Value < -31 || p.Value > 31 {
			return planError(FieldPlanValue, "month day must be -31 to 31 (0 is the last day)")
		}
	}
	if p.Repeat == 0 {
		return planError(FieldPlanRepet, "must not be 0 for a repeating plan type (-1 forever, N > 0 times)")
	}
	return nil
}

// Interval returns the interval of second..day plans in seconds (0 for
// the other types).
func (p Plan) Interval() int64 {
	var unit int64
	switch p.Type {
	case PlanSecond:
		unit = 1
	case PlanMinute:
		unit = 60
	case PlanHour:
		unit = 3600
	case PlanDay:
		unit = 86400
	}
	return unit * int64(p.Value)
}

// IsInterval reports whether p is a second, minute, hour or day plan.
func (p Plan) IsInterval() bool {
	switch p.Type {
	case PlanSecond, PlanMinute, PlanHour, PlanDay:
		return true
	}
	return false
}

// ceilUnix returns t in whole Unix seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() != 0 {
		s++
	}
	return s
}

func unixUTC(s int64) time.Time { return time.Unix(s, 0).UTC() }

// First returns the plan's first occurrence for a plan received at now,
// with week and month times of day taken in loc (nil means UTC). It
// reports false when the plan never runs: it is invalid, it is a time plan
// whose plan_time is past and no_keep is unset, or it is an interval plan
// without no_keep whose whole series is already past.
func (p Plan) First(now time.Time, loc *time.Location) (Occurrence, bool) {
	if p.Validate() != nil || now.Year() > MaxSupportedYear {
		return Occurrence{}, false
	}
	switch {
	case p.Type == PlanNone:
		return Occurrence{At: unixUTC(floorUnix(now)), Seq: 1}, true
	case p.Type == PlanTime:
		at := unixUTC(p.Time)
		if at.Before(now) && !p.NoKeep {
			return Occurrence{}, false
		}
		return Occurrence{At: at, Seq: 1}, true
	case p.IsInterval():
		switch {
		case p.Time == 0:
			return Occurrence{At: unixUTC(floorUnix(now) + p.Interval()), Seq: 1}, true
		case p.NoKeep:
			return Occurrence{At: unixUTC(p.Time + p.Interval()), Seq: 1}, true
		default:
			return p.seriesAfter(p.Time, 0, now)
		}
	default: // week, month
		at, ok := p.nextCalendar(now, loc)
		return Occurrence{At: at, Seq: 1}, ok
	}
}

// After returns the occurrence that follows prev, computed when the
// execution of prev ended at finishedAt (which is also the "now" of the
// computation). It reports false when the plan is finished: none and time
// plans run once, a plan with plan_repet N > 0 stops after occurrence N, and
// an interval plan without no_keep stops when the rest of its series is
// already past. prev must come from First or After for the same plan.
//
// For interval plans with no_keep the next occurrence is one interval after
// finishedAt (rounded up to a whole second); without it, the first
// occurrence of the series at or after finishedAt. For week and month plans
// it is the first one at or after finishedAt and after prev.At.
func (p Plan) After(prev Occurrence, finishedAt time.Time, loc *time.Location) (Occurrence, bool) {
	if p.Validate() != nil || prev.At.IsZero() || finishedAt.Year() > MaxSupportedYear {
		return Occurrence{}, false
	}
	if p.Type == PlanNone || p.Type == PlanTime {
		return Occurrence{}, false
	}
	if p.Repeat > 0 && prev.Seq >= int64(p.Repeat) {
		return Occurrence{}, false
	}
	prevSec := floorUnix(prev.At)
	if p.IsInterval() {
		if !p.NoKeep {
			return p.seriesAfter(prevSec, prev.Seq, finishedAt)
		}
		base := max(ceilUnix(finishedAt), prevSec)
		return Occurrence{At: unixUTC(base + p.Interval()), Seq: prev.Seq + 1}, true
	}
	from := finishedAt
	if !from.After(prev.At) {
		from = unixUTC(prevSec + 1)
	}
	at, ok := p.nextCalendar(from, loc)
	return Occurrence{At: at, Seq: prev.Seq + 1}, ok
}

// seriesAfter returns the first occurrence base + j·interval, j ≥ 1, that is
// not before now, numbered seq + j; false if that number exceeds plan_repet.
func (p Plan) seriesAfter(base, seq int64, now time.Time) (Occurrence, bool) {
	iv := p.Interval()
	j := int64(1)
	if need := ceilUnix(now) - base; need > iv {
		j = ceilDiv(need, iv)
	}
	if p.Repeat > 0 && seq+j > int64(p.Repeat) {
		return Occurrence{}, false
	}
	return Occurrence{At: unixUTC(base + j*iv), Seq: seq + j}, true
}

// monthDay returns the day of month that a month plan with the given
// plan_value runs on in month m of year y (see Plan).
func monthDay(value, y int, m time.Month) int {
	last := daysIn(y, int(m))
	switch {
	case value > 0:
		return min(value, last)
	case value == 0:
		return last
	default:
		return max(last+value, 1)
	}
}

// nextCalendar returns the first week or month occurrence at or after from.
func (p Plan) nextCalendar(from time.Time, loc *time.Location) (time.Time, bool) {
	if loc == nil {
		loc = time.UTC
	}
	h, mi, s := 0, 0, 0
	if p.Time != 0 {
		h, mi, s = time.Unix(p.Time, 0).In(loc).Clock()
	}
	y, mo, d := from.In(loc).Date()
	// Start a day (a month) early: a resolved wall time can move forward
	// past midnight when it falls in a gap.
	for i := -1; i < 40; i++ {
		var date time.Time
		if p.Type == PlanWeek {
			date = time.Date(y, mo, d+i, 0, 0, 0, 0, time.UTC)
			if int(date.Weekday()) != p.Value {
				continue
			}
		} else {
			first := time.Date(y, mo+time.Month(i), 1, 0, 0, 0, 0, time.UTC)
			date = first.AddDate(0, 0, monthDay(p.Value, first.Year(), first.Month())-1)
		}
		at := resolveWall(wallSeconds(date.Year(), int(date.Month()), date.Day(), h, mi, s), loc)
		if !at.Before(from) {
			return at, true
		}
	}
	return time.Time{}, false // unreachable: a week or a month always has one
}

// resolveWall returns the instant at which the wall reading w (naive Unix
// seconds) happens in loc: the first one when it happens twice, and the
// instant the clock jumps past w when it falls in a gap.
func resolveWall(w int64, loc *time.Location) time.Time {
	// UTC offsets stay within ±26 hours, so the instants that can read w
	// lie in the offset periods that cover [w-2d, w+2d].
	cur := w - 2*86400
	prevEndWall := int64(math.MinInt64)
	for range 64 {
		z := time.Unix(cur, 0).In(loc)
		_, off := z.Zone()
		o := int64(off)
		start, end := z.ZoneBounds()
		s, e := int64(math.MinInt64), int64(math.MaxInt64)
		if !start.IsZero() {
			s = start.Unix()
		}
		if !end.IsZero() {
			e = end.Unix()
		}
		if cand := w - o; cand >= s && cand < e {
			return unixUTC(cand)
		}
		if s != math.MinInt64 && s+o > w && prevEndWall <= w {
			return unixUTC(s) // w is in the gap that ends at s
		}
		if e == math.MaxInt64 {
			break
		}
		prevEndWall = e + o
		cur = e
	}
	// Not reached for real zones; let the time package decide.
	n := time.Unix(w, 0).UTC()
	return time.Date(n.Year(), n.Month(), n.Day(), n.Hour(), n.Minute(), n.Second(), 0, loc).UTC()
}

// Due returns when occurrence o executes if it is considered at now: at
// its time, or at once (now) when that is past. The engine and the preview
// both compute an execution's start with it, and the next occurrence with
// After from the end of that execution.
func Due(o Occurrence, now time.Time) time.Time {
	if o.At.After(now) {
		return o.At
	}
	return now
}

// NextN returns up to n occurrence times (nominal, Occurrence.At) of the
// plan as if it were received at from and every execution finished the
// moment it started (at Due) — the preview of the schedules API. With
// no_keep the first occurrence may be past (it runs at once, at from) and
// the next ones count from then. It returns nil for n ≤ 0 and fewer than n
// times when the plan finishes earlier. loc is as for First.
func (p Plan) NextN(from time.Time, n int, loc *time.Location) []time.Time {
	if n <= 0 {
		return nil
	}
	var out []time.Time
	occ, ok := p.First(from, loc)
	for ok && len(out) < n {
		out = append(out, occ.At)
		occ, ok = p.After(occ, Due(occ, from), loc)
	}
	return out
}
