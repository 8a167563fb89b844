package firetime

// A deliberately naive second implementation of the cron dialect and of the
// daylight-saving rule, used as the reference Next is compared against. It
// shares no code with cron.go: items are interpreted one value at a time,
// straight from the package documentation.

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

type refCron struct {
	fields           [7][]string // upper-cased items; year nil = any
	domStar, dowStar bool
}

// refParse splits an already-valid expression (5, 6 or 7 fields or one of
// the fixed macros) into items.
func refParse(t *testing.T, expr string) *refCron {
	t.Helper()
	macros := map[string]string{
		"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
		"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
	}
	if m, ok := macros[strings.ToLower(strings.TrimSpace(expr))]; ok {
		expr = m
	}
	f := strings.Fields(strings.ToUpper(expr))
	switch len(f) {
	case 5:
		f = append([]string{"0"}, f...)
		f = append(f, "*")
	case 6:
		f = append(f, "*")
	case 7:
	default:
		t.Fatalf("refParse(%q): %d fields", expr, len(f))
	}
	r := &refCron{domStar: f[3] == "*" || f[3] == "?", dowStar: f[5] == "*" || f[5] == "?"}
	for i := range 7 {
		if i == 6 && f[i] == "*" {
			continue
		}
		r.fields[i] = strings.Split(f[i], ",")
	}
	return r
}

func refNum(s string, names []string) int {
	for i, n := range names {
		if s == n {
			return i
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		panic("refNum: " + s)
	}
	return n
}

var (
	refMonthNames = []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	refDayNames   = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
)

// refPlain reports whether value v matches a plain item (*, a, a-b, with an
// optional /n) of a field with range [lo, hi].
func refPlain(item string, v, lo, hi int, names []string) bool {
	base, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		step, _ = strconv.Atoi(stepText)
	}
	a, b := lo, hi
	if base != "*" && base != "?" {
		x, y, isRange := strings.Cut(base, "-")
		a = refNum(x, names)
		switch {
		case isRange:
			b = refNum(y, names)
		case !hasStep:
			b = a
		}
	}
	return v >= a && v <= b && (v-a)%step == 0
}

func refLast(y int, m time.Month) int { return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() }

func refWeekend(y int, m time.Month, d int) bool {
	wd := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()
	return wd == time.Saturday || wd == time.Sunday
}

func (r *refCron) domItem(item string, y int, m time.Month, d int) bool {
	last := refLast(y, m)
	switch {
	case item == "L":
		return d == last
	case item == "LW":
		x := last
		for refWeekend(y, m, x) {
			x--
		}
		return d == x
	case strings.HasPrefix(item, "L-"):
		n, _ := strconv.Atoi(item[2:])
		return d == last-n
	case strings.HasSuffix(item, "W"):
		n, _ := strconv.Atoi(strings.TrimSuffix(item, "W"))
		if n > last {
			return false
		}
		// the nearest weekday to n inside the month
		for dist := 0; dist <= 2; dist++ {
			for _, x := range []int{n - dist, n + dist} {
				if x >= 1 && x <= last && !refWeekend(y, m, x) {
					return d == x
				}
			}
		}
		return false
	}
	return refPlain(item, d, 1, 31, nil)
}

func (r *refCron) dowItem(item string, y int, m time.Month, d int) bool {
	wd := int(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday())
	last := refLast(y, m)
	if day, k, ok := strings.Cut(item, "#"); ok {
		n, _ := strconv.Atoi(k)
		return refNum(day, refDayNames)%7 == wd && (d+6)/7 == n
	}
	if strings.HasSuffix(item, "L") {
		return refNum(strings.TrimSuffix(item, "L"), refDayNames)%7 == wd && d+7 > last
	}
	// "a/n" runs to Saturday, except "7/n", which is Sunday alone.
	hi := 6
	if base, _, _ := strings.Cut(item, "/"); strings.Contains(base, "-") || (base != "*" && base != "?" && refNum(base, refDayNames) == 7) {
		hi = 7
	}
	return refPlain(item, wd, 0, hi, refDayNames) || (wd == 0 && refPlain(item, 7, 0, hi, refDayNames))
}

func anyItem(items []string, f func(string) bool) bool {
	for _, it := range items {
		if f(it) {
			return true
		}
	}
	return false
}

// dayMatches applies the day-of-month / day-of-week combination rule.
func (r *refCron) dayMatches(y int, m time.Month, d int) bool {
	dom := anyItem(r.fields[3], func(it string) bool { return r.domItem(it, y, m, d) })
	dow := anyItem(r.fields[5], func(it string) bool { return r.dowItem(it, y, m, d) })
	if !r.domStar && !r.dowStar {
		return dom || dow
	}
	return dom && dow
}

func (r *refCron) plain(i, v, lo, hi int, names []string) bool {
	return anyItem(r.fields[i], func(it string) bool { return refPlain(it, v, lo, hi, names) })
}

// dateMatches applies the year, month and day fields.
func (r *refCron) dateMatches(y int, m time.Month, d int) bool {
	if r.fields[6] != nil && !r.plain(6, y, 1970, 2199, nil) {
		return false
	}
	return r.plain(4, int(m), 1, 12, refMonthNames) && r.dayMatches(y, m, d)
}

// matches reports whether a wall-clock reading (given as a UTC time whose
// fields are the wall fields) matches the expression.
func (r *refCron) matches(w time.Time) bool {
	h, mi, s := w.Clock()
	return r.plain(0, s, 0, 59, nil) && r.plain(1, mi, 0, 59, nil) && r.plain(2, h, 0, 23, nil) &&
		r.dateMatches(w.Date())
}

// wallOf returns t's wall-clock reading in loc as a UTC time.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// fires is the daylight-saving rule of the package documentation, applied
// to the single instant t (a whole second).
func (r *refCron) fires(t time.Time, loc *time.Location) bool {
	_, o := t.In(loc).Zone()
	_, oPrev := t.Add(-time.Second).In(loc).Zone()
	w := wallOf(t, loc)
	if oPrev < o { // t ends a gap: walls [w-Δ, w) never happened
		delta := time.Duration(o-oPrev) * time.Second
		for g := w.Add(-delta); g.Before(w); g = g.Add(time.Second) {
			if r.matches(g) && !r.matches(g.Add(delta)) {
				return true
			}
		}
	}
	if !r.matches(w) {
		return false
	}
	// A second occurrence: an earlier instant had the same reading.
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if wallOf(t.Add(-back), loc).Equal(w) {
			return r.matches(w.Add(back))
		}
	}
	return true
}

// refNext is a brute-force Next for zones without transitions in the
// searched range: day by day, then second by second within matching days.
func (r *refCron) refNext(after time.Time, loc *time.Location, years int) (time.Time, bool) {
	start := after.Truncate(time.Second).Add(time.Second)
	lw := wallOf(start, loc)
	_, off := start.In(loc).Zone()
	day := time.Date(lw.Year(), lw.Month(), lw.Day(), 0, 0, 0, 0, time.UTC)
	end := day.AddDate(years, 0, 0)
	for ; day.Before(end); day = day.AddDate(0, 0, 1) {
		if !r.dateMatches(day.Date()) {
			continue
		}
		s := day
		if s.Before(lw) {
			s = lw
		}
		for w := s; w.Before(day.AddDate(0, 0, 1)); w = w.Add(time.Second) {
			if r.matches(w) {
				return w.Add(-time.Duration(off) * time.Second).UTC(), true
			}
		}
	}
	return time.Time{}, false
}
