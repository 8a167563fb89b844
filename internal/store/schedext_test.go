package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func TestScheduleRunsPageCursorRoundTrip(t *testing.T) {
	t.Parallel()
	fire := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a := strings.Repeat("a", 32)
	runs := []rota.ScheduleRun{{TaskID: strings.Repeat("b", 32), FireTime: fire.Add(time.Minute)}, {TaskID: a, FireTime: fire}, {TaskID: strings.Repeat("c", 32)}}
	page := store.ScheduleRunsPage(runs, 2)
	if len(page.Runs) != 2 || page.NextCursor == "" {
		t.Fatalf("page of 3 runs by 2 = %d runs, cursor %q; want 2 and a cursor", len(page.Runs), page.NextCursor)
	}
	f, id, err := store.ParseScheduleRunsCursor(page.NextCursor)
	if err != nil || f != fire.UnixMilli() || id != a {
		t.Errorf("ParseScheduleRunsCursor(%q) = %d, %q, %v; want %d, %q, nil", page.NextCursor, f, id, err, fire.UnixMilli(), a)
	}
	if last := store.ScheduleRunsPage(runs[:2], 2); last.NextCursor != "" {
		t.Errorf("a full last page has cursor %q, want none", last.NextCursor)
	}
	for _, bad := range []string{"", "12", "x-a", "12-"} {
		if _, _, err := store.ParseScheduleRunsCursor(bad); !errors.Is(err, rota.ErrInvalid) {
			t.Errorf("ParseScheduleRunsCursor(%q) error = %v, want rota.ErrInvalid", bad, err)
		}
	}
}

func TestNewScheduleRun(t *testing.T) {
	t.Parallel()
	fire := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now := fire.Add(time.Second).UnixMilli()
	held := store.ScheduleRunInsert{TaskID: "t1", FireTime: fire, Attempt: 1, Held: true}
	r := store.NewScheduleRun("s1", &held, now)
	if r.Status != rota.StatusScheduled || !r.Held || !r.EndTime.IsZero() || r.ScheduleID != "s1" {
		t.Errorf("held run = %+v, want SCHEDULED, held, not ended, of s1", r)
	}
	skipped := held
	skipped.Skip = rota.SkipReason("overlap")
	r = store.NewScheduleRun("s1", &skipped, now)
	if r.Status != rota.StatusSkipped || r.Held || r.EndTime.UnixMilli() != now {
		t.Errorf("skipped run = %+v, want SKIPPED, not held, ended at now", r)
	}
	if got := held.RunAtMillis(now); got != now {
		t.Errorf("RunAtMillis without RunAt = %d, want now %d", got, now)
	}
	held.RunAt = fire
	if got := held.RunAtMillis(now); got != fire.UnixMilli() {
		t.Errorf("RunAtMillis = %d, want RunAt %d", got, fire.UnixMilli())
	}
}

func TestOpenRun(t *testing.T) {
	t.Parallel()
	open := []rota.ScheduleRun{{TaskID: "a"}, {TaskID: "b"}}
	if r := store.OpenRun(open, "b"); r == nil || r.TaskID != "b" || r == &open[1] {
		t.Errorf("OpenRun(b) = %v, want a copy of run b", r)
	}
	if r := store.OpenRun(open, ""); r != nil {
		t.Errorf("OpenRun(\"\") = %v, want nil", r)
	}
	if r := store.OpenRun(open, "z"); r != nil {
		t.Errorf("OpenRun(z) = %v, want nil", r)
	}
}
