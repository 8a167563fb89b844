package firetime

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestExpandH(t *testing.T) {
	t.Parallel()
	got, err := ExpandH("H H(0-5) * * *", "nightly-report")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ExpandH("H H(0-5) * * *", "nightly-report")
	if got != again {
		t.Fatalf("not deterministic: %q then %q", got, again)
	}
	c, err := ParseCron(got, nil)
	if err != nil {
		t.Fatalf("ParseCron(%q): %v", got, err)
	}
	n, _ := c.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if n.Hour() > 5 || n.Second() != 0 {
		t.Fatalf("%q fires at %v, want an hour 0-5", got, n)
	}
	// Many names spread over the range.
	minutes := map[string]bool{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		e, err := ExpandH("H/15 * * * *", name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(strings.Fields(e)[0], "-59/15") {
			t.Fatalf("H/15 → %q", e)
		}
		minutes[strings.Fields(e)[0]] = true
	}
	if len(minutes) < 3 {
		t.Fatalf("10 names gave only %d offsets: %v", len(minutes), minutes)
	}
	for _, expr := range []string{"@hourly", "0 0 * * *", "0 0 0 L * *"} {
		if e, err := ExpandH(expr, "x"); err != nil || e != expr {
			t.Fatalf("ExpandH(%q) = %q, %v; want it unchanged", expr, e, err)
		}
	}
	for _, bad := range []string{"H(5-1) * * * *", "xH * * * *", "H(0-99) * * * *", "H/0 * * * *", "H(1-2 * * * *", "Hx * * * *"} {
		var fe *FieldError
		if _, err := ExpandH(bad, "x"); !errors.As(err, &fe) || fe.Field != FieldCronExpr || fe.Part != "minute" {
			t.Errorf("ExpandH(%q): %v, want a minute FieldError", bad, err)
		}
	}
}

func TestJitter(t *testing.T) {
	t.Parallel()
	fire := time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC)
	if j := Jitter("abc", fire, 0); j != 0 {
		t.Fatalf("no jitter: %v", j)
	}
	seen := map[time.Duration]bool{}
	for i := range 50 {
		ft := fire.Add(time.Duration(i) * time.Minute)
		j := Jitter("abc", ft, 30)
		if j < 0 || j >= 30*time.Second || j != Jitter("abc", ft, 30) {
			t.Fatalf("Jitter = %v: out of [0, 30s) or not deterministic", j)
		}
		seen[j] = true
	}
	if len(seen) < 40 {
		t.Fatalf("50 fire times gave %d offsets", len(seen))
	}
	if Jitter("abc", fire, 3600) == Jitter("abd", fire, 3600) {
		t.Fatalf("two schedules got the same offset")
	}
}

// FuzzExpandH: ExpandH never panics, and what it returns either parses or
// fails with a cron_expr FieldError.
func FuzzExpandH(f *testing.F) {
	for _, s := range []string{"H H(0-5) * * *", "H/15 * * * *", "0 H(1-28)/7 H * * * H(2030-2040)", "H(5-1) * * * *", "H * * * * *", "H,H(1-3),5 * * * *"} {
		f.Add(s, "name")
	}
	f.Fuzz(func(t *testing.T, expr, name string) {
		out, err := ExpandH(expr, name)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != FieldCronExpr {
				t.Fatalf("ExpandH(%q): %v", expr, err)
			}
			return
		}
		if _, err := ParseCron(out, nil); err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("ParseCron(%q): %v", out, err)
			}
		}
	})
}

// FuzzPlan: Validate, First, After and NextN never panic; a valid plan's
// occurrences are whole seconds and never go back in the series.
func FuzzPlan(f *testing.F) {
	f.Add("second", 1, 3, int64(1767225580), true, int64(1767225600))
	f.Add("time", 0, 0, int64(1767225580), false, int64(1767225600))
	f.Add("week", 6, -1, int64(1767259800), false, int64(1767225600))
	f.Add("month", -31, 5, int64(0), false, int64(253402300000))
	f.Add("day", 32766, -1, int64(253402300799), true, int64(-1))
	f.Add("none", 0, -2, int64(-5), false, int64(0))
	f.Fuzz(func(t *testing.T, typ string, value, repeat int, planTime int64, noKeep bool, now int64) {
		p := Plan{Type: PlanType(typ), Value: value, Repeat: repeat, Time: planTime, NoKeep: noKeep}
		err := p.Validate()
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate(%+v) = %v: want a FieldError wrapping ErrInvalid", p, err)
			}
		}
		from := time.Unix(now%(253402300799), 0).UTC()
		ts := p.NextN(from, 5, time.UTC)
		if err != nil && len(ts) > 0 {
			t.Fatalf("invalid plan %+v has occurrences %v", p, ts)
		}
		occ, ok := p.First(from, time.UTC)
		for i := 0; ok && i < 5; i++ {
			if occ.At.Nanosecond() != 0 {
				t.Fatalf("occurrence %v not a whole second", occ.At)
			}
			next, nok := p.After(occ, Due(occ, from), time.UTC)
			if nok && next.Seq <= occ.Seq {
				t.Fatalf("%+v: occurrence %d follows %d", p, next.Seq, occ.Seq)
			}
			occ, ok = next, nok
		}
	})
}
