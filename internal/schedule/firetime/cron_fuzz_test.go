package firetime

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParseCron checks that ParseCron never panics, that its errors are
// FieldErrors wrapping ErrInvalid, and that for accepted expressions Next is
// strictly increasing, agrees with String's reparse and with a walk through
// every offset period, returns only instants the per-second reference rule
// says fire — with nothing the reference fires in between, whenever the gap
// is short enough to check — and reports none only when the reference
// matches no date in the years it searches.
func FuzzParseCron(f *testing.F) {
	seeds := []string{
		"* * * * * *", "*/5 * * * * *", "0 */15 * * * *", "0 0 * * * *", "0 30 1 * * *", "0 30 2 * * *",
		"0 0 0 * * *", "*/10 * * * *", "0 0 9-17 * * MON-FRI", "0 0 0 L * *", "0 0 0 L-3 * *", "0 0 0 15W * *",
		"0 0 0 LW * *", "0 0 0 ? * 5#3", "0 0 0 ? * 5L", "0 0 0 1 * MON", "0 0 0 29 2 ?", "0 0 0 1 1 * 2030-2035",
		"0 0 0 ? 2 FRI#5", "@hourly", "@every 90s", "@every 1h", "0 0 12 * * 2025", "0 0 0 30 2 *", "1-5/2,7 */3 1/4 1,L * 0-7/2",
		"0 0 0 1W,31W,L-30 JAN-DEC/5 sat#5,SUNL", "59 59 23 L 12 ? 2199", "0 0 0 * * 7/2", "0 0 */2 * * *",
		// Found by fuzzing. "0 0 1 1 07/1" (Sunday only, as "7/1" is) exposed
		// a bug in the reference matcher, not in ParseCron.
		"0 0 1 1 07/1", "* 0 31W * 0", "* 0 LW 7 0", "0 0 * 2 FRI#5", "0 0 0 1 1 0 2000-2070",
		"0 0 0 0 00000000000000000000000000000000", "0 0 0 0 10000000000000000000", "*/A0 0 0 0 0",
		// Years served by the zones' TZ rules: Next once stopped at the
		// last UTC day of the first leap year there (golang/go#81583).
		"0 0 2 * * * 2042", "0 30 2 ? 3 SUNL 2099", "0 15 2 ? 10 SUN#1 2070", "59 59 23 31 12 * 2199",
		"0 0 12 L 12 ? 2196",
	}
	zones := []string{"UTC", "America/New_York", "Europe/London", "America/Sao_Paulo", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia"}
	locs := make([]*time.Location, len(zones))
	for i, z := range zones {
		loc, err := time.LoadLocation(z)
		if err != nil {
			f.Fatal(err)
		}
		locs[i] = loc
	}
	locs = append(locs, footerZone(f, "footer:Paris", "CET", 3600, parisRule)) // as time/tzdata's slim files
	for i, s := range seeds {
		f.Add(s, int64(1741500000+i*86400*37), uint8(i))
	}
	// 2028-12-31 and 2040-12-31, 12:00 UTC (after is offset from 1900).
	f.Add("* * * * * *", int64(4070865600), uint8(len(locs)-1))
	f.Add("@yearly", int64(4449556800), uint8(2))
	const (
		lo   = -2208988800      // 1900-01-01T00:00:00Z
		span = 400 * 31556952   // 400 Gregorian years in seconds
		apia = "Pacific/Apia"   // skipped a whole day: the reference's overlap test does not apply
		max  = 10 * time.Minute // longest gap brute-forced between two fires
	)
	f.Fuzz(func(t *testing.T, expr string, after int64, zone uint8) {
		loc := locs[int(zone)%len(locs)]
		c, err := ParseCron(expr, loc)
		if err != nil {
			var fe *FieldError
			if c != nil || !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || fe.Field != FieldCronExpr {
				t.Fatalf("ParseCron(%q) = %v, %v: want nil and a cron_expr FieldError", expr, c, err)
			}
			return
		}
		again, err := ParseCron(c.String(), loc)
		if err != nil {
			t.Fatalf("reparse of String() %q of %q: %v", c.String(), expr, err)
		}
		// Any instant at all must not panic nor break the contract.
		raw := time.Unix(after, 0)
		if n, ok := c.Next(raw); ok && (n.IsZero() || !n.After(raw)) {
			t.Fatalf("%q: Next(%v) = %v, not after", expr, raw, n)
		}
		m := after % span
		if m < 0 {
			m += span
		}
		prev := time.Unix(lo+m, (after&0xff)*1e6)
		var ref, dates *refCron
		if !strings.HasPrefix(c.String(), "@every") {
			dates = refParse(t, c.String())
			if loc.String() != apia {
				ref = dates
			}
		}
		for i := range 6 {
			n, ok := c.Next(prev)
			if i == 0 {
				if w, wok := c.nextFire(prev, false); wok != ok || !w.Equal(n) {
					t.Fatalf("%q in %s: Next(%v) = %v, %v; walking every period = %v, %v", expr, loc, prev, n, ok, w, wok)
				}
			}
			if !ok {
				// A matching date fires at some instant within a day of it.
				l := prev.In(loc)
				from := time.Date(l.Year(), l.Month(), l.Day()+2, 0, 0, 0, 0, time.UTC)
				if dates != nil {
					if d, found := dates.firstDate(from, prev.UTC().Year()+SearchYears-1); found {
						t.Fatalf("%q in %s: Next(%v) reports none, but %s matches", expr, loc, prev, d.Format(time.DateOnly))
					}
				}
				break
			}
			if n.IsZero() || !n.After(prev) || n.Nanosecond() != 0 {
				t.Fatalf("%q in %s: Next(%v) = %v, not strictly after or not a whole second", expr, loc, prev, n)
			}
			if n2, ok2 := again.Next(prev); !ok2 || !n2.Equal(n) {
				t.Fatalf("%q and its String() %q differ after %v: %v vs %v", expr, c.String(), prev, n, n2)
			}
			if ref != nil {
				if !ref.fires(n, loc) {
					t.Fatalf("%q in %s: Next(%v) = %v (%v), which the reference does not fire", expr, loc, prev, n, n.In(loc))
				}
				if n.Sub(prev) <= max {
					for s := prev.Truncate(time.Second).Add(time.Second); s.Before(n); s = s.Add(time.Second) {
						if ref.fires(s, loc) {
							t.Fatalf("%q in %s: Next(%v) = %v skips %v (%v)", expr, loc, prev, n, s, s.In(loc))
						}
					}
				}
			}
			prev = n
		}
	})
}

// firstDate returns the first date from `from` (midnight UTC) through the
// end of year last that matches the reference's date fields.
func (r *refCron) firstDate(from time.Time, last int) (time.Time, bool) {
	for d := from; d.Year() <= last; {
		y, m, _ := d.Date()
		switch {
		case r.fields[6] != nil && !r.plain(6, y, 1970, 2199, nil):
			d = time.Date(y+1, 1, 1, 0, 0, 0, 0, time.UTC)
		case !r.plain(4, int(m), 1, 12, refMonthNames):
			d = time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
		case r.dayMatches(d.Date()):
			return d, true
		default:
			d = d.AddDate(0, 0, 1)
		}
	}
	return time.Time{}, false
}
