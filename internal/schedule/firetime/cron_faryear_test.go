package firetime

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// footerZone returns a location whose every instant from 1970 on is served
// by the POSIX TZ rule (one transition, at the epoch, to the standard time
// std, UTC+stdOff seconds). The slim TZif files that time/tzdata embeds are
// like this after a zone's last explicit transition (in the 1990s for most
// of Europe and North America), so tests that use it do not depend on the
// host's tz files.
func footerZone(tb testing.TB, name, std string, stdOff int32, rule string) *time.Location {
	tb.Helper()
	var b bytes.Buffer
	put := func(v any) {
		if err := binary.Write(&b, binary.BigEndian, v); err != nil {
			tb.Fatal(err)
		}
	}
	block := func(wide bool) {
		// Header: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt.
		b.WriteString("TZif2")
		b.Write(make([]byte, 15))
		put([6]uint32{0, 0, 0, 1, 1, uint32(len(std) + 1)})
		if wide {
			put(int64(0))
		} else {
			put(int32(0))
		}
		put(uint8(0))               // the transition goes to type 0
		put(stdOff)                 // type 0: utoff,
		put([2]uint8{0, 0})         // isdst, desigidx
		b.WriteString(std + "\x00") // designations
	}
	block(false)
	block(true)
	b.WriteString("\n" + rule + "\n")
	loc, err := time.LoadLocationFromTZData(name, b.Bytes())
	if err != nil {
		tb.Fatalf("footerZone(%q): %v", rule, err)
	}
	return loc
}

// parisRule is Europe/Paris's TZ rule since 1996.
const parisRule = "CET-1CEST,M3.5.0,M10.5.0/3"

// farZone loads an IANA zone, or, for "footer:Paris", the same rules as a
// footer-only zone.
func farZone(t *testing.T, name string) *time.Location {
	t.Helper()
	if name == "footer:Paris" {
		return footerZone(t, name, "CET", 3600, parisRule)
	}
	return mustLoad(t, name)
}

// TestCronNextFarYears checks fire times in years served by the zones' TZ
// rules — past 2037 with fat tz files, much earlier with slim ones — and in
// particular in the last UTC day of a leap year, where ZoneBounds reports an
// end before the instant (golang/go#81583) and Next used to find nothing.
// Wants are wall times in the case's zone, converted with time.Date (through
// ParseInLocation); "w +d" is the unambiguous wall time w plus d, to name
// the first of two instants that read the same.
func TestCronNextFarYears(t *testing.T) {
	t.Parallel()
	const from = "2026-04-01T00:00:00Z"
	tests := []struct {
		name, zone, expr, from string // from is RFC 3339
		want                   []string
	}{
		// The report: 2040 worked, 2042 did not.
		{"Paris 2042 daily", "Europe/Paris", "0 0 2 * * * 2042", from,
			[]string{"2042-01-01 02:00:00", "2042-01-02 02:00:00"}},
		{"Paris 2040 daily", "Europe/Paris", "0 0 2 * * * 2040", from,
			[]string{"2040-01-01 02:00:00", "2040-01-02 02:00:00"}},
		{"Paris yearly across leap 2040", "Europe/Paris", "@yearly", "2040-12-31T12:00:00Z",
			[]string{"2041-01-01 00:00:00", "2042-01-01 00:00:00"}},
		{"Paris noon on the last day of 2040", "Europe/Paris", "0 0 12 31 12 * 2040", from,
			[]string{"2040-12-31 12:00:00"}},
		{"Paris Bastille Day 2070", "Europe/Paris", "0 30 9 14 7 * 2070", from,
			[]string{"2070-07-14 09:30:00"}},
		{"Paris leap day 2096", "Europe/Paris", "0 0 0 29 2 * 2096", from,
			[]string{"2096-02-29 00:00:00"}},
		{"Paris L in 2099", "Europe/Paris", "0 0 18 L * * 2099", from,
			[]string{"2099-01-31 18:00:00", "2099-02-28 18:00:00", "2099-03-31 18:00:00"}},
		// 2099-03-29: 02:00 CET becomes 03:00 CEST.
		{"Paris gap on SUNL 2099", "Europe/Paris", "0 30 2 ? 3 SUNL 2099", from,
			[]string{"2099-03-29 03:00:00"}},
		// 2070-10-26: 03:00 CEST becomes 02:00 CET.
		{"Paris overlap on SUNL 2070", "Europe/Paris", "0 30 2 ? 10 SUNL 2070", from,
			[]string{"2070-10-26 01:30:00 +1h"}},
		{"Paris last second of 2199", "Europe/Paris", "59 59 23 31 12 * 2199", "1970-01-01T00:00:00Z",
			[]string{"2199-12-31 23:59:59"}},
		{"Paris footer-only 2042", "footer:Paris", "0 0 2 * * * 2042", from,
			[]string{"2042-01-01 02:00:00"}},
		{"Paris footer-only every second on 2028-12-31", "footer:Paris", "* * * * * *", "2028-12-31T12:00:00Z",
			[]string{"2028-12-31 13:00:01", "2028-12-31 13:00:02"}},
		{"Paris footer-only yearly across leap 2028", "footer:Paris", "@yearly", "2028-12-31T12:00:00Z",
			[]string{"2029-01-01 00:00:00", "2030-01-01 00:00:00"}},
		{"NY 2042 daily", "America/New_York", "0 0 2 * * * 2042", from,
			[]string{"2042-01-01 02:00:00"}},
		// 2070-03-09: 02:00 EST becomes 03:00 EDT.
		{"NY gap on SUN#2 2070", "America/New_York", "0 30 2 ? 3 SUN#2 2070", from,
			[]string{"2070-03-09 03:00:00"}},
		// 2070-11-02: 02:00 EDT becomes 01:00 EST.
		{"NY overlap on SUN#1 2070", "America/New_York", "0 30 1 ? 11 SUN#1 2070", from,
			[]string{"2070-11-02 00:30:00 +1h"}},
		// 2099-11-01: hourly keeps its absolute interval through the repeat.
		{"NY hourly on SUN#1 2099", "America/New_York", "0 0 * ? 11 SUN#1 2099", from,
			[]string{"2099-11-01 00:00:00", "2099-11-01 00:00:00 +1h", "2099-11-01 00:00:00 +2h", "2099-11-01 00:00:00 +3h"}},
		{"NY noon on the last day of 2196", "America/New_York", "0 0 12 L 12 ? 2196", from,
			[]string{"2196-12-31 12:00:00"}},
		{"Sao Paulo 2099 new year", "America/Sao_Paulo", "0 0 0 1 1 * 2099", from,
			[]string{"2099-01-01 00:00:00"}},
		{"Sao Paulo FRI#5 in 2064", "America/Sao_Paulo", "0 0 12 ? 2 FRI#5 2060-2070", from,
			[]string{"2064-02-29 12:00:00"}},
		{"Sao Paulo L of 2040", "America/Sao_Paulo", "0 0 0 L 12 ? 2040", from,
			[]string{"2040-12-31 00:00:00"}},
		{"Lord Howe 2042 daily", "Australia/Lord_Howe", "0 0 2 * * * 2042", from,
			[]string{"2042-01-01 02:00:00"}},
		{"Lord Howe new year 2041 from the last UTC day of 2040", "Australia/Lord_Howe", "0 0 0 1 1 * 2041", "2040-12-31T06:00:00Z",
			[]string{"2041-01-01 00:00:00"}},
		{"Lord Howe noon on the last day of 2040", "Australia/Lord_Howe", "0 0 12 31 12 * 2040", from,
			[]string{"2040-12-31 12:00:00"}},
		// 2070-10-05: 02:00 +10:30 becomes 02:30 +11.
		{"Lord Howe 30 minute gap on SUN#1 2070", "Australia/Lord_Howe", "0 15 2 ? 10 SUN#1 2070", from,
			[]string{"2070-10-05 02:30:00"}},
		// 2099-04-05: 02:00 +11 becomes 01:30 +10:30.
		{"Lord Howe 30 minute overlap on SUN#1 2099", "Australia/Lord_Howe", "0 45 1 ? 4 SUN#1 2099", from,
			[]string{"2099-04-05 01:15:00 +30m"}},
		{"Lord Howe hourly on SUN#1 2099", "Australia/Lord_Howe", "0 0 * ? 4 SUN#1 2099", from,
			[]string{"2099-04-05 00:00:00", "2099-04-05 01:00:00", "2099-04-05 02:00:00", "2099-04-05 03:00:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loc := farZone(t, tt.zone)
			c := mustParse(t, tt.expr, loc)
			var want []time.Time
			for _, w := range tt.want {
				wall, plus, _ := strings.Cut(w, " +")
				v := at(t, loc, wall)
				if plus != "" {
					d, err := time.ParseDuration(plus)
					if err != nil {
						t.Fatal(err)
					}
					v = v.Add(d)
				}
				want = append(want, v.UTC())
			}
			got := c.NextN(utc(t, tt.from), len(want))
			if !equalTimes(got, want) {
				t.Errorf("%q in %s from %s:\n got:%s\nwant:%s", tt.expr, tt.zone, tt.from, formatTimes(got, loc), formatTimes(want, loc))
			}
			if w, ok := c.nextFire(utc(t, tt.from), false); !ok || !w.Equal(want[0]) {
				t.Errorf("%q in %s from %s, walking every period: %v, %v", tt.expr, tt.zone, tt.from, w, ok)
			}
		})
	}
}

// goZoneinfo returns the zone files of $GOROOT/lib/time/zoneinfo.zip, the
// slim database that time/tzdata embeds, by name.
func goZoneinfo(t *testing.T) map[string][]byte {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output() // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	zones := make(map[string][]byte, len(zr.File))
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		zones[f.Name] = data
	}
	return zones
}

// TestCronNextFarYearsAllZones checks, in every zone of the IANA database
// as time/tzdata embeds it and as the host has it, that Next finds fire
// times up to MaxCronYear, and every second of the last UTC day of leap
// years that the zones' TZ rules serve.
func TestCronNextFarYearsAllZones(t *testing.T) {
	t.Parallel()
	zones := goZoneinfo(t)
	if len(zones) < 300 {
		t.Fatalf("only %d zones in zoneinfo.zip", len(zones))
	}
	type farCheck struct {
		expr, from  string
		y, m, d, hh int // the want, a wall time in the zone at hh:00:00 or, hh < 0, 23:59:59
	}
	checks := []farCheck{
		{"59 59 23 31 12 * 2199", "1970-01-01T00:00:00Z", 2199, 12, 31, -1},
		{"0 0 12 L 12 ? 2196", "2026-04-01T00:00:00Z", 2196, 12, 31, 12},
		{"0 0 12 ? 2 FRI#5 2092", "2026-04-01T00:00:00Z", 2092, 2, 29, 12},
	}
	for name, data := range zones {
		for _, embedded := range []bool{true, false} {
			var loc *time.Location
			if embedded {
				l, err := time.LoadLocationFromTZData(name, data)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				loc = l
			} else {
				l, err := time.LoadLocation(name)
				if err != nil {
					continue // the host lacks the zone; the embedded copy was checked
				}
				loc = l
			}
			for _, ck := range checks {
				c := mustParse(t, ck.expr, loc)
				want := time.Date(ck.y, time.Month(ck.m), ck.d, ck.hh, 0, 0, 0, loc)
				if ck.hh < 0 {
					want = time.Date(ck.y, time.Month(ck.m), ck.d, 23, 59, 59, 0, loc)
				}
				if got, ok := c.Next(utc(t, ck.from)); !ok || !got.Equal(want) {
					t.Errorf("%s (embedded %v): %q from %s = %v, %v; want %v", name, embedded, ck.expr, ck.from, got.In(loc), ok, want)
				}
			}
			e := mustParse(t, "* * * * * *", loc)
			for _, y := range []int{2028, 2040, 2096} {
				for _, h := range []int{0, 13, 23} {
					after := time.Date(y, 12, 31, h, 30, 0, 0, time.UTC)
					if got, ok := e.Next(after); !ok || !got.Equal(after.Add(time.Second)) {
						t.Errorf("%s (embedded %v): every second after %v = %v, %v", name, embedded, after, got, ok)
					}
				}
			}
		}
	}
}

// TestCronNextSkipMatchesWalk compares Next, which jumps over offset periods
// that cannot hold the next fire, with a walk through every period, for
// sparse expressions at random instants in zones with daylight saving.
func TestCronNextSkipMatchesWalk(t *testing.T) {
	t.Parallel()
	exprs := []string{
		"0 0 0 ? 2 FRI#5", "0 0 0 29 2 1", "0 30 2 ? 3 SUN#2", "0 30 1 ? 11 SUN#1", "0 0 * ? 4 SUN#1",
		"*/20 */7 0-3 L * *", "0 0 2 * * * 2042", "0 15 2 ? 10 SUN#1 2070,2099", "59 59 23 31 12 * 2199",
		"0 */30 1,2 ? 3,4,10,11 0#1,0L", "0 0 12 LW 12 ? 2040-2044/4", "30 45 0,2 ? * SUNL", "0 0 0 1 1 *",
		"0 0 12 31 12 ? 2028,2040,2096,2196", "*/15 * * 31 12 ? 2040,2196",
	}
	zones := []string{"Europe/Paris", "America/New_York", "America/Sao_Paulo", "Australia/Lord_Howe",
		"Pacific/Apia", "America/Santiago", "Asia/Tehran", "footer:Paris"}
	for n, expr := range exprs {
		t.Run(expr, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(7, uint64(n)))
			for i := range 3 * len(zones) {
				zone := zones[i%len(zones)]
				c := mustParse(t, expr, farZone(t, zone))
				after := time.Unix(-2208988800+rng.Int64N(300*31556952), 0) // 1900..2200
				if i%4 == 0 {                                               // the last UTC day of a leap year
					after = time.Date(2028+4*rng.IntN(43), 12, 31, rng.IntN(24), 0, 0, 0, time.UTC)
				}
				got, gok := c.Next(after)
				want, wok := c.nextFire(after, false)
				if gok != wok || !got.Equal(want) {
					t.Errorf("%q in %s after %v: Next = %v, %v; walking every period = %v, %v", expr, zone, after, got, gok, want, wok)
				}
			}
		})
	}
}

// BenchmarkCronNextFarYear times Next for fires in far years (the walk used
// to go period by period and stop, wrongly, at the last day of 2040).
func BenchmarkCronNextFarYear(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		b.Fatal(err)
	}
	for _, expr := range []string{"0 0 2 * * * 2040", "0 0 2 * * * 2042", "0 0 2 * * * 2099", "59 59 23 31 12 * 2199"} {
		c, err := ParseCron(expr, loc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			after := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				c.Next(after)
			}
		})
	}
}
