package firetime

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Limits of the cron dialect and of Next's search.
const (
	// MaxCronLen is the longest expression ParseCron accepts, in bytes.
	MaxCronLen = 1024
	// MinCronYear and MaxCronYear bound the year field of 7-field expressions.
	MinCronYear = 1970
	MaxCronYear = 2199
	// SearchYears is how far past its argument Next looks before it reports
	// false. It is one Gregorian cycle, so for an expression without a year
	// field Next can only report false past the supported range.
	SearchYears = 400
	// MaxSupportedYear is the last year Next and the plan functions compute
	// in; arguments later than that report false.
	MaxSupportedYear = 9999
	// maxSegments bounds the number of UTC-offset periods Next walks. The
	// walk ends by itself once it passes SearchYears; a zone has at most
	// four periods a year after its last explicit transition (two for
	// daylight saving, split at UTC year boundaries by ZoneBounds, see
	// periodEnd), so this is a backstop that no zone reaches.
	maxSegments = 8192
	// maxZoneOffset exceeds the magnitude of every UTC offset Next meets:
	// IANA zones stay within ±16 hours, and the POSIX TZ rules Go accepts
	// within ±168 hours. Next relies on it to skip periods.
	maxZoneOffset = 8 * 86400
)

// Cron is a parsed cron expression bound to a time zone (see the package
// documentation for the dialect and the daylight-saving rule). Make one with
// ParseCron or ParseCronAnchored; the zero Cron never fires. A Cron is
// immutable and safe for concurrent use.
type Cron struct {
	expr string
	loc  *time.Location

	every  int64 // @every interval in seconds; 0 for field expressions
	anchor int64 // @every anchor, Unix seconds modulo every

	second, minute, hour uint64 // bit v set when value v matches
	dom                  uint32 // bits 1..31
	month                uint32 // bits 1..12
	dow                  uint32 // bits 0..6, Sunday = 0
	years                [4]uint64
	hasYear              bool // false: any year

	domLast uint32   // bit n set for L-n (L is L-0)
	domW    uint32   // bit n set for nW
	domLW   bool     // LW
	dowNth  [7]uint8 // dowNth[wd] has bit k set for wd#k
	dowLast uint32   // bit wd set for wdL

	domStar, dowStar bool // field was exactly * or ?
}

type cronField int

const (
	fieldSecond cronField = iota
	fieldMinute
	fieldHour
	fieldDom
	fieldMonth
	fieldDow
	fieldYear
)

func (f cronField) String() string {
	switch f {
	case fieldSecond:
		return "second"
	case fieldMinute:
		return "minute"
	case fieldHour:
		return "hour"
	case fieldDom:
		return "day-of-month"
	case fieldMonth:
		return "month"
	case fieldDow:
		return "day-of-week"
	default:
		return "year"
	}
}

// bounds returns the values a field accepts (day-of-week accepts 7 for
// Sunday, which is stored as 0).
func (f cronField) bounds() (lo, hi int) {
	switch f {
	case fieldSecond, fieldMinute:
		return 0, 59
	case fieldHour:
		return 0, 23
	case fieldDom:
		return 1, 31
	case fieldMonth:
		return 1, 12
	case fieldDow:
		return 0, 7
	default:
		return MinCronYear, MaxCronYear
	}
}

func exprError(format string, args ...any) *FieldError {
	return &FieldError{Field: FieldCronExpr, Reason: fmt.Sprintf(format, args...)}
}

func fieldError(f cronField, format string, args ...any) *FieldError {
	return &FieldError{Field: FieldCronExpr, Part: f.String(), Reason: fmt.Sprintf(format, args...)}
}

// ParseCron parses expr (see the package documentation for the dialect)
// for evaluation in loc; a nil loc means UTC. `@every` expressions are
// anchored at the Unix epoch. Errors are *FieldError values with Field
// "cron_expr" that wrap ErrInvalid.
func ParseCron(expr string, loc *time.Location) (*Cron, error) {
	return ParseCronAnchored(expr, loc, time.Unix(0, 0))
}

// ParseCronAnchored is ParseCron with an explicit anchor for `@every`: the
// expression fires at anchor + k·d for every integer k, with anchor
// truncated to a whole second. Other expressions ignore the anchor.
func ParseCronAnchored(expr string, loc *time.Location, anchor time.Time) (*Cron, error) {
	if loc == nil {
		loc = time.UTC
	}
	if len(expr) > MaxCronLen {
		return nil, exprError("expression longer than %d bytes", MaxCronLen)
	}
	fields := strings.Fields(expr)
	if len(fields) == 0 {
		return nil, exprError("empty expression")
	}
	c := &Cron{expr: strings.Join(fields, " "), loc: loc}
	if strings.HasPrefix(fields[0], "@") {
		return c.parseMacro(fields, anchor)
	}
	var texts [7]string
	switch len(fields) {
	case 5:
		texts = [7]string{"0", fields[0], fields[1], fields[2], fields[3], fields[4], "*"}
	case 6:
		copy(texts[:], fields)
		texts[fieldYear] = "*"
	case 7:
		copy(texts[:], fields)
	default:
		return nil, exprError("expected 5, 6 or 7 fields, got %d", len(fields))
	}
	if len(fields) < 7 {
		if item, ok := looksLikeYear(texts[fieldDow]); ok {
			form := "sec min hour dom month dow"
			if len(fields) == 5 {
				form = "min hour dom month dow"
			}
			return nil, fieldError(fieldDow, "%q looks like a year, but a %d-field expression is %q; "+
				"use 7 fields (sec min hour dom month dow year) to restrict years", item, len(fields), form)
		}
	}
	for f := fieldSecond; f <= fieldYear; f++ {
		if err := c.parseField(f, texts[f]); err != nil {
			return nil, err
		}
	}
	if !c.possible() {
		return nil, exprError("expression never fires: no date matches day-of-month %q, month %q, day-of-week %q and year %q",
			texts[fieldDom], texts[fieldMonth], texts[fieldDow], texts[fieldYear])
	}
	return c, nil
}

func (c *Cron) parseMacro(fields []string, anchor time.Time) (*Cron, error) {
	name := strings.ToLower(fields[0])
	if name == "@every" {
		if len(fields) != 2 {
			return nil, &FieldError{Field: FieldCronExpr, Part: "@every", Reason: "want exactly one duration, e.g. \"@every 90s\""}
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return nil, &FieldError{Field: FieldCronExpr, Part: "@every", Reason: fmt.Sprintf("invalid duration %q", fields[1]), Err: err}
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, &FieldError{Field: FieldCronExpr, Part: "@every", Reason: fmt.Sprintf("duration %s must be a whole number of seconds, at least 1s", d)}
		}
		c.every = int64(d / time.Second)
		// The grid anchor + k·every is the same for every anchor congruent
		// modulo every; keeping the residue avoids overflow for any anchor.
		c.anchor = floorUnix(anchor) % c.every
		if c.anchor < 0 {
			c.anchor += c.every
		}
		c.expr = "@every " + fields[1]
		return c, nil
	}
	if len(fields) != 1 {
		return nil, exprError("macro %s takes no arguments", fields[0])
	}
	var six string
	switch name {
	case "@yearly", "@annually":
		six = "0 0 0 1 1 *"
	case "@monthly":
		six = "0 0 0 1 * *"
	case "@weekly":
		six = "0 0 0 * * 0"
	case "@daily", "@midnight":
		six = "0 0 0 * * *"
	case "@hourly":
		six = "0 0 * * * *"
	default:
		return nil, exprError("unknown macro %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every)", fields[0])
	}
	p, err := ParseCron(six, c.loc)
	if err != nil {
		return nil, fmt.Errorf("expand %s: %w", name, err) // unreachable: the expansions are valid
	}
	p.expr = name
	return p, nil
}

// looksLikeYear reports whether a 5/6-field expression's day-of-week field
// contains an item that is a four-digit number ≥ 1970, alone or starting a
// range or step, returning that item.
func looksLikeYear(field string) (string, bool) {
	for _, item := range strings.Split(field, ",") {
		r, _, _ := strings.Cut(item, "/")
		a, _, _ := strings.Cut(r, "-")
		if len(a) == 4 && allDigits(a) {
			if n, _ := strconv.Atoi(a); n >= MinCronYear {
				return item, true
			}
		}
	}
	return "", false
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (c *Cron) parseField(f cronField, text string) error {
	if strings.Contains(text, "?") {
		if f != fieldDom && f != fieldDow {
			return fieldError(f, "%q: ? is only allowed in day-of-month and day-of-week", text)
		}
		if text != "?" {
			return fieldError(f, "%q: ? must be the whole field", text)
		}
	}
	star := text == "*" || text == "?"
	switch f {
	case fieldDom:
		c.domStar = star
	case fieldDow:
		c.dowStar = star
	case fieldYear:
		if star {
			return nil // any year
		}
		c.hasYear = true
	}
	for _, item := range strings.Split(text, ",") {
		if item == "" {
			return fieldError(f, "empty item in list %q", text)
		}
		if err := c.parseItem(f, strings.ToUpper(item)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cron) parseItem(f cronField, item string) error {
	switch f {
	case fieldDom:
		if strings.ContainsAny(item, "LW") {
			return c.parseDomSpecial(item)
		}
	case fieldDow:
		if strings.Contains(item, "#") || (strings.HasSuffix(item, "L") && !strings.Contains(item, "/")) {
			return c.parseDowSpecial(item)
		}
	}
	lo, hi := f.bounds()
	rangePart, stepPart, hasStep := strings.Cut(item, "/")
	var a, b int
	if rangePart == "*" || rangePart == "?" {
		a, b = lo, hi
		if f == fieldDow {
			b = 6
		}
	} else {
		x, y, isRange := strings.Cut(rangePart, "-")
		var err error
		if a, err = parseValue(f, x); err != nil {
			return err
		}
		switch {
		case isRange:
			if b, err = parseValue(f, y); err != nil {
				return err
			}
			if a > b {
				return fieldError(f, "range %q: start %d is greater than end %d", rangePart, a, b)
			}
		case hasStep:
			b = hi
			if f == fieldDow && a < 7 {
				b = 6 // 1/2 means 1,3,5 — not also 7 (Sunday again)
			}
		default:
			b = a
		}
	}
	step := 1
	if hasStep {
		span := hi - lo + 1
		if f == fieldDow {
			span = 7
		}
		n, err := strconv.Atoi(stepPart)
		if err != nil || !allDigits(stepPart) || n < 1 || n > span {
			return fieldError(f, "step %q out of range 1-%d", stepPart, span)
		}
		step = n
	}
	for v := a; v <= b; v += step {
		c.set(f, v)
	}
	return nil
}

func (c *Cron) set(f cronField, v int) {
	switch f {
	case fieldSecond:
		c.second |= 1 << uint(v)
	case fieldMinute:
		c.minute |= 1 << uint(v)
	case fieldHour:
		c.hour |= 1 << uint(v)
	case fieldDom:
		c.dom |= 1 << uint(v)
	case fieldMonth:
		c.month |= 1 << uint(v)
	case fieldDow:
		c.dow |= 1 << uint(v%7)
	case fieldYear:
		i := v - MinCronYear
		c.years[i/64] |= 1 << uint(i%64)
	}
}

// parseValue parses a number or, in month and day-of-week, a name.
func parseValue(f cronField, s string) (int, error) {
	lo, hi := f.bounds()
	if s == "" {
		return 0, fieldError(f, "missing value")
	}
	if allDigits(s) {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, fieldError(f, "value %s out of range %d-%d", s, lo, hi)
		}
		return n, nil
	}
	switch f {
	case fieldMonth:
		if n := nameIndex("JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC", s); n >= 0 {
			return n + 1, nil
		}
		return 0, fieldError(f, "invalid value %q (want 1-12 or JAN-DEC)", s)
	case fieldDow:
		if n := nameIndex("SUNMONTUEWEDTHUFRISAT", s); n >= 0 {
			return n, nil
		}
		return 0, fieldError(f, "invalid value %q (want 0-7 or SUN-SAT)", s)
	}
	return 0, fieldError(f, "invalid value %q (want %d-%d)", s, lo, hi)
}

// nameIndex finds a three-letter name in a table of concatenated names.
func nameIndex(table, s string) int {
	if len(s) != 3 {
		return -1
	}
	for i := 0; i+3 <= len(table); i += 3 {
		if table[i:i+3] == s {
			return i / 3
		}
	}
	return -1
}

func (c *Cron) parseDomSpecial(item string) error {
	const help = "want L, L-n, nW or LW"
	switch {
	case item == "L":
		c.domLast |= 1
	case item == "LW":
		c.domLW = true
	case strings.HasPrefix(item, "L-"):
		n, err := strconv.Atoi(item[2:])
		if err != nil || !allDigits(item[2:]) || n > 30 {
			return fieldError(fieldDom, "%q: offset in L-n out of range 0-30", item)
		}
		c.domLast |= 1 << uint(n)
	case strings.HasSuffix(item, "W") && allDigits(item[:len(item)-1]):
		n, err := strconv.Atoi(item[:len(item)-1])
		if err != nil || n < 1 || n > 31 {
			return fieldError(fieldDom, "%q: day in nW out of range 1-31", item)
		}
		c.domW |= 1 << uint(n)
	default:
		return fieldError(fieldDom, "invalid item %q (%s, or numbers 1-31)", item, help)
	}
	return nil
}

func (c *Cron) parseDowSpecial(item string) error {
	if item == "L" {
		return fieldError(fieldDow, "bare \"L\" is ambiguous: use 6 or SAT for Saturday, or nL (e.g. 5L) for the last weekday n of the month")
	}
	if day, nth, ok := strings.Cut(item, "#"); ok {
		wd, err := parseValue(fieldDow, day)
		if err != nil {
			return err
		}
		k, err := strconv.Atoi(nth)
		if err != nil || !allDigits(nth) || k < 1 || k > 5 {
			return fieldError(fieldDow, "%q: occurrence in n#k out of range 1-5", item)
		}
		c.dowNth[wd%7] |= 1 << uint(k)
		return nil
	}
	wd, err := parseValue(fieldDow, strings.TrimSuffix(item, "L"))
	if err != nil {
		return err
	}
	c.dowLast |= 1 << uint(wd%7)
	return nil
}

// possible reports whether any date matches the day, month and year fields.
// The Gregorian calendar repeats every 400 years, weekdays included, so
// without a year field one cycle decides it.
func (c *Cron) possible() bool {
	y0, y1 := 2000, 2000+SearchYears-1
	if c.hasYear {
		y0, y1 = MinCronYear, MaxCronYear
	}
	for y := y0; y <= y1; y++ {
		if !c.yearMatches(y) {
			continue
		}
		for m := 1; m <= 12; m++ {
			if c.month&(1<<uint(m)) != 0 && c.dayMask(y, m) != 0 {
				return true
			}
		}
	}
	return false
}

func (c *Cron) yearMatches(y int) bool {
	if !c.hasYear {
		return true
	}
	if y < MinCronYear || y > MaxCronYear {
		return false
	}
	i := y - MinCronYear
	return c.years[i/64]&(1<<uint(i%64)) != 0
}

// nextYear returns the first year ≥ y in the year field, or -1.
func (c *Cron) nextYear(y int) int {
	if y < MinCronYear {
		y = MinCronYear
	}
	for ; y <= MaxCronYear; y++ {
		if c.yearMatches(y) {
			return y
		}
	}
	return -1
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	default:
		return 31
	}
}

// weekdayOf returns the weekday (Sunday = 0) of a date.
func weekdayOf(y, m, d int) int {
	return int(time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Weekday())
}

// dayMask returns the days of month m of year y (bits 1..31) that match the
// day-of-month and day-of-week fields, combined as the package doc says.
func (c *Cron) dayMask(y, m int) uint32 {
	last := daysIn(y, m)
	full := uint32(1)<<uint(last+1) - 2
	if c.domStar && c.dowStar {
		return full
	}
	dom := c.dom & full
	for l := c.domLast; l != 0; l &= l - 1 {
		if d := last - bits.TrailingZeros32(l); d >= 1 {
			dom |= 1 << uint(d)
		}
	}
	first := weekdayOf(y, m, 1)
	wd := func(d int) int { return (first + d - 1) % 7 }
	for w := c.domW & full; w != 0; w &= w - 1 {
		d := bits.TrailingZeros32(w)
		switch wd(d) {
		case 6: // Saturday: Friday before, or Monday the 3rd
			if d == 1 {
				d = 3
			} else {
				d--
			}
		case 0: // Sunday: Monday after, or Friday before the last day
			if d == last {
				d -= 2
			} else {
				d++
			}
		}
		dom |= 1 << uint(d)
	}
	if c.domLW {
		d := last
		for wd(d) == 0 || wd(d) == 6 {
			d--
		}
		dom |= 1 << uint(d)
	}
	var dow uint32
	for d := 1; d <= last; d++ {
		w := wd(d)
		if c.dow&(1<<uint(w)) != 0 ||
			c.dowNth[w]&(1<<uint((d-1)/7+1)) != 0 ||
			(c.dowLast&(1<<uint(w)) != 0 && d+7 > last) {
			dow |= 1 << uint(d)
		}
	}
	switch {
	case c.domStar:
		return dow
	case c.dowStar:
		return dom
	default:
		return dom | dow
	}
}

// nextBit returns the smallest set bit ≥ from in b, or -1.
func nextBit(b uint64, from int) int {
	if from >= 64 {
		return -1
	}
	if from < 0 {
		from = 0
	}
	m := b >> uint(from)
	if m == 0 {
		return -1
	}
	return from + bits.TrailingZeros64(m)
}

// Wall times are handled as "naive" Unix seconds: the calendar reading
// y-m-d h:m:s encoded as if it were UTC.

func wallSeconds(y, m, d, h, mi, s int) int64 {
	return time.Date(y, time.Month(m), d, h, mi, s, 0, time.UTC).Unix()
}

// matchesWall reports whether the wall reading w matches every field.
func (c *Cron) matchesWall(w int64) bool {
	t := time.Unix(w, 0).UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return c.yearMatches(y) && c.month&(1<<uint(mo)) != 0 && c.dayMask(y, int(mo))&(1<<uint(d)) != 0 &&
		c.hour&(1<<uint(h)) != 0 && c.minute&(1<<uint(mi)) != 0 && c.second&(1<<uint(s)) != 0
}

// nextWall returns the first matching wall reading ≥ from, searching no
// further than the end of maxYear.
func (c *Cron) nextWall(from int64, maxYear int) (int64, bool) {
	t := time.Unix(from, 0).UTC()
	y, mo, d := t.Date()
	m := int(mo)
	h, mi, s := t.Clock()
	maskY, maskM, mask := 0, 0, uint32(0)
	for y <= maxYear {
		if c.hasYear {
			ny := c.nextYear(y)
			if ny < 0 {
				return 0, false
			}
			if ny != y {
				y, m, d, h, mi, s = ny, 1, 1, 0, 0, 0
				continue
			}
		}
		nm := nextBit(uint64(c.month), m)
		if nm < 0 {
			y, m, d, h, mi, s = y+1, 1, 1, 0, 0, 0
			continue
		}
		if nm != m {
			m, d, h, mi, s = nm, 1, 0, 0, 0
		}
		if maskY != y || maskM != m {
			maskY, maskM, mask = y, m, c.dayMask(y, m)
		}
		nd := nextBit(uint64(mask), d)
		if nd < 0 {
			m, d, h, mi, s = m+1, 1, 0, 0, 0
			continue
		}
		if nd != d {
			d, h, mi, s = nd, 0, 0, 0
		}
		nh := nextBit(c.hour, h)
		if nh < 0 {
			d, h, mi, s = d+1, 0, 0, 0
			continue
		}
		if nh != h {
			h, mi, s = nh, 0, 0
		}
		nmi := nextBit(c.minute, mi)
		if nmi < 0 {
			h, mi, s = h+1, 0, 0
			continue
		}
		if nmi != mi {
			mi, s = nmi, 0
		}
		ns := nextBit(c.second, s)
		if ns < 0 {
			mi, s = mi+1, 0
			continue
		}
		return wallSeconds(y, m, d, h, mi, ns), true
	}
	return 0, false
}

// floorUnix returns t in whole Unix seconds, rounded down.
func floorUnix(t time.Time) int64 { return t.Unix() }

// minUnix is 0001-01-01T00:00:00Z, the earliest instant Next searches from.
const minUnix = -62135596800

// Next returns the first fire instant strictly after `after`, in UTC. It
// reports false when there is none: the year field has no year left, the
// fire would be more than SearchYears years after `after`, or `after` is past
// MaxSupportedYear. Instants before year 1 are treated as year 1. It never
// returns a zero time with true.
func (c *Cron) Next(after time.Time) (time.Time, bool) { return c.nextFire(after, true) }

// nextFire is Next; with skip false it visits every offset period on the way
// to the answer instead of jumping over those that cannot hold it (the tests
// compare the two).
func (c *Cron) nextFire(after time.Time, skip bool) (time.Time, bool) {
	if after.Year() > MaxSupportedYear {
		return time.Time{}, false
	}
	cur := floorUnix(after) + 1 // first whole second strictly after `after`
	if cur < minUnix {
		cur = minUnix
	}
	if c.every > 0 {
		k := ceilDiv(cur-c.anchor, c.every)
		return time.Unix(c.anchor+k*c.every, 0).UTC(), true
	}
	loc := c.loc
	if loc == nil {
		loc = time.UTC // the zero Cron
	}
	memo := &wallMemo{c: c, limitYear: time.Unix(cur, 0).UTC().Year() + SearchYears}
	next := memo.next

	// prevOff is the UTC offset just before cur once the walk has passed a
	// period: cur is then where that period ended.
	var prevOff int64
	prevKnown := false
	for range maxSegments {
		z := time.Unix(cur, 0).In(loc)
		_, off := z.Zone()
		o := int64(off)
		start, end := z.ZoneBounds()
		segEnd := periodEnd(cur, end)
		endWall := int64(math.MaxInt64)
		if segEnd != math.MaxInt64 {
			endWall = segEnd + o
		}
		hasPrev := !start.IsZero()
		var s int64
		if hasPrev {
			s = start.Unix()
			if !prevKnown || s != cur {
				_, po := time.Unix(s-1, 0).In(loc).Zone()
				prevOff = int64(po)
			}
		}
		// Spring forward at s: the gap's matching wall times fire at s.
		if hasPrev && s == cur && o > prevOff && c.gapFires(s+prevOff, s+o, o-prevOff, next) {
			return time.Unix(s, 0).UTC(), true
		}
		// Fall back at s: wall times in [repLo, repHi) happen a second time,
		// or from the start of the previous offset's run if that is later.
		var repLo, repHi int64
		if hasPrev && prevOff > o {
			repLo, repHi = s+o, s+prevOff
			if rs := runStart(loc, s, prevOff, s-(prevOff-o)); rs != math.MinInt64 {
				repLo = max(repLo, rs+prevOff)
			}
		}
		w, from, found, ok := c.scanPeriod(next, cur+o, endWall, repLo, repHi, prevOff-o)
		switch {
		case !ok:
			return time.Time{}, false
		case found:
			return time.Unix(w-o, 0).UTC(), true
		}
		// No wall reading in [from, w) matches, and a fire's matching reading
		// (its own, or a gap's) is less than maxZoneOffset away from it. When
		// that range covers every reading near the instants from segEnd on,
		// none of them before w-maxZoneOffset fires: resume there rather
		// than visit each period in between (far years, rare dates).
		if j := w - maxZoneOffset; skip && j > segEnd && from <= segEnd-maxZoneOffset {
			cur, prevKnown = j, false
			continue
		}
		cur, prevOff, prevKnown = segEnd, o, true
	}
	return time.Time{}, false
}

// wallMemo remembers the last answer of nextWall, which is monotone: if
// it found w searching from f, it finds w again from anywhere in [f, w].
// Walking offset periods re-asks the same question.
type wallMemo struct {
	c         *Cron
	limitYear int
	from, w   int64
	ok, set   bool
}

// next is c.nextWall(from, limitYear), remembered.
func (m *wallMemo) next(from int64) (int64, bool) {
	if m.set && m.ok && from >= m.from && from <= m.w {
		return m.w, true
	}
	m.w, m.ok = m.c.nextWall(from, m.limitYear)
	m.from, m.set = from, true
	return m.w, m.ok
}

// scanPeriod looks for the first matching wall reading in [from, endWall)
// of one offset period, passing over the readings of [repLo, repHi) — the
// second occurrences of a fall-back — that the old clock (reading + shift)
// would not fire. found reports a match w; otherwise w is the first
// matching reading at or after endWall and last the reading the search
// last started from. ok is false when nothing matches at all.
func (c *Cron) scanPeriod(next func(int64) (int64, bool), from, endWall, repLo, repHi, shift int64) (w, last int64, found, ok bool) {
	for {
		if w, ok = next(from); !ok {
			return 0, from, false, false
		}
		if w >= endWall {
			return w, from, false, true
		}
		if w >= repLo && w < repHi && !c.matchesWall(w+shift) {
			from = w + 1 // second occurrence of a time the old clock would not fire
			continue
		}
		return w, from, true, true
	}
}

// periodEnd returns the end of the offset period that contains cur, given
// the end ZoneBounds reports for it: math.MaxInt64 for none, and otherwise
// an instant after cur before which the offset does not change.
//
// ZoneBounds splits the periods that come from a zone's POSIX TZ rule (the
// years after its last explicit transition: from 2038 in "fat" TZif files,
// decades earlier in the slim ones time/tzdata embeds) at UTC year
// boundaries, and ends a year's last period 365 days after the year began,
// also in leap years (golang/go#81583). During the last UTC day of such a
// leap year (2028-12-31 with the slim files) it therefore reports an end at
// or before cur, while the offset holds until the year really ends.
func periodEnd(cur int64, end time.Time) int64 {
	if end.IsZero() {
		return math.MaxInt64
	}
	e := end.Unix()
	if e <= cur {
		y := time.Unix(cur, 0).UTC().Year()
		e = time.Date(y+1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
	}
	return e
}

// runStart returns the first instant of the run of instants that ends at s
// and has UTC offset off, or math.MinInt64 when that run starts at or before
// floor (the caller need not know where). It looks through period
// boundaries at which the offset does not change, such as the year
// boundaries ZoneBounds reports for rule-based periods.
func runStart(loc *time.Location, s, off, floor int64) int64 {
	for range 8 { // a handful of boundaries without an offset change at most
		ps, _ := time.Unix(s-1, 0).In(loc).ZoneBounds()
		if ps.IsZero() || ps.Unix() <= floor {
			return math.MinInt64
		}
		s = ps.Unix()
		if _, o := time.Unix(s-1, 0).In(loc).Zone(); int64(o) != off {
			break
		}
	}
	return s
}

// gapFires reports whether some wall time in [lo, hi) matches while its
// reading delta later does not; next is Next's memoised nextWall.
func (c *Cron) gapFires(lo, hi, delta int64, next func(int64) (int64, bool)) bool {
	for from := lo; ; {
		w, ok := next(from)
		if !ok || w >= hi {
			return false
		}
		if !c.matchesWall(w + delta) {
			return true
		}
		from = w + 1
	}
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) == (b > 0) {
		q++
	}
	return q
}

// NextN returns up to n successive fire instants strictly after from, in
// UTC and increasing order; fewer when Next reports false. It returns nil
// for n ≤ 0. Callers bound n (the API caps previews).
func (c *Cron) NextN(from time.Time, n int) []time.Time {
	if n <= 0 {
		return nil
	}
	out := make([]time.Time, 0, min(n, 64))
	for t := from; len(out) < n; {
		next, ok := c.Next(t)
		if !ok {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

// String returns the expression as parsed, with fields separated by single
// spaces and macro names in lower case; parsing it again in the same
// location (and, for @every, with the same anchor) gives an equivalent Cron.
func (c *Cron) String() string { return c.expr }

// Location returns the time zone the expression is evaluated in.
func (c *Cron) Location() *time.Location { return c.loc }
