package firetime

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func mustParse(t *testing.T, expr string, loc *time.Location) *Cron {
	t.Helper()
	c, err := ParseCron(expr, loc)
	if err != nil {
		t.Fatalf("ParseCron(%q): %v", expr, err)
	}
	return c
}

// at parses "2006-01-02 15:04:05" in loc.
func at(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04:05", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// utc parses an RFC 3339 instant.
func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

func formatTimes(ts []time.Time, loc *time.Location) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "\n\t%s", t.In(loc).Format("2006-01-02 15:04:05 MST Mon"))
	}
	return b.String()
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// TestCronNext checks hand-computed fire times. Each case lists the wall
// times (in the case's zone) expected after `from`.
func TestCronNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, zone, from string
		want                   []string
	}{
		{"every 15 seconds", "*/15 * * * * *", "UTC", "2025-01-01 10:00:07",
			[]string{"2025-01-01 10:00:15", "2025-01-01 10:00:30", "2025-01-01 10:00:45", "2025-01-01 10:01:00"}},
		{"fixed second", "7 * * * * *", "UTC", "2025-01-01 10:00:07",
			[]string{"2025-01-01 10:01:07", "2025-01-01 10:02:07"}},
		{"strictly after", "0 0 10 * * *", "UTC", "2025-01-01 10:00:00",
			[]string{"2025-01-02 10:00:00"}},
		{"5 fields mean second 0", "*/10 * * * *", "UTC", "2025-01-01 10:03:00",
			[]string{"2025-01-01 10:10:00", "2025-01-01 10:20:00"}},
		{"range", "0 0 9-11 * * *", "UTC", "2025-01-01 10:30:00",
			[]string{"2025-01-01 11:00:00", "2025-01-02 09:00:00", "2025-01-02 10:00:00"}},
		{"list", "0 0,30 8,20 * * *", "UTC", "2025-01-01 08:10:00",
			[]string{"2025-01-01 08:30:00", "2025-01-01 20:00:00", "2025-01-01 20:30:00", "2025-01-02 08:00:00"}},
		{"a/n", "0 5/20 * * * *", "UTC", "2025-01-01 10:00:00",
			[]string{"2025-01-01 10:05:00", "2025-01-01 10:25:00", "2025-01-01 10:45:00", "2025-01-01 11:05:00"}},
		{"a-b/n", "0 0 1-10/3 * * *", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-01 01:00:00", "2025-01-01 04:00:00", "2025-01-01 07:00:00", "2025-01-01 10:00:00", "2025-01-02 01:00:00"}},
		{"weekdays by name", "0 0 9 * * mon-FRI", "UTC", "2025-01-03 12:00:00", // a Friday
			[]string{"2025-01-06 09:00:00", "2025-01-07 09:00:00"}},
		{"month names and sunday", "0 0 12 * JAN,jul SUN", "UTC", "2025-01-20 00:00:00",
			[]string{"2025-01-26 12:00:00", "2025-07-06 12:00:00", "2025-07-13 12:00:00"}},
		{"dow 7 is sunday", "0 0 0 * * 7", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-05 00:00:00", "2025-01-12 00:00:00"}},
		{"dow range to 7", "0 0 0 * * 6-7", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-04 00:00:00", "2025-01-05 00:00:00", "2025-01-11 00:00:00"}},
		{"dom or dow when both restricted", "0 0 0 1 * MON", "UTC", "2025-01-25 00:00:00",
			[]string{"2025-01-27 00:00:00", "2025-02-01 00:00:00", "2025-02-03 00:00:00"}},
		{"? leaves dow to decide", "0 0 0 ? * MON", "UTC", "2025-01-25 00:00:00",
			[]string{"2025-01-27 00:00:00", "2025-02-03 00:00:00"}},
		{"stepped dom is restricted", "0 0 0 */10 * SUN", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-05 00:00:00", "2025-01-11 00:00:00", "2025-01-12 00:00:00", "2025-01-19 00:00:00", "2025-01-21 00:00:00"}},
		{"31st skips short months", "0 0 0 31 * *", "UTC", "2025-01-31 00:00:00",
			[]string{"2025-03-31 00:00:00", "2025-05-31 00:00:00", "2025-07-31 00:00:00", "2025-08-31 00:00:00"}},
		{"feb 29", "0 0 0 29 2 *", "UTC", "2025-01-01 00:00:00",
			[]string{"2028-02-29 00:00:00", "2032-02-29 00:00:00"}},
		{"feb 29 across 2100", "0 0 0 29 2 *", "UTC", "2096-03-01 00:00:00",
			[]string{"2104-02-29 00:00:00"}},
		{"L", "0 0 0 L * *", "UTC", "2024-01-15 00:00:00",
			[]string{"2024-01-31 00:00:00", "2024-02-29 00:00:00", "2024-03-31 00:00:00", "2024-04-30 00:00:00"}},
		{"L non-leap", "0 0 0 L 2 *", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-02-28 00:00:00", "2026-02-28 00:00:00"}},
		{"L-2", "0 0 0 L-2 * *", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-29 00:00:00", "2025-02-26 00:00:00", "2025-03-29 00:00:00", "2025-04-28 00:00:00"}},
		{"L-30 only in 31-day months", "0 0 0 L-30 * *", "UTC", "2025-01-02 00:00:00",
			[]string{"2025-03-01 00:00:00", "2025-05-01 00:00:00"}},
		{"15W", "0 0 0 15W * *", "UTC", "2025-01-01 00:00:00", // Jan 15 Wed, Feb 15 Sat, Mar 15 Sat
			[]string{"2025-01-15 00:00:00", "2025-02-14 00:00:00", "2025-03-14 00:00:00", "2025-04-15 00:00:00", "2025-05-15 00:00:00", "2025-06-16 00:00:00"}},
		{"1W stays in month", "0 0 0 1W * *", "UTC", "2025-01-05 00:00:00", // Feb 1 Sat, Mar 1 Sat, Jun 1 Sun
			[]string{"2025-02-03 00:00:00", "2025-03-03 00:00:00", "2025-04-01 00:00:00", "2025-05-01 00:00:00", "2025-06-02 00:00:00"}},
		{"31W stays in month", "0 0 0 31W * *", "UTC", "2025-07-01 00:00:00", // Jul 31 Thu, Aug 31 Sun, Oct 31 Fri
			[]string{"2025-07-31 00:00:00", "2025-08-29 00:00:00", "2025-10-31 00:00:00"}},
		{"LW", "0 0 0 LW * *", "UTC", "2025-04-30 12:00:00", // May 31 Sat, Jun 30 Mon, Aug 31 Sun
			[]string{"2025-05-30 00:00:00", "2025-06-30 00:00:00", "2025-07-31 00:00:00", "2025-08-29 00:00:00"}},
		{"second monday", "0 0 10 ? * MON#2", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-13 10:00:00", "2025-02-10 10:00:00", "2025-03-10 10:00:00"}},
		{"fifth friday", "0 0 0 ? * 5#5", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-31 00:00:00", "2025-05-30 00:00:00", "2025-08-29 00:00:00", "2025-10-31 00:00:00"}},
		{"fifth friday of february is rare", "0 0 0 ? 2 FRI#5", "UTC", "2009-01-01 00:00:00",
			[]string{"2036-02-29 00:00:00", "2064-02-29 00:00:00", "2092-02-29 00:00:00", "2104-02-29 00:00:00"}},
		{"last friday", "0 0 0 ? * 5L", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-31 00:00:00", "2025-02-28 00:00:00", "2025-03-28 00:00:00", "2025-04-25 00:00:00"}},
		{"last friday by name", "0 0 0 ? * friL", "UTC", "2025-01-01 00:00:00",
			[]string{"2025-01-31 00:00:00", "2025-02-28 00:00:00"}},
		{"L or 15", "0 0 0 15,L * *", "UTC", "2025-02-01 00:00:00",
			[]string{"2025-02-15 00:00:00", "2025-02-28 00:00:00", "2025-03-15 00:00:00"}},
		{"year field", "0 0 0 1 1 * 2030-2031", "UTC", "2025-06-01 00:00:00",
			[]string{"2030-01-01 00:00:00", "2031-01-01 00:00:00"}},
		{"year step", "0 0 12 25 12 ? 2025/10", "UTC", "2025-12-26 00:00:00",
			[]string{"2035-12-25 12:00:00", "2045-12-25 12:00:00"}},
		{"past years", "0 0 0 1 1 * 2020", "UTC", "2025-06-01 00:00:00", nil},
		{"@yearly", "@yearly", "UTC", "2025-06-01 00:00:00", []string{"2026-01-01 00:00:00", "2027-01-01 00:00:00"}},
		{"@annually", "@annually", "UTC", "2025-06-01 00:00:00", []string{"2026-01-01 00:00:00"}},
		{"@monthly", "@monthly", "UTC", "2025-06-01 00:00:00", []string{"2025-07-01 00:00:00", "2025-08-01 00:00:00"}},
		{"@weekly is sunday", "@weekly", "UTC", "2025-06-01 00:00:00", []string{"2025-06-08 00:00:00"}},
		{"@daily", "@Daily", "UTC", "2025-06-01 00:00:00", []string{"2025-06-02 00:00:00"}},
		{"@midnight", "@midnight", "UTC", "2025-06-01 00:00:00", []string{"2025-06-02 00:00:00"}},
		{"@hourly", "@hourly", "UTC", "2025-06-01 00:59:59", []string{"2025-06-01 01:00:00", "2025-06-01 02:00:00"}},
		{"@every from epoch", "@every 90s", "UTC", "1970-01-01 00:00:00",
			[]string{"1970-01-01 00:01:30", "1970-01-01 00:03:00", "1970-01-01 00:04:30"}},
		{"@every grid", "@every 1h30m", "UTC", "2025-01-01 00:00:00", // 1735689600 = 321424 × 5400 s: on the grid
			[]string{"2025-01-01 01:30:00", "2025-01-01 03:00:00"}},
		{"zone applied", "0 0 9 * * *", "Asia/Tokyo", "2025-01-01 09:00:00",
			[]string{"2025-01-02 09:00:00"}},
		{"half-hour zone", "0 0 0 * * *", "Asia/Kolkata", "2025-01-01 12:00:00",
			[]string{"2025-01-02 00:00:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loc := mustLoad(t, tt.zone)
			c := mustParse(t, tt.expr, loc)
			var want []time.Time
			for _, w := range tt.want {
				want = append(want, at(t, loc, w))
			}
			n := len(want)
			if n == 0 {
				n = 1
			}
			got := c.NextN(at(t, loc, tt.from), n)
			if !equalTimes(got, want) {
				t.Errorf("%q from %s:\n got:%s\nwant:%s", tt.expr, tt.from, formatTimes(got, loc), formatTimes(want, loc))
			}
			for _, g := range got {
				if g.Location() != time.UTC {
					t.Errorf("result %v not in UTC", g)
				}
			}
		})
	}
}

// TestCronDST checks the daylight-saving rule with hand-computed instants
// (RFC 3339, UTC) around each transition.
func TestCronDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, zone, from string // from is RFC 3339
		want                   []string
	}{
		// New York, 2025-03-09: 02:00 EST becomes 03:00 EDT at 07:00Z.
		{"NY spring fixed time in gap", "0 30 2 * * *", "America/New_York", "2025-03-08T12:00:00Z",
			[]string{"2025-03-09T07:00:00Z", "2025-03-10T06:30:00Z"}},
		{"NY spring many gap times fire once", "0 */15 2 * * *", "America/New_York", "2025-03-08T12:00:00Z",
			[]string{"2025-03-09T07:00:00Z", "2025-03-10T06:00:00Z", "2025-03-10T06:15:00Z"}},
		{"NY spring hourly", "0 0 * * * *", "America/New_York", "2025-03-09T05:30:00Z",
			[]string{"2025-03-09T06:00:00Z", "2025-03-09T07:00:00Z", "2025-03-09T08:00:00Z"}},
		{"NY spring half past every hour", "0 30 * * * *", "America/New_York", "2025-03-09T05:45:00Z",
			[]string{"2025-03-09T06:30:00Z", "2025-03-09T07:30:00Z", "2025-03-09T08:30:00Z"}},
		{"NY spring every 5s", "*/5 * * * * *", "America/New_York", "2025-03-09T06:59:50Z",
			[]string{"2025-03-09T06:59:55Z", "2025-03-09T07:00:00Z", "2025-03-09T07:00:05Z"}},
		{"NY spring even hours", "0 0 */2 * * *", "America/New_York", "2025-03-09T04:30:00Z",
			[]string{"2025-03-09T05:00:00Z", "2025-03-09T07:00:00Z", "2025-03-09T08:00:00Z", "2025-03-09T10:00:00Z"}},
		// New York, 2025-11-02: 02:00 EDT becomes 01:00 EST at 06:00Z.
		{"NY fall fixed time in overlap", "0 30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z",
			[]string{"2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"}},
		{"NY fall hourly", "0 0 * * * *", "America/New_York", "2025-11-02T04:30:00Z",
			[]string{"2025-11-02T05:00:00Z", "2025-11-02T06:00:00Z", "2025-11-02T07:00:00Z"}},
		{"NY fall every 15 min", "0 */15 * * * *", "America/New_York", "2025-11-02T05:40:00Z",
			[]string{"2025-11-02T05:45:00Z", "2025-11-02T06:00:00Z", "2025-11-02T06:15:00Z"}},
		{"NY fall 1:30 and 2:30", "0 30 1,2 * * *", "America/New_York", "2025-11-02T05:00:00Z",
			[]string{"2025-11-02T05:30:00Z", "2025-11-02T06:30:00Z", "2025-11-02T07:30:00Z", "2025-11-03T06:30:00Z"}},
		{"NY fall from inside the repeated hour", "0 30 1 * * *", "America/New_York", "2025-11-02T06:10:00Z",
			[]string{"2025-11-03T06:30:00Z"}},
		// London, 2025-03-30: 01:00 GMT becomes 02:00 BST at 01:00Z.
		{"London spring fixed time in gap", "0 30 1 * * *", "Europe/London", "2025-03-29T12:00:00Z",
			[]string{"2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"}},
		{"London spring hourly", "0 0 * * * *", "Europe/London", "2025-03-29T23:30:00Z",
			[]string{"2025-03-30T00:00:00Z", "2025-03-30T01:00:00Z", "2025-03-30T02:00:00Z"}},
		// London, 2025-10-26: 02:00 BST becomes 01:00 GMT at 01:00Z.
		{"London fall fixed time in overlap", "0 30 1 * * *", "Europe/London", "2025-10-25T12:00:00Z",
			[]string{"2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"}},
		{"London fall hourly", "0 0 * * * *", "Europe/London", "2025-10-25T23:30:00Z",
			[]string{"2025-10-26T00:00:00Z", "2025-10-26T01:00:00Z", "2025-10-26T02:00:00Z"}},
		// São Paulo, 2018-11-04: midnight -03 becomes 01:00 -02 at 03:00Z.
		{"Sao Paulo skipped midnight", "0 0 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00:00Z",
			[]string{"2018-11-04T03:00:00Z", "2018-11-05T02:00:00Z"}},
		{"Sao Paulo hourly through the gap", "0 0 * * * *", "America/Sao_Paulo", "2018-11-04T01:30:00Z",
			[]string{"2018-11-04T02:00:00Z", "2018-11-04T03:00:00Z", "2018-11-04T04:00:00Z"}},
		{"Sao Paulo date field on skipped midnight", "0 0 0 4 11 ?", "America/Sao_Paulo", "2018-01-01T00:00:00Z",
			[]string{"2018-11-04T03:00:00Z", "2019-11-04T03:00:00Z"}},
		// São Paulo, 2019-02-17: midnight -02 becomes 23:00 -03 (16th) at 02:00Z.
		{"Sao Paulo fall fixed 23:30", "0 30 23 * * *", "America/Sao_Paulo", "2019-02-16T12:00:00Z",
			[]string{"2019-02-17T01:30:00Z", "2019-02-18T02:30:00Z"}},
		{"Sao Paulo fall midnight once", "0 0 0 * * *", "America/Sao_Paulo", "2019-02-16T12:00:00Z",
			[]string{"2019-02-17T03:00:00Z", "2019-02-18T03:00:00Z"}},
		// Lord Howe shifts by 30 minutes: 2025-10-05 02:00 +10:30 becomes 02:30 +11 at 2025-10-04T15:30Z.
		{"Lord Howe 30 minute gap", "0 15 2 * * *", "Australia/Lord_Howe", "2025-10-04T00:00:00Z",
			[]string{"2025-10-04T15:30:00Z", "2025-10-05T15:15:00Z"}},
		// @every ignores zones.
		{"@every through NY fall", "@every 20m", "America/New_York", "2025-11-02T05:30:00Z",
			[]string{"2025-11-02T05:40:00Z", "2025-11-02T06:00:00Z", "2025-11-02T06:20:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loc := mustLoad(t, tt.zone)
			c := mustParse(t, tt.expr, loc)
			var want []time.Time
			for _, w := range tt.want {
				want = append(want, utc(t, w))
			}
			got := c.NextN(utc(t, tt.from), len(want))
			if !equalTimes(got, want) {
				t.Errorf("%q from %s:\n got:%s\nwant:%s", tt.expr, tt.from, formatTimes(got, loc), formatTimes(want, loc))
			}
		})
	}
}

// TestCronDSTBruteForce compares every fire time Next returns in a window
// around each transition with the per-second reference rule: nothing fires
// that should not, and nothing that should fire is skipped.
func TestCronDSTBruteForce(t *testing.T) {
	t.Parallel()
	transitions := []struct{ zone, instant string }{
		{"America/New_York", "2025-03-09T07:00:00Z"},
		{"America/New_York", "2025-11-02T06:00:00Z"},
		{"Europe/London", "2025-03-30T01:00:00Z"},
		{"Europe/London", "2025-10-26T01:00:00Z"},
		{"America/Sao_Paulo", "2018-11-04T03:00:00Z"},
		{"America/Sao_Paulo", "2019-02-17T02:00:00Z"},
		{"Australia/Lord_Howe", "2025-04-05T15:00:00Z"},
		{"Australia/Lord_Howe", "2025-10-04T15:30:00Z"},
	}
	exprs := []string{
		"*/5 * * * * *", "*/7 * * * * *", "0 */15 * * * *", "0 0 * * * *", "0 30 * * * *", "30 0 * * * *",
		"0 30 1 * * *", "0 30 2 * * *", "0 0 2 * * *", "0 0 1 * * *", "0 0 3 * * *", "0 0 0 * * *",
		"0 30 23 * * *", "0 */15 2 * * *", "0 0 */2 * * *", "0 0 1/2 * * *", "0 30 1,2 * * *",
		"*/7 * 1 * * *", "59 59 1 * * *", "0 15 0,2 * * *", "0 45 1 * * *", "0 0 0-23 * * *",
	}
	const half = 100 * time.Minute
	for _, tr := range transitions {
		for _, expr := range exprs {
			t.Run(tr.zone+"/"+tr.instant+"/"+expr, func(t *testing.T) {
				t.Parallel()
				loc := mustLoad(t, tr.zone)
				c := mustParse(t, expr, loc)
				ref := refParse(t, expr)
				T := utc(t, tr.instant)
				if _, o1 := T.Add(-time.Second).In(loc).Zone(); func() bool { _, o2 := T.In(loc).Zone(); return o1 == o2 }() {
					t.Fatalf("no transition at %s in %s", tr.instant, tr.zone)
				}
				lo, hi := T.Add(-half), T.Add(half)
				var want []time.Time
				for s := lo; !s.After(hi); s = s.Add(time.Second) {
					if ref.fires(s, loc) {
						want = append(want, s)
					}
				}
				var got []time.Time
				for s := lo.Add(-time.Second); ; {
					next, ok := c.Next(s)
					if !ok {
						t.Fatalf("Next(%s) = false", s)
					}
					if next.After(hi) {
						break
					}
					got = append(got, next)
					s = next
				}
				if !equalTimes(got, want) {
					t.Errorf("%q around %s in %s:\n got:%s\nwant:%s", expr, tr.instant, tr.zone, formatTimes(got, loc), formatTimes(want, loc))
				}
			})
		}
	}
}

// TestCronNextMatchesReference compares Next with a brute-force search on
// many expressions and random start instants, in zones without daylight
// saving.
func TestCronNextMatchesReference(t *testing.T) {
	t.Parallel()
	exprs := []string{
		"* * * * * *", "*/13 */7 * * * *", "0 0 0 L * *", "0 0 0 L-3 * *", "0 0 0 L-30 * *", "0 0 12 15W * *",
		"0 0 12 1W,31W * *", "0 0 12 LW * *", "0 0 12 ? * 2#1", "0 0 12 ? * 0#5", "0 0 12 ? * 3L,6L",
		"0 0 12 13 * 5", "0 0 12 L * 1#2", "0 0 12 ? 2 1#5", "0 0 0 29 2 ?", "0 0 0 29 2 1",
		"0 0 0 30 * ?", "0 0 6 * * 1-5", "0 0 6 */3 * *", "0 0 6 * * */3", "0 0 6 * * 1/2", "0 0 6 * * 5-7",
		"30 15 10 1,15,L * *", "0 0 0 ? 1,4,7,10 2#3", "0 0 0 1 */2 *", "0 59 23 31 12 *",
		"0 0 0 1-7 * MON", "0 0 0 ? * SAT#5", "0 0 0 L-1 2 *", "@weekly", "@monthly",
		"0 0 0 1 1 * 2027,2031", "*/30 * 3 29 2 ? 2028-2040/4",
	}
	zones := []string{"UTC", "Asia/Tokyo", "Asia/Kolkata", "Etc/GMT-12"} // no DST after 2025
	for n, expr := range exprs {
		t.Run(expr, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			ref := refParse(t, expr)
			for i := range 12 {
				zone := zones[i%len(zones)]
				loc := mustLoad(t, zone)
				c := mustParse(t, expr, loc)
				after := time.Unix(1735689600+rng.Int64N(5*365*86400), rng.Int64N(1e9)) // 2025..2030
				want, wok := ref.refNext(after, loc, 50)
				got, gok := c.Next(after)
				if gok != wok || !got.Equal(want) {
					t.Errorf("%q in %s after %s: got %v %v, want %v %v", expr, zone, after.UTC(), got, gok, want, wok)
				}
			}
		})
	}
}

func TestParseCronErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, part, want string // want: exact message, or a substring when it starts with "~"
	}{
		{"", "", "cron_expr: empty expression"},
		{"* * * *", "", "cron_expr: expected 5, 6 or 7 fields, got 4"},
		{"* * * * * * * *", "", "cron_expr: expected 5, 6 or 7 fields, got 8"},
		{"0 0 0 32 * *", "day-of-month", `cron_expr: field "day-of-month": value 32 out of range 1-31`},
		{"0 0 0 0 * *", "day-of-month", `cron_expr: field "day-of-month": value 0 out of range 1-31`},
		{"60 * * * * *", "second", `cron_expr: field "second": value 60 out of range 0-59`},
		{"* 60 * * * *", "minute", `cron_expr: field "minute": value 60 out of range 0-59`},
		{"* * 24 * * *", "hour", `cron_expr: field "hour": value 24 out of range 0-23`},
		{"* * * * 13 *", "month", `cron_expr: field "month": value 13 out of range 1-12`},
		{"* * * * * 8", "day-of-week", `cron_expr: field "day-of-week": value 8 out of range 0-7`},
		{"0 0 0 1 1 * 1969", "year", `cron_expr: field "year": value 1969 out of range 1970-2199`},
		{"0 0 0 1 1 * 2200", "year", `cron_expr: field "year": value 2200 out of range 1970-2199`},
		{"0 0 12 * * 2025", "day-of-week", `~"2025" looks like a year`},
		{"0 0 12 * * 2025-2030", "day-of-week", `~use 7 fields`},
		{"0 12 * * 2030", "day-of-week", `~"2030" looks like a year`},
		{"0 0 0 30 2 *", "", "~never fires"},
		{"0 0 0 31 4 *", "", "~never fires"},
		{"0 0 0 31 2,4,6,9,11 ?", "", "~never fires"},
		{"0 0 0 ? 2 MON#5 2021", "", "~never fires"},
		{"0 0 0 30 2 * 2024-2030", "", "~never fires"},
		{"*/0 * * * * *", "second", `~step "0" out of range 1-60`},
		{"*/61 * * * * *", "second", `~step "61" out of range 1-60`},
		{"* * * * * */8", "day-of-week", `~step "8" out of range 1-7`},
		{"5-1 * * * * *", "second", `~start 5 is greater than end 1`},
		{"a * * * * *", "second", `~invalid value "A"`},
		{"* * * * FOO *", "month", `~invalid value "FOO" (want 1-12 or JAN-DEC)`},
		{"* * * * * FUN", "day-of-week", `~invalid value "FUN" (want 0-7 or SUN-SAT)`},
		{"1,,2 * * * * *", "second", "~empty item"},
		{"-5 * * * * *", "second", "~missing value"},
		{"? * * * * *", "second", "~only allowed in day-of-month and day-of-week"},
		{"0 0 0 ?,1 * *", "day-of-month", "~must be the whole field"},
		{"0 0 0 L * L", "day-of-week", `~bare "L" is ambiguous`},
		{"0 0 0 L-31 * *", "day-of-month", "~out of range 0-30"},
		{"0 0 0 32W * *", "day-of-month", "~out of range 1-31"},
		{"0 0 0 0W * *", "day-of-month", "~out of range 1-31"},
		{"0 0 0 W * *", "day-of-month", "~invalid item"},
		{"0 0 0 15W/2 * *", "day-of-month", "~invalid item"},
		{"0 0 0 ? * 1#6", "day-of-week", "~out of range 1-5"},
		{"0 0 0 ? * 1#0", "day-of-week", "~out of range 1-5"},
		{"0 0 0 ? * 8#1", "day-of-week", "~value 8 out of range 0-7"},
		{"0 0 0 ? * 9L", "day-of-week", "~value 9 out of range 0-7"},
		{"99999999999999999999 * * * * *", "second", "~out of range 0-59"},
		{"0 0 0 * * 10000000000000000000", "day-of-week", "~value 10000000000000000000 out of range 0-7"},
		{"@every 500ms", "@every", "~whole number of seconds, at least 1s"},
		{"@every 1500ms", "@every", "~whole number of seconds"},
		{"@every -5s", "@every", "~at least 1s"},
		{"@every soon", "@every", `~invalid duration "soon"`},
		{"@every", "@every", "~want exactly one duration"},
		{"@fortnightly", "", "~unknown macro"},
		{"@daily 5", "", "~takes no arguments"},
		{strings.Repeat("1,", 600) + "1 * * * * *", "", "~longer than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			c, err := ParseCron(tt.expr, time.UTC)
			if err == nil {
				t.Fatalf("ParseCron(%q) = %v, want error", tt.expr, c)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FieldError", err)
			}
			if fe.Field != FieldCronExpr || fe.Part != tt.part {
				t.Errorf("Field, Part = %q, %q; want %q, %q", fe.Field, fe.Part, FieldCronExpr, tt.part)
			}
			if sub, ok := strings.CutPrefix(tt.want, "~"); ok {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error %q does not contain %q", err, sub)
				}
			} else if err.Error() != tt.want {
				t.Errorf("error %q, want %q", err, tt.want)
			}
		})
	}
}

func TestParseCronEveryWrapsCause(t *testing.T) {
	t.Parallel()
	_, err := ParseCron("@every soon", nil)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Err == nil {
		t.Fatalf("got %v, want a FieldError with the ParseDuration cause", err)
	}
}

func TestParseCronAccepts(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		"* * * * *", "0 0 0 ? * ?", "0 0 0 * * ? *", "0 0 0 29 2 ? 2028", "0 0 0 ? 2 FRI#5",
		"0 0 0 L-30 * *", "  0   0  0 * * *  ", "0 0 12 * * 7#1", "0 0 12 * * 7L", "0 0 0 1 JAN-DEC/3 *",
		"59 59 23 31 12 * 2199", "0 0 0 1 1 * 1970",
	} {
		if _, err := ParseCron(expr, nil); err != nil {
			t.Errorf("ParseCron(%q): %v", expr, err)
		}
	}
}

func TestCronString(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"  0   0  9 * * MON-FRI ", "0 0 9 * * MON-FRI"},
		{"@Daily", "@daily"},
		{"@every 1h30m", "@every 1h30m"},
		{"*/5 * * * *", "*/5 * * * *"},
	}
	for _, tt := range tests {
		c := mustParse(t, tt.in, nil)
		if got := c.String(); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
		again := mustParse(t, c.String(), nil)
		from := utc(t, "2025-05-05T05:05:05Z")
		if !equalTimes(c.NextN(from, 5), again.NextN(from, 5)) {
			t.Errorf("%q and its String() %q fire differently", tt.in, c.String())
		}
		if c.Location() != time.UTC {
			t.Errorf("Location() = %v, want UTC for a nil location", c.Location())
		}
	}
}

func TestParseCronAnchored(t *testing.T) {
	t.Parallel()
	anchor := utc(t, "2025-01-01T00:00:07Z").Add(300 * time.Millisecond) // truncated to :07
	c, err := ParseCronAnchored("@every 1m", time.UTC, anchor)
	if err != nil {
		t.Fatal(err)
	}
	got := c.NextN(utc(t, "2025-01-01T00:00:07Z"), 3)
	want := []time.Time{utc(t, "2025-01-01T00:01:07Z"), utc(t, "2025-01-01T00:02:07Z"), utc(t, "2025-01-01T00:03:07Z")}
	if !equalTimes(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Before the anchor the grid continues backwards.
	if got, _ := c.Next(utc(t, "2024-12-31T23:58:30Z")); !got.Equal(utc(t, "2024-12-31T23:59:07Z")) {
		t.Errorf("Next before anchor = %v", got)
	}
	// Extreme anchors only set the phase.
	far, err := ParseCronAnchored("@every 1m", time.UTC, time.Unix(1<<62+7, 0))
	if err != nil {
		t.Fatal(err)
	}
	phase := int64(1<<62+7) % 60
	if got, _ := far.Next(utc(t, "2025-01-01T00:00:00Z")); got.Unix()%60 != phase {
		t.Errorf("far-anchored Next = %v, want second %d of a minute", got, phase)
	}
	// The anchor does not affect field expressions.
	d, _ := ParseCronAnchored("0 0 * * * *", time.UTC, anchor)
	if got, _ := d.Next(anchor); !got.Equal(utc(t, "2025-01-01T01:00:00Z")) {
		t.Errorf("hourly Next = %v", got)
	}
}

func TestCronNextEdges(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "* * * * * *", nil)
	after := utc(t, "2025-01-01T00:00:00Z").Add(999 * time.Millisecond)
	if got, ok := c.Next(after); !ok || !got.Equal(utc(t, "2025-01-01T00:00:01Z")) {
		t.Errorf("Next(sub-second) = %v, %v", got, ok)
	}
	if _, ok := c.Next(time.Date(MaxSupportedYear+1, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
		t.Error("Next past MaxSupportedYear reported true")
	}
	if got, ok := c.Next(time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)); !ok || got.Year() != 1 {
		t.Errorf("Next before year 1 = %v, %v; want a time in year 1", got, ok)
	}
	if got := c.NextN(after, 0); got != nil {
		t.Errorf("NextN(0) = %v", got)
	}
	var zero Cron
	if got, ok := zero.Next(after); ok {
		t.Errorf("zero Cron fired at %v", got)
	}
	y := mustParse(t, "0 0 0 1 1 * 2030", nil)
	if got := y.NextN(after, 5); len(got) != 1 {
		t.Errorf("NextN of a single-year expression = %v, want one time", got)
	}
}

func BenchmarkCronNext(b *testing.B) {
	loc, _ := time.LoadLocation("America/New_York")
	for _, expr := range []string{"*/5 * * * * *", "0 30 2 * * *", "0 0 0 ? 2 FRI#5", "0 0 12 LW * *"} {
		c, err := ParseCron(expr, loc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			t := time.Date(2025, 3, 9, 1, 0, 0, 0, loc)
			for b.Loop() {
				if _, ok := c.Next(t); !ok {
					b.Fatal("no next")
				}
			}
		})
	}
}

func BenchmarkParseCron(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCron("0 */5 9-17 ? * MON-FRI", time.UTC); err != nil {
			b.Fatal(err)
		}
	}
}
