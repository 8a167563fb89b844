package storetest

import (
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// testScheduleExt covers the fields added with the failure actions BACKOFF
// and HALF_OPEN, jitter, the error state and a plan's end reason: they
// round-trip through insert, update and fire, the list filters on the
// state, and a claim of a schedule's run carries its schedule and fire
// time.
func testScheduleExt(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "RoundTrip", func(t *testing.T, f *schedFixture) {
		s := f.newSchedule("ext", f.At(0))
		s.FailureAction, s.BackoffSeconds, s.BackoffMaxSeconds = rota.FailureBackoff, 7, 70
		s.FailureThreshold, s.CooldownSeconds, s.JitterSeconds = 4, 40, 9
		s.ConsecutiveFailures, s.Circuit, s.NextAllowedAt = 2, rota.CircuitOpen, f.At(30*time.Second)
		s.CountedRunID, s.EndReason = f.NewTaskID(f.At(0)), "why"
		got := f.insertSchedule(s, f.At(0))
		s.Version, s.CreatedAt, s.UpdatedAt = 1, got.CreatedAt, got.UpdatedAt
		schedDiff(t, "inserted", &s, got)

		got.ErrorMessage, got.Circuit, got.CooldownSeconds = "broken", rota.CircuitHalfOpen, 41
		upd, err := f.ss.ScheduleUpdate(f.Ctx(), store.ScheduleUpdateParams{Schedule: *got, Now: f.At(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if upd.ErrorMessage != "broken" || upd.Circuit != rota.CircuitHalfOpen || upd.CooldownSeconds != 41 || upd.State() != rota.StateError {
			t.Fatalf("updated: %+v", upd)
		}
		res := f.fire(upd.ID, upd.Version, f.At(2*time.Second), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			state := st.Schedule.ScheduleState
			state.ErrorMessage, state.ConsecutiveFailures, state.NextAllowedAt = "", 5, f.At(time.Minute)
			return store.ScheduleDecision{State: state}, nil
		})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		after, err := f.ss.ScheduleGet(f.Ctx(), upd.ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.ErrorMessage != "" || after.ConsecutiveFailures != 5 || !after.NextAllowedAt.Equal(f.At(time.Minute)) ||
			after.Circuit != rota.CircuitHalfOpen || after.JitterSeconds != 9 {
			t.Fatalf("after fire: %+v", after)
		}
	})
	testScheduleExtList(t, ns)
}

// testScheduleExtList covers the list by state and the fire context of a
// claim.
func testScheduleExtList(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "ListState", func(t *testing.T, f *schedFixture) {
		active := f.insertSchedule(f.newSchedule("active", f.At(0)), f.At(0))
		paused := f.newSchedule("paused", f.At(0))
		paused.Enabled = false
		f.insertSchedule(paused, f.At(0))
		ended := f.newSchedule("ended", f.At(0))
		ended.Enabled, ended.Ended = false, true
		f.insertSchedule(ended, f.At(0))
		broken := f.newSchedule("broken", f.At(0))
		broken.ErrorMessage = "no next time"
		f.insertSchedule(broken, f.At(0))
		for state, want := range map[string]string{
			rota.StateActive: "active", rota.StatePaused: "paused", rota.StateEnded: "ended", rota.StateError: "broken",
		} {
			res, err := f.ss.ScheduleList(f.Ctx(), store.ScheduleListParams{State: state, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Schedules) != 1 || res.Schedules[0].Name != want {
				t.Errorf("state %s: %d schedules, want %s", state, len(res.Schedules), want)
			}
		}
		res, err := f.ss.ScheduleList(f.Ctx(), store.ScheduleListParams{Limit: 10})
		if err != nil || len(res.Schedules) != 4 {
			t.Fatalf("all: %d, %v", len(res.Schedules), err)
		}
		_ = active
	})
	parallelSched(t, ns, "ClaimCarriesFireTime", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("ctx", f.At(0)), f.At(0))
		fire := f.At(5 * time.Second)
		id := f.NewTaskID(fire)
		res := f.fire(s.ID, s.Version, fire, func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{Runs: []store.ScheduleRunInsert{{TaskID: id, FireTime: fire, Attempt: 1}},
				State: st.Schedule.ScheduleState}, nil
		})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		c := f.ClaimOne("w", f.At(6*time.Second), kindK)
		if c.TaskID != id || c.ScheduleID != s.ID || !c.FireTime.Equal(fire) {
			t.Fatalf("claimed %s of schedule %q at fire time %v; want %s, %s, %v", c.TaskID, c.ScheduleID, c.FireTime, id, s.ID, fire)
		}
	})
}
