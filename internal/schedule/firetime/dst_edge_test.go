package firetime

import (
	"testing"
	"time"
)

// TestDSTEdgeCases pins the documented daylight-saving edge cases (see the
// package doc, "Edge cases"): a 30-minute shift (Australia/Lord_Howe), */2
// in the hour field across both changes, and adjacent listed hours on a
// fall-back day.
func TestDSTEdgeCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, zone, expr string
		from             time.Time
		want             []string // wall readings with their zone, in order
	}{
		{"Lord_Howe spring forward 30 min: a gap time fires at the end of the gap", "Australia/Lord_Howe", "0 15 2 * * *",
			time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC),
			[]string{"2026-10-04 02:30 +11", "2026-10-05 02:15 +11"}},
		{"Lord_Howe fall back 30 min: a half-hourly expression keeps its interval", "Australia/Lord_Howe", "0 0,30 * * * *",
			time.Date(2026, 4, 4, 13, 0, 0, 0, time.UTC),
			[]string{"2026-04-05 00:30 +11", "2026-04-05 01:00 +11", "2026-04-05 01:30 +11", "2026-04-05 01:30 +1030", "2026-04-05 02:00 +1030"}},
		{"Lord_Howe fall back 30 min: a fixed time in the repeated half hour fires once", "Australia/Lord_Howe", "0 45 1 * * *",
			time.Date(2026, 4, 4, 12, 0, 0, 0, time.UTC),
			[]string{"2026-04-05 01:45 +11", "2026-04-06 01:45 +1030"}},
		{"*/2 hours, spring forward: 02:00 does not exist and fires at 03:00", "America/New_York", "0 0 */2 * * *",
			time.Date(2026, 3, 8, 4, 0, 0, 0, time.UTC),
			[]string{"2026-03-08 00:00 EST", "2026-03-08 03:00 EDT", "2026-03-08 04:00 EDT", "2026-03-08 06:00 EDT"}},
		{"*/2 hours, fall back: even wall hours, three hours apart across the change", "America/New_York", "0 0 */2 * * *",
			time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC),
			[]string{"2026-11-01 00:00 EDT", "2026-11-01 02:00 EST", "2026-11-01 04:00 EST"}},
		{"adjacent hours 1,2 on fall back: 01:00 twice (the second reads 02:00 on the old clock), then 02:00", "America/New_York", "0 0 1,2 * * *",
			time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC),
			[]string{"2026-11-01 01:00 EDT", "2026-11-01 01:00 EST", "2026-11-01 02:00 EST", "2026-11-02 01:00 EST"}},
		{"adjacent hours 0,1 on fall back: 01:30 once (02:30 is not listed)", "America/New_York", "0 30 0,1 * * *",
			time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC),
			[]string{"2026-11-01 00:30 EDT", "2026-11-01 01:30 EDT", "2026-11-02 00:30 EST"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			loc, err := time.LoadLocation(tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseCron(tc.expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			got := c.NextN(tc.from, len(tc.want))
			for i, w := range tc.want {
				if g := got[i].In(loc).Format("2006-01-02 15:04 MST"); g != w {
					t.Fatalf("fire %d: %s, want %s (all: %v)", i, g, w, got)
				}
			}
		})
	}
}
