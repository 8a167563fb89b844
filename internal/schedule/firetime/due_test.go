package firetime

import (
	"testing"
	"time"
)

// t0 is a whole minute: every-second fire times are t0+1s, t0+2s, …
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestCountFires checks the arithmetic count of fire times against
// enumeration with Next, across daylight-saving transitions.
func TestCountFires(t *testing.T) {
	t.Parallel()
	exprs := []string{"* * * * * *", "*/7 * * * * *", "0 30 2 * * *", "0 0 * * * *", "15 */10 1-3 * * *",
		"0 0 0 L * *", "0 0 12 ? * MON#2", "@every 90s", "0 */15 * * * *", "0 30 1 * * *"}
	zones := []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Sao_Paulo"}
	spans := []struct{ from, to time.Time }{
		{time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 10, 6, 0, 0, 0, time.UTC)},
		{time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 28, 22, 13, 7, 0, time.UTC), time.Date(2026, 3, 30, 1, 0, 0, 0, time.UTC)},
		{time.Date(2026, 4, 4, 10, 0, 0, 0, time.UTC), time.Date(2026, 4, 6, 23, 0, 0, 0, time.UTC)},
	}
	for _, ex := range exprs {
		for _, z := range zones {
			loc, _ := time.LoadLocation(z)
			c, err := ParseCron(ex, loc)
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range spans {
				var want int64
				for x := sp.from; ; {
					n, ok := c.Next(x)
					if !ok || n.After(sp.to) {
						break
					}
					want++
					x = n
				}
				if got := countFires(c, sp.from, sp.to); got != want {
					t.Errorf("countFires(%q in %s, %v, %v) = %d, want %d", ex, z, sp.from, sp.to, got, want)
				}
			}
		}
	}
}

func TestDueTimesLongGap(t *testing.T) {
	t.Parallel()
	c, err := ParseCron("* * * * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	hw := t0
	now := t0.Add(365 * 24 * time.Hour).Add(500 * time.Millisecond)
	latest, earlier := DueTimes(c, hw, now, 200)
	if len(latest) != 200 || !latest[199].Equal(t0.Add(365*24*time.Hour)) {
		t.Fatalf("latest: %d, last %v", len(latest), latest[len(latest)-1])
	}
	if total := earlier + int64(len(latest)); total != 365*24*3600 {
		t.Fatalf("counted %d fire times, want %d", total, 365*24*3600)
	}
	// Short gaps enumerate exactly.
	latest, earlier = DueTimes(c, t0, t0.Add(10*time.Second), 200)
	if len(latest) != 10 || earlier != 0 {
		t.Fatalf("short gap: %d latest, %d earlier", len(latest), earlier)
	}
}
