package firetime

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPlanJSON(t *testing.T) {
	t.Parallel()
	in := `{"plan_type":"week","plan_value":1,"plan_repet":-1,"plan_time":1700000000,"no_keep":true}`
	var p Plan
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	want := Plan{Type: PlanWeek, Value: 1, Repeat: -1, Time: 1700000000, NoKeep: true}
	if p != want {
		t.Errorf("decoded %+v, want %+v", p, want)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("encoded %s, want %s", out, in)
	}
}

func TestPlanValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		plan  Plan
		field string // "" = valid
		msg   string // exact message when set
	}{
		{"zero plan", Plan{}, FieldPlanType, "plan.plan_type: must be one of none, time, second, minute, hour, day, week, month"},
		{"unknown type", Plan{Type: "yearly", Repeat: 1}, FieldPlanType, ""},
		{"none ignores value and repeat", Plan{Type: PlanNone, Value: 99, Repeat: 5}, "", ""},
		{"none with bad repeat", Plan{Type: PlanNone, Repeat: -2}, FieldPlanRepet, ""},
		{"time needs plan_time", Plan{Type: PlanTime}, FieldPlanTime, "plan.plan_time: is required for plan_type time"},
		{"time ignores repeat", Plan{Type: PlanTime, Time: 1700000000, Repeat: 3}, "", ""},
		{"negative plan_time", Plan{Type: PlanTime, Time: -1}, FieldPlanTime, ""},
		{"plan_time after 9999", Plan{Type: PlanTime, Time: 253402300800}, FieldPlanTime, ""},
		{"plan_time 9999-12-31", Plan{Type: PlanTime, Time: 253402300799}, "", ""},
		{"second ok", Plan{Type: PlanSecond, Value: 1, Repeat: -1}, "", ""},
		{"second value 0", Plan{Type: PlanSecond, Value: 0, Repeat: -1}, FieldPlanValue, "plan.plan_value: interval must be 1-32766"},
		{"minute value 32766", Plan{Type: PlanMinute, Value: 32766, Repeat: 1}, "", ""},
		{"hour value 32767", Plan{Type: PlanHour, Value: 32767, Repeat: 1}, FieldPlanValue, ""},
		{"day negative value", Plan{Type: PlanDay, Value: -1, Repeat: 1}, FieldPlanValue, ""},
		{"interval repeat 0", Plan{Type: PlanDay, Value: 1, Repeat: 0}, FieldPlanRepet, "plan.plan_repet: must not be 0 for a repeating plan type (-1 forever, N > 0 times)"},
		{"repeat -2", Plan{Type: PlanDay, Value: 1, Repeat: -2}, FieldPlanRepet, ""},
		{"week 0", Plan{Type: PlanWeek, Value: 0, Repeat: 1}, "", ""},
		{"week 6", Plan{Type: PlanWeek, Value: 6, Repeat: -1}, "", ""},
		{"week 7", Plan{Type: PlanWeek, Value: 7, Repeat: 1}, FieldPlanValue, "plan.plan_value: week day must be 0-6 (Sunday 0)"},
		{"week -1", Plan{Type: PlanWeek, Value: -1, Repeat: 1}, FieldPlanValue, ""},
		{"week repeat 0", Plan{Type: PlanWeek, Value: 1}, FieldPlanRepet, ""},
		{"month 31", Plan{Type: PlanMonth, Value: 31, Repeat: 1}, "", ""},
		{"month -31", Plan{Type: PlanMonth, Value: -31, Repeat: 1}, "", ""},
		{"month 0", Plan{Type: PlanMonth, Value: 0, Repeat: 1}, "", ""},
		{"month 32", Plan{Type: PlanMonth, Value: 32, Repeat: 1}, FieldPlanValue, ""},
		{"month -32", Plan{Type: PlanMonth, Value: -32, Repeat: 1}, FieldPlanValue, ""},
		{"month repeat 0", Plan{Type: PlanMonth, Value: 1}, FieldPlanRepet, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.plan.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tt.plan, err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate(%+v) = %v, want a FieldError wrapping ErrInvalid", tt.plan, err)
			}
			if fe.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", fe.Field, tt.field, err)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("message %q, want %q", err, tt.msg)
			}
		})
	}
}

// now is Tuesday 2025-06-10 12:00:00 UTC in the plan tests.
const nowText = "2025-06-10T12:00:00Z"

func TestPlanFirst(t *testing.T) {
	t.Parallel()
	now := utc(t, nowText)
	sec := now.Unix()
	tests := []struct {
		name    string
		plan    Plan
		zone    string
		now     time.Time // zero: now
		want    string    // RFC 3339; "" = never runs
		wantSeq int64
	}{
		// none: immediately.
		{"none", Plan{Type: PlanNone}, "UTC", time.Time{}, nowText, 1},
		{"none truncates to the second", Plan{Type: PlanNone}, "UTC", now.Add(700 * time.Millisecond), nowText, 1},
		// time: a past instant runs only with no_keep.
		{"time future", Plan{Type: PlanTime, Time: sec + 3600}, "UTC", time.Time{}, "2025-06-10T13:00:00Z", 1},
		{"time now is not past", Plan{Type: PlanTime, Time: sec}, "UTC", time.Time{}, nowText, 1},
		{"time past skipped", Plan{Type: PlanTime, Time: sec - 1}, "UTC", time.Time{}, "", 0},
		{"time past with no_keep runs", Plan{Type: PlanTime, Time: sec - 3600, NoKeep: true}, "UTC", time.Time{}, "2025-06-10T11:00:00Z", 1},
		// intervals.
		{"second from receipt", Plan{Type: PlanSecond, Value: 30, Repeat: -1}, "UTC", time.Time{}, "2025-06-10T12:00:30Z", 1},
		{"hour from future plan_time", Plan{Type: PlanHour, Value: 1, Repeat: 1, Time: sec + 86400}, "UTC", time.Time{}, "2025-06-11T13:00:00Z", 1},
		{"minute skips past occurrences", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: sec - 12*60}, "UTC", time.Time{}, "2025-06-10T12:03:00Z", 3},
		{"minute last occurrence still ahead", Plan{Type: PlanMinute, Value: 5, Repeat: 3, Time: sec - 12*60}, "UTC", time.Time{}, "2025-06-10T12:03:00Z", 3},
		{"minute whole series past", Plan{Type: PlanMinute, Value: 5, Repeat: 2, Time: sec - 12*60}, "UTC", time.Time{}, "", 0},
		{"occurrence exactly now runs", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: sec - 10*60}, "UTC", time.Time{}, nowText, 2},
		{"sub-second now rounds up", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: sec - 10*60}, "UTC", now.Add(time.Millisecond), "2025-06-10T12:05:00Z", 3},
		{"no_keep runs a past first occurrence", Plan{Type: PlanMinute, Value: 5, Repeat: 2, Time: sec - 12*60, NoKeep: true}, "UTC", time.Time{}, "2025-06-10T11:53:00Z", 1},
		{"day skips one", Plan{Type: PlanDay, Value: 1, Repeat: -1, Time: sec - 36*3600}, "UTC", time.Time{}, "2025-06-11T00:00:00Z", 2},
		{"day is 24h across DST", Plan{Type: PlanDay, Value: 1, Repeat: -1, Time: utc(t, "2025-03-08T14:00:00Z").Unix()}, "America/New_York",
			utc(t, "2025-03-08T15:00:00Z"), "2025-03-09T14:00:00Z", 1}, // 09:00 EST, then 10:00 EDT
		// week: plan_time gives the time of day in the zone.
		{"week later today", Plan{Type: PlanWeek, Value: 2, Repeat: -1, Time: utc(t, "2001-01-01T15:00:00Z").Unix()}, "UTC", time.Time{}, "2025-06-10T15:00:00Z", 1},
		{"week earlier today is next week", Plan{Type: PlanWeek, Value: 2, Repeat: -1, Time: utc(t, "2001-01-01T09:00:00Z").Unix()}, "UTC", time.Time{}, "2025-06-17T09:00:00Z", 1},
		{"week this very second", Plan{Type: PlanWeek, Value: 2, Repeat: -1, Time: utc(t, "2001-01-01T12:00:00Z").Unix()}, "UTC", time.Time{}, nowText, 1},
		{"week sunday", Plan{Type: PlanWeek, Value: 0, Repeat: 1, Time: utc(t, "2001-01-01T08:30:00Z").Unix()}, "UTC", time.Time{}, "2025-06-15T08:30:00Z", 1},
		{"week saturday", Plan{Type: PlanWeek, Value: 6, Repeat: 1}, "UTC", time.Time{}, "2025-06-14T00:00:00Z", 1},
		{"week time of day in zone", Plan{Type: PlanWeek, Value: 3, Repeat: 1, Time: utc(t, "2001-01-01T01:00:00Z").Unix()}, "Asia/Shanghai", // 09:00 CST
			time.Time{}, "2025-06-11T01:00:00Z", 1},
		{"week plan_time 0 is local midnight", Plan{Type: PlanWeek, Value: 3, Repeat: 1}, "Asia/Shanghai", time.Time{}, "2025-06-10T16:00:00Z", 1},
		{"week day skipped by the zone", Plan{Type: PlanWeek, Value: 5, Repeat: 1, Time: utc(t, "2011-12-01T22:00:00Z").Unix()}, // 12:00 in Apia
			"Pacific/Apia", utc(t, "2011-12-30T10:00:00Z"), "2011-12-30T10:00:00Z", 1}, // Friday 2011-12-30 never happened there
		// month.
		{"month later this month", Plan{Type: PlanMonth, Value: 20, Repeat: 1, Time: utc(t, "2001-01-01T06:00:00Z").Unix()}, "UTC", time.Time{}, "2025-06-20T06:00:00Z", 1},
		{"month today but earlier", Plan{Type: PlanMonth, Value: 10, Repeat: 1, Time: utc(t, "2001-01-01T06:00:00Z").Unix()}, "UTC", time.Time{}, "2025-07-10T06:00:00Z", 1},
		{"month 31 clamps to 30", Plan{Type: PlanMonth, Value: 31, Repeat: 1}, "UTC", time.Time{}, "2025-06-30T00:00:00Z", 1},
		{"month 0 is last day", Plan{Type: PlanMonth, Value: 0, Repeat: 1}, "UTC", time.Time{}, "2025-06-30T00:00:00Z", 1},
		{"month -1", Plan{Type: PlanMonth, Value: -1, Repeat: 1}, "UTC", time.Time{}, "2025-06-29T00:00:00Z", 1},
		{"month -31 clamps to 1st", Plan{Type: PlanMonth, Value: -31, Repeat: 1}, "UTC", time.Time{}, "2025-07-01T00:00:00Z", 1},
		{"month in a gap", Plan{Type: PlanMonth, Value: 4, Repeat: 1}, "America/Sao_Paulo", utc(t, "2018-10-20T00:00:00Z"), "2018-11-04T03:00:00Z", 1},
		// invalid plans never run.
		{"invalid", Plan{Type: PlanWeek, Value: 9, Repeat: 1}, "UTC", time.Time{}, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := tt.now
			if n.IsZero() {
				n = now
			}
			got, ok := tt.plan.First(n, mustLoad(t, tt.zone))
			if tt.want == "" {
				if ok {
					t.Fatalf("First = %+v, want none", got)
				}
				return
			}
			if !ok || !got.At.Equal(utc(t, tt.want)) || got.Seq != tt.wantSeq || got.At.Location() != time.UTC {
				t.Errorf("First = %v %d %v, want %s seq %d", got.At, got.Seq, ok, tt.want, tt.wantSeq)
			}
		})
	}
}

func TestPlanAfter(t *testing.T) {
	t.Parallel()
	now := utc(t, nowText)
	pt := now.Unix() - 15*60 // series start for the interval cases
	occ := func(s string, seq int64) Occurrence { return Occurrence{At: utc(t, s), Seq: seq} }
	tests := []struct {
		name     string
		plan     Plan
		prev     Occurrence
		finished time.Time
		want     string // "" = finished
		wantSeq  int64
	}{
		{"none runs once", Plan{Type: PlanNone}, occ(nowText, 1), now, "", 0},
		{"time runs once", Plan{Type: PlanTime, Time: now.Unix()}, occ(nowText, 1), now, "", 0},
		// intervals without no_keep: the fixed series, skipping what is past.
		{"next in series", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: pt}, occ(nowText, 3), now.Add(time.Minute), "2025-06-10T12:05:00Z", 4},
		{"long run skips", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: pt}, occ(nowText, 3), now.Add(12 * time.Minute), "2025-06-10T12:15:00Z", 6},
		{"finished on an occurrence", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: pt}, occ(nowText, 3), now.Add(10 * time.Minute), "2025-06-10T12:10:00Z", 5},
		{"skips reach plan_repet", Plan{Type: PlanMinute, Value: 5, Repeat: 5, Time: pt}, occ(nowText, 3), now.Add(12 * time.Minute), "", 0},
		{"last allowed occurrence", Plan{Type: PlanMinute, Value: 5, Repeat: 6, Time: pt}, occ(nowText, 3), now.Add(12 * time.Minute), "2025-06-10T12:15:00Z", 6},
		{"series done", Plan{Type: PlanMinute, Value: 5, Repeat: 3, Time: pt}, occ(nowText, 3), now, "", 0},
		{"from receipt series", Plan{Type: PlanSecond, Value: 30, Repeat: -1}, occ(nowText, 1), now.Add(time.Second), "2025-06-10T12:00:30Z", 2},
		// intervals with no_keep: one interval after the end of the execution.
		{"no_keep from finish", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: pt, NoKeep: true}, occ(nowText, 1),
			now.Add(7*time.Minute + 30*time.Second + 500*time.Millisecond), "2025-06-10T12:12:31Z", 2},
		{"no_keep clock skew", Plan{Type: PlanMinute, Value: 5, Repeat: -1, Time: pt, NoKeep: true}, occ(nowText, 1), now.Add(-time.Minute), "2025-06-10T12:05:00Z", 2},
		{"no_keep done", Plan{Type: PlanMinute, Value: 5, Repeat: 2, NoKeep: true}, occ(nowText, 2), now, "", 0},
		// week and month: the next future occurrence; missed ones are not made up.
		{"week next", Plan{Type: PlanWeek, Value: 2, Repeat: -1, Time: now.Unix()}, occ(nowText, 1), now, "2025-06-17T12:00:00Z", 2},
		{"week finished same second", Plan{Type: PlanWeek, Value: 2, Repeat: -1, Time: now.Unix()}, occ(nowText, 1), now.Add(-time.Second), "2025-06-17T12:00:00Z", 2},
		{"week missed", Plan{Type: PlanWeek, Value: 2, Repeat: -1, Time: now.Unix()}, occ(nowText, 1), now.Add(9 * 24 * time.Hour), "2025-06-24T12:00:00Z", 2},
		{"week done", Plan{Type: PlanWeek, Value: 2, Repeat: 4, Time: now.Unix()}, occ(nowText, 4), now, "", 0},
		{"month next", Plan{Type: PlanMonth, Value: 31, Repeat: 3}, occ("2025-01-31T00:00:00Z", 1), utc(t, "2025-01-31T00:10:00Z"), "2025-02-28T00:00:00Z", 2},
		{"month done", Plan{Type: PlanMonth, Value: 31, Repeat: 3}, occ("2025-03-31T00:00:00Z", 3), utc(t, "2025-03-31T00:10:00Z"), "", 0},
		{"invalid", Plan{Type: PlanMonth, Value: 40, Repeat: 3}, occ("2025-03-31T00:00:00Z", 1), now, "", 0},
		{"zero prev", Plan{Type: PlanMonth, Value: 1, Repeat: 3}, Occurrence{}, now, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := tt.plan.After(tt.prev, tt.finished, time.UTC)
			if tt.want == "" {
				if ok {
					t.Fatalf("After = %+v, want finished", got)
				}
				return
			}
			if !ok || !got.At.Equal(utc(t, tt.want)) || got.Seq != tt.wantSeq {
				t.Errorf("After = %v %d %v, want %s seq %d", got.At, got.Seq, ok, tt.want, tt.wantSeq)
			}
		})
	}
}

// TestPlanNoKeepCases walks the documented no_keep cases through a
// simulated engine: executions take `run` long, the plan is recomputed when
// each one ends, and real_repet counts executions.
func TestPlanNoKeepCases(t *testing.T) {
	t.Parallel()
	start := utc(t, nowText)
	tests := []struct {
		name string
		plan Plan
		run  time.Duration
		want []string // start times of the executions
	}{
		{"interval, no_keep unset, short runs: the series",
			Plan{Type: PlanMinute, Value: 10, Repeat: 3, Time: start.Unix()}, time.Minute,
			[]string{"2025-06-10T12:10:00Z", "2025-06-10T12:20:00Z", "2025-06-10T12:30:00Z"}},
		{"interval, no_keep unset, long runs skip and use up the series",
			Plan{Type: PlanMinute, Value: 10, Repeat: 4, Time: start.Unix()}, 15 * time.Minute,
			[]string{"2025-06-10T12:10:00Z", "2025-06-10T12:30:00Z"}}, // 12:20 and 12:40 were past when computed
		{"interval, no_keep set, long runs: each one an interval after the last ended",
			Plan{Type: PlanMinute, Value: 10, Repeat: 3, Time: start.Unix(), NoKeep: true}, 15 * time.Minute,
			[]string{"2025-06-10T12:10:00Z", "2025-06-10T12:35:00Z", "2025-06-10T13:00:00Z"}},
		{"interval, no_keep unset, series already over: never runs",
			Plan{Type: PlanMinute, Value: 1, Repeat: 5, Time: start.Unix() - 3600}, time.Second, nil},
		{"interval, no_keep set, start in the past: runs at once, then from each end",
			Plan{Type: PlanMinute, Value: 1, Repeat: 2, Time: start.Unix() - 3600, NoKeep: true}, time.Second,
			[]string{"2025-06-10T12:00:00Z", "2025-06-10T12:01:01Z"}}, // first due 11:01, executed at receipt
		{"time past, no_keep unset: skipped", Plan{Type: PlanTime, Time: start.Unix() - 60}, time.Second, nil},
		{"time past, no_keep set: runs at once", Plan{Type: PlanTime, Time: start.Unix() - 60, NoKeep: true}, time.Second,
			[]string{"2025-06-10T12:00:00Z"}},
		{"week ignores no_keep and long runs", Plan{Type: PlanWeek, Value: 2, Repeat: 2, Time: start.Unix(), NoKeep: true}, 8 * 24 * time.Hour,
			[]string{"2025-06-10T12:00:00Z", "2025-06-24T12:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []time.Time
			realRepet := 0
			occ, ok := tt.plan.First(start, time.UTC)
			for ok && realRepet < 10 {
				began := occ.At
				if began.Before(start) {
					began = start // due in the past: the engine runs it at once
				}
				if len(got) > 0 && began.Before(got[len(got)-1].Add(tt.run)) {
					t.Fatalf("occurrence %v before the previous run ended", occ.At)
				}
				got = append(got, began)
				realRepet++
				occ, ok = tt.plan.After(occ, began.Add(tt.run), time.UTC)
			}
			var want []time.Time
			for _, w := range tt.want {
				want = append(want, utc(t, w))
			}
			if !equalTimes(got, want) {
				t.Errorf("runs:%s\nwant:%s", formatTimes(got, time.UTC), formatTimes(want, time.UTC))
			}
			if tt.plan.Repeat > 0 && realRepet > tt.plan.Repeat {
				t.Errorf("real_repet %d exceeds plan_repet %d", realRepet, tt.plan.Repeat)
			}
		})
	}
}

func TestPlanNextN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		plan Plan
		zone string
		from string // wall time in zone
		n    int
		want []string // wall times in zone, or RFC 3339 when ending in Z
	}{
		{"month 31 clamps, leap year", Plan{Type: PlanMonth, Value: 31, Repeat: -1}, "UTC", "2024-01-15 00:00:00", 4,
			[]string{"2024-01-31 00:00:00", "2024-02-29 00:00:00", "2024-03-31 00:00:00", "2024-04-30 00:00:00"}},
		{"month 31, common year", Plan{Type: PlanMonth, Value: 31, Repeat: -1}, "UTC", "2025-01-31 00:00:01", 2,
			[]string{"2025-02-28 00:00:00", "2025-03-31 00:00:00"}},
		{"month 0", Plan{Type: PlanMonth, Value: 0, Repeat: -1}, "UTC", "2100-01-31 00:00:00", 2, // 2100 is not a leap year
			[]string{"2100-01-31 00:00:00", "2100-02-28 00:00:00"}},
		{"month -1", Plan{Type: PlanMonth, Value: -1, Repeat: -1}, "UTC", "2024-01-15 00:00:00", 4,
			[]string{"2024-01-30 00:00:00", "2024-02-28 00:00:00", "2024-03-30 00:00:00", "2024-04-29 00:00:00"}},
		{"month -30", Plan{Type: PlanMonth, Value: -30, Repeat: -1}, "UTC", "2025-01-01 00:00:01", 3,
			[]string{"2025-02-01 00:00:00", "2025-03-01 00:00:00", "2025-04-01 00:00:00"}},
		{"month -31", Plan{Type: PlanMonth, Value: -31, Repeat: -1}, "UTC", "2025-01-01 00:00:00", 3,
			[]string{"2025-01-01 00:00:00", "2025-02-01 00:00:00", "2025-03-01 00:00:00"}},
		{"month limited repeats", Plan{Type: PlanMonth, Value: 15, Repeat: 2}, "UTC", "2025-01-01 00:00:00", 5,
			[]string{"2025-01-15 00:00:00", "2025-02-15 00:00:00"}},
		{"week across NY spring forward", Plan{Type: PlanWeek, Value: 0, Repeat: -1, Time: utc(t, "2025-01-05T14:00:00Z").Unix()}, // 09:00 EST
			"America/New_York", "2025-03-01 00:00:00", 3,
			[]string{"2025-03-02 09:00:00", "2025-03-09 09:00:00", "2025-03-16 09:00:00"}},
		{"week at a time the gap removes", Plan{Type: PlanWeek, Value: 0, Repeat: -1, Time: utc(t, "2025-01-05T07:30:00Z").Unix()}, // 02:30 EST
			"America/New_York", "2025-03-05 00:00:00", 2,
			[]string{"2025-03-09 03:00:00", "2025-03-16 02:30:00"}},
		{"week at a time that happens twice", Plan{Type: PlanWeek, Value: 0, Repeat: -1, Time: utc(t, "2025-01-05T06:30:00Z").Unix()}, // 01:30 EST
			"America/New_York", "2025-10-30 00:00:00", 2,
			[]string{"2025-11-02T05:30:00Z", "2025-11-09 01:30:00"}}, // the first 01:30, EDT
		{"week across London fall back", Plan{Type: PlanWeek, Value: 1, Repeat: 3, Time: utc(t, "2025-07-07T07:00:00Z").Unix()}, // 08:00 BST
			"Europe/London", "2025-10-20 09:00:00", 3,
			[]string{"2025-10-27 08:00:00", "2025-11-03 08:00:00", "2025-11-10 08:00:00"}},
		{"interval", Plan{Type: PlanMinute, Value: 10, Repeat: 3}, "UTC", "2025-01-01 00:00:00", 5,
			[]string{"2025-01-01 00:10:00", "2025-01-01 00:20:00", "2025-01-01 00:30:00"}},
		{"time", Plan{Type: PlanTime, Time: utc(t, "2025-01-02T00:00:00Z").Unix()}, "UTC", "2025-01-01 00:00:00", 5,
			[]string{"2025-01-02 00:00:00"}},
		{"none", Plan{Type: PlanNone}, "UTC", "2025-01-01 00:00:00", 5, []string{"2025-01-01 00:00:00"}},
		{"n = 0", Plan{Type: PlanNone}, "UTC", "2025-01-01 00:00:00", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loc := mustLoad(t, tt.zone)
			got := tt.plan.NextN(at(t, loc, tt.from), tt.n, loc)
			var want []time.Time
			for _, w := range tt.want {
				if strings.HasSuffix(w, "Z") {
					want = append(want, utc(t, w))
				} else {
					want = append(want, at(t, loc, w))
				}
			}
			if !equalTimes(got, want) {
				t.Errorf("got:%s\nwant:%s", formatTimes(got, loc), formatTimes(want, loc))
			}
			if tt.n == 0 && got != nil {
				t.Errorf("NextN(0) = %v, want nil", got)
			}
		})
	}
}

// TestPlanMonthDay checks the clamping rule against a direct reading of the
// seed for every value and a leap and a common February.
func TestPlanMonthDay(t *testing.T) {
	t.Parallel()
	for _, y := range []int{2024, 2025} {
		for m := time.January; m <= time.December; m++ {
			last := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
			for v := -31; v <= 31; v++ {
				var want int
				switch {
				case v >= 1 && v <= last:
					want = v
				case v > last, v == 0:
					want = last
				case last+v < 1:
					want = 1
				default:
					want = last + v
				}
				if got := monthDay(v, y, m); got != want {
					t.Errorf("monthDay(%d, %d, %v) = %d, want %d", v, y, m, got, want)
				}
			}
		}
	}
}

// TestResolveWall checks gap and overlap resolution against instants
// computed by hand.
func TestResolveWall(t *testing.T) {
	t.Parallel()
	tests := []struct{ zone, wall, want string }{
		{"America/New_York", "2025-03-09 02:30:00", "2025-03-09T07:00:00Z"}, // gap: end of the gap
		{"America/New_York", "2025-03-09 03:00:00", "2025-03-09T07:00:00Z"},
		{"America/New_York", "2025-03-09 01:59:59", "2025-03-09T06:59:59Z"},
		{"America/New_York", "2025-11-02 01:30:00", "2025-11-02T05:30:00Z"}, // overlap: first
		{"America/New_York", "2025-11-02 02:00:00", "2025-11-02T07:00:00Z"},
		{"America/Sao_Paulo", "2018-11-04 00:00:00", "2018-11-04T03:00:00Z"},
		{"Pacific/Apia", "2011-12-30 12:00:00", "2011-12-30T10:00:00Z"}, // the skipped day
		{"UTC", "2025-01-01 00:00:00", "2025-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		loc := mustLoad(t, tt.zone)
		w, err := time.Parse("2006-01-02 15:04:05", tt.wall)
		if err != nil {
			t.Fatal(err)
		}
		if got := resolveWall(w.Unix(), loc); !got.Equal(utc(t, tt.want)) {
			t.Errorf("resolveWall(%s in %s) = %v, want %s", tt.wall, tt.zone, got, tt.want)
		}
	}
}
