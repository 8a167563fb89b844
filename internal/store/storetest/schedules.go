package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// schedFixture is a Fixture with its store's schedule side at hand.
type schedFixture struct {
	*Fixture
	ss store.ScheduleStore
}

func parallelSched(t *testing.T, ns newStoreFunc, name string, fn func(t *testing.T, f *schedFixture)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		st := ns(t)
		fn(t, &schedFixture{Fixture: NewFixture(t, st), ss: st})
	})
}

// newSchedule returns a schedule named name with the suite's defaults.
func (f *schedFixture) newSchedule(name string, now time.Time) rota.Schedule {
	return rota.Schedule{
		ID: f.NewTaskID(now), Name: name, Kind: kindK, Priority: rota.PriorityMid,
		Payload: json.RawMessage(`{"s":1}`), CronExpr: "*/5 * * * * *", Timezone: "UTC", Enabled: true,
		MaxConcurrency: 1, ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapAllow,
		FailureAction: rota.FailureRunNew, MisfirePolicy: rota.MisfireSkip, CatchupLimit: 3, TimeoutSeconds: 10,
		ScheduleState: rota.ScheduleState{HighWater: now, NextFire: now.Add(5 * time.Second)},
	}
}

func (f *schedFixture) insertSchedule(s rota.Schedule, now time.Time) *rota.Schedule {
	f.TB.Helper()
	got, err := f.ss.ScheduleInsert(f.Ctx(), store.ScheduleInsertParams{Schedule: s, Now: now})
	if err != nil {
		f.TB.Fatalf("ScheduleInsert(%s): %v", s.Name, err)
	}
	return got
}

// fire applies dec to schedule id at version v and returns the result.
func (f *schedFixture) fire(id string, v int64, now time.Time, decide func(store.ScheduleRunState) (store.ScheduleDecision, error)) store.ScheduleFireResult {
	f.TB.Helper()
	res, err := f.ss.ScheduleFire(f.Ctx(), []store.ScheduleFireParams{{ID: id, Version: v, Now: now, Decide: decide}})
	if err != nil {
		f.TB.Fatalf("ScheduleFire(%s): %v", id, err)
	}
	if len(res) != 1 {
		f.TB.Fatalf("ScheduleFire: %d results, want 1", len(res))
	}
	return res[0]
}

// pagedRunIDs lists the task ids of schedule id's runs page by page.
func (f *schedFixture) pagedRunIDs(id string, limit int) []string {
	f.TB.Helper()
	var paged []string
	p := store.ScheduleRunsParams{ScheduleID: id, Limit: limit}
	for range 100 {
		res, err := f.ss.ScheduleRuns(f.Ctx(), p)
		must(f.TB, "ScheduleRuns", err)
		for _, r := range res.Runs {
			paged = append(paged, r.TaskID)
		}
		if res.NextCursor == "" {
			break
		}
		p.Cursor = res.NextCursor
	}
	return paged
}

// runIDs returns the task ids of runs.
func runIDs(runs []rota.ScheduleRun) []string {
	out := make([]string, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.TaskID)
	}
	return out
}

func (f *schedFixture) allRuns(id string) []rota.ScheduleRun {
	f.TB.Helper()
	var out []rota.ScheduleRun
	p := store.ScheduleRunsParams{ScheduleID: id, Limit: 1000}
	for range 100 {
		res, err := f.ss.ScheduleRuns(f.Ctx(), p)
		if err != nil {
			f.TB.Fatalf("ScheduleRuns(%s): %v", id, err)
		}
		out = append(out, res.Runs...)
		if res.NextCursor == "" {
			return out
		}
		p.Cursor = res.NextCursor
	}
	f.TB.Fatal("ScheduleRuns: pagination does not end")
	return nil
}

// schedOpts compares schedules as stored.
func schedDiff(tb testing.TB, what string, want, got *rota.Schedule) {
	tb.Helper()
	diff(tb, what, want, got)
}

func testScheduleCRUD(t *testing.T, ns newStoreFunc) {
	testScheduleInsertUpdate(t, ns)
	testScheduleDelete(t, ns)
	testScheduleList(t, ns)
}

// testScheduleInsertUpdate covers insert, get, not found, a duplicate name and the compare-and-set of updates.
func testScheduleInsertUpdate(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "InsertGet", func(t *testing.T, f *schedFixture) {
		s := f.newSchedule("nightly", f.At(0))
		s.Plan = nil
		s.Target = &rota.Target{URL: "http://example.test/hook", Method: "PUT", Headers: map[string]string{"X-A": "1"}}
		got := f.insertSchedule(s, f.At(0))
		want := s
		want.Version, want.CreatedAt, want.UpdatedAt = 1, f.At(0), f.At(0)
		schedDiff(t, "ScheduleInsert result", &want, got)
		byID, err := f.ss.ScheduleGet(f.Ctx(), s.ID)
		must(t, "ScheduleGet", err)
		schedDiff(t, "ScheduleGet", &want, byID)
		byName, err := f.ss.ScheduleGetByName(f.Ctx(), "nightly")
		must(t, "ScheduleGetByName", err)
		schedDiff(t, "ScheduleGetByName", &want, byName)

		p := f.newSchedule("plan", f.At(0))
		p.CronExpr, p.Plan = "", &rota.PlanSpec{Type: "minute", Value: 5, Repeat: 3, Time: 1767225600, NoKeep: true}
		p.PlanSeq, p.PlanAt = 1, f.At(5*time.Minute)
		gotP := f.insertSchedule(p, f.At(0))
		if gotP.Plan == nil || *gotP.Plan != *p.Plan || gotP.PlanSeq != 1 || !sameInstant(gotP.PlanAt, p.PlanAt) {
			t.Fatalf("plan schedule stored as %+v / %+v", gotP.Plan, gotP.ScheduleState)
		}
	})

	parallelSched(t, ns, "NotFoundAndDuplicateName", func(t *testing.T, f *schedFixture) {
		_, err := f.ss.ScheduleGet(f.Ctx(), f.NewTaskID(f.At(0)))
		wantErr(t, "ScheduleGet(unknown)", err, rota.ErrNotFound)
		_, err = f.ss.ScheduleGetByName(f.Ctx(), "nope")
		wantErr(t, "ScheduleGetByName(unknown)", err, rota.ErrNotFound)
		f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		_, err = f.ss.ScheduleInsert(f.Ctx(), store.ScheduleInsertParams{Schedule: f.newSchedule("a", f.At(1)), Now: f.At(1)})
		wantErr(t, "ScheduleInsert(duplicate name)", err, rota.ErrConflict)
	})

	parallelSched(t, ns, "UpdateCompareAndSet", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		f.insertSchedule(f.newSchedule("b", f.At(0)), f.At(0))
		edit := *s
		edit.CronExpr = "0 * * * * *"
		edit.Payload = json.RawMessage(`{"s":2}`)
		edit.HighWater = f.At(sec(30))
		got, err := f.ss.ScheduleUpdate(f.Ctx(), store.ScheduleUpdateParams{Schedule: edit, Now: f.At(sec(30))})
		must(t, "ScheduleUpdate", err)
		if got.Version != 2 || got.CronExpr != "0 * * * * *" || !sameInstant(got.HighWater, f.At(sec(30))) ||
			!sameInstant(got.UpdatedAt, f.At(sec(30))) || !jsonEqual(got.Payload, edit.Payload) {
			t.Fatalf("after update: %+v", got)
		}
		// The same (now stale) version again: conflict.
		_, err = f.ss.ScheduleUpdate(f.Ctx(), store.ScheduleUpdateParams{Schedule: edit, Now: f.At(sec(31))})
		wantErr(t, "ScheduleUpdate(stale version)", err, rota.ErrConflict)
		// Renaming onto another schedule's name: conflict.
		edit = *got
		edit.Name = "b"
		_, err = f.ss.ScheduleUpdate(f.Ctx(), store.ScheduleUpdateParams{Schedule: edit, Now: f.At(sec(32))})
		wantErr(t, "ScheduleUpdate(taken name)", err, rota.ErrConflict)
		edit.ID = f.NewTaskID(f.At(0))
		_, err = f.ss.ScheduleUpdate(f.Ctx(), store.ScheduleUpdateParams{Schedule: edit, Now: f.At(sec(32))})
		wantErr(t, "ScheduleUpdate(unknown)", err, rota.ErrNotFound)
	})
}

// testScheduleDelete covers deletes: the name freed, held and unstarted target runs canceled.
func testScheduleDelete(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "DeleteFreesNameAndCancelsHeld", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		held := f.NewTaskID(f.At(0))
		res := f.fire(s.ID, s.Version, f.At(sec(5)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{State: st.Schedule.ScheduleState, Runs: []store.ScheduleRunInsert{
				{TaskID: held, FireTime: f.At(sec(5)), Attempt: 1, Held: true},
			}}, nil
		})
		must(t, "fire", res.Err)
		must(t, "ScheduleDelete", f.ss.ScheduleDelete(f.Ctx(), store.ScheduleDeleteParams{ID: s.ID, Now: f.At(sec(6))}))
		_, err := f.ss.ScheduleGet(f.Ctx(), s.ID)
		wantErr(t, "ScheduleGet(deleted)", err, rota.ErrNotFound)
		wantErr(t, "ScheduleDelete(again)", f.ss.ScheduleDelete(f.Ctx(), store.ScheduleDeleteParams{ID: s.ID, Now: f.At(sec(7))}), rota.ErrNotFound)
		task := f.Get(held)
		wantStatus(t, task, rota.StatusCanceled)
		f.insertSchedule(f.newSchedule("a", f.At(sec(8))), f.At(sec(8)))
		if runs := f.allRuns(s.ID); len(runs) != 1 {
			t.Fatalf("runs of a deleted schedule: %d, want 1 (kept)", len(runs))
		}
	})

	parallelSched(t, ns, "DeleteCancelsUnstartedTargetRuns", func(t *testing.T, f *schedFixture) {
		sc := f.newSchedule("a", f.At(0))
		sc.Target = &rota.Target{URL: "http://x.test"}
		s := f.insertSchedule(sc, f.At(0))
		started, waiting := f.NewTaskID(f.At(0)), f.NewTaskID(f.At(0))
		res := f.fire(s.ID, s.Version, f.At(sec(5)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{State: st.Schedule.ScheduleState, Runs: []store.ScheduleRunInsert{
				{TaskID: started, FireTime: f.At(sec(5)), Attempt: 1},
			}}, nil
		})
		must(t, "fire", res.Err)
		if c := f.ClaimOne(rota.HTTPWorkerID, f.At(sec(6)), kindK); c.TaskID != started {
			t.Fatalf("claimed %s, want %s", c.TaskID, started)
		}
		res = f.fire(s.ID, res.Schedule.Version, f.At(sec(10)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{State: st.Schedule.ScheduleState, Runs: []store.ScheduleRunInsert{
				{TaskID: waiting, FireTime: f.At(sec(10)), Attempt: 1},
			}}, nil
		})
		must(t, "fire", res.Err)
		hand := f.Params(kindK, f.At(sec(10))) // a task of the same kind, not the schedule's
		f.Insert(hand)
		must(t, "ScheduleDelete", f.ss.ScheduleDelete(f.Ctx(), store.ScheduleDeleteParams{ID: s.ID, Now: f.At(sec(11))}))
		wantStatus(t, f.Get(waiting), rota.StatusCanceled)  // only the executor could have run it
		wantStatus(t, f.Get(started), rota.StatusRunning)   // its call is under way: it ends as it ends
		wantStatus(t, f.Get(hand.ID), rota.StatusScheduled) // not the schedule's
	})
}

// testScheduleList covers the list and its pages.
func testScheduleList(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "List", func(t *testing.T, f *schedFixture) {
		var want []string
		for i := range 5 {
			s := f.insertSchedule(f.newSchedule(fmt.Sprintf("s%d", i), f.At(sec(i))), f.At(sec(i)))
			want = append([]string{s.ID}, want...)
		}
		var got []string
		p := store.ScheduleListParams{Limit: 2}
		for range 10 {
			res, err := f.ss.ScheduleList(f.Ctx(), p)
			must(t, "ScheduleList", err)
			for _, s := range res.Schedules {
				got = append(got, s.ID)
			}
			if res.NextCursor == "" {
				break
			}
			p.Cursor = res.NextCursor
		}
		diff(t, "listed ids (newest first)", want, got)
	})
}

func testScheduleLoad(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "Revisions", func(t *testing.T, f *schedFixture) {
		res, err := f.ss.ScheduleLoad(f.Ctx(), 0)
		must(t, "ScheduleLoad(0) empty", err)
		if len(res.Schedules) != 0 || res.Rev != 0 {
			t.Fatalf("empty store: %+v", res)
		}
		a := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		b := f.insertSchedule(f.newSchedule("b", f.At(0)), f.At(0))
		all, err := f.ss.ScheduleLoad(f.Ctx(), 0)
		must(t, "ScheduleLoad(0)", err)
		if len(all.Schedules) != 2 || all.Rev < 2 {
			t.Fatalf("load all: %d schedules, rev %d", len(all.Schedules), all.Rev)
		}
		none, err := f.ss.ScheduleLoad(f.Ctx(), all.Rev)
		must(t, "ScheduleLoad(rev)", err)
		if len(none.Schedules) != 0 || len(none.Deleted) != 0 || none.Rev != all.Rev {
			t.Fatalf("nothing changed, got %+v", none)
		}
		// A fire (state only) is not a configuration change.
		f.fire(a.ID, a.Version, f.At(sec(5)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			s := st.Schedule.ScheduleState
			s.HighWater = f.At(sec(5))
			return store.ScheduleDecision{State: s}, nil
		})
		if res, _ := f.ss.ScheduleLoad(f.Ctx(), all.Rev); len(res.Schedules) != 0 {
			t.Fatalf("a fire must not count as a change: %+v", res.Schedules)
		}
		edit, err := f.ss.ScheduleGet(f.Ctx(), a.ID)
		must(t, "ScheduleGet", err)
		edit.Enabled = false
		_, err = f.ss.ScheduleUpdate(f.Ctx(), store.ScheduleUpdateParams{Schedule: *edit, Now: f.At(sec(6))})
		must(t, "ScheduleUpdate", err)
		must(t, "ScheduleDelete", f.ss.ScheduleDelete(f.Ctx(), store.ScheduleDeleteParams{ID: b.ID, Now: f.At(sec(6))}))
		ch, err := f.ss.ScheduleLoad(f.Ctx(), all.Rev)
		must(t, "ScheduleLoad(changes)", err)
		if len(ch.Schedules) != 1 || ch.Schedules[0].ID != a.ID || ch.Schedules[0].Enabled {
			t.Fatalf("changed schedules: %+v", ch.Schedules)
		}
		diff(t, "deleted ids", []string{b.ID}, ch.Deleted)
		if ch.Rev <= all.Rev {
			t.Fatalf("rev %d did not move past %d", ch.Rev, all.Rev)
		}
	})

	parallelSched(t, ns, "TargetKinds", func(t *testing.T, f *schedFixture) {
		a := f.newSchedule("a", f.At(0))
		a.Kind, a.Target = "hooks", &rota.Target{URL: "http://x.test"}
		f.insertSchedule(a, f.At(0))
		b := f.newSchedule("b", f.At(0))
		b.Kind = "plain"
		f.insertSchedule(b, f.At(0))
		kinds, err := f.ss.ScheduleTargetKinds(f.Ctx())
		must(t, "ScheduleTargetKinds", err)
		diff(t, "target kinds", []string{"hooks"}, kinds)
	})
}

func testScheduleFire(t *testing.T, ns newStoreFunc) {
	testScheduleFireInserts(t, ns)
	testScheduleFireOnce(t, ns)
	testScheduleFireRaces(t, ns)
}

// testScheduleFireInserts covers the runs a fire inserts: ready, held and skipped.
func testScheduleFireInserts(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "InsertsReadyHeldSkipped", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		ready, held, skipped := f.NewTaskID(f.At(0)), f.NewTaskID(f.At(0)), f.NewTaskID(f.At(0))
		var seen store.ScheduleRunState
		res := f.fire(s.ID, s.Version, f.At(sec(10)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			seen = st
			state := st.Schedule.ScheduleState
			state.HighWater, state.LastRunID = f.At(sec(10)), held
			return store.ScheduleDecision{State: state, Runs: []store.ScheduleRunInsert{
				{TaskID: skipped, FireTime: f.At(sec(0)), Attempt: 1, Skip: rota.SkipMisfire, Message: "missed"},
				{TaskID: ready, FireTime: f.At(sec(5)), Attempt: 2},
				{TaskID: held, FireTime: f.At(sec(10)), Attempt: 1, Held: true},
			}}, nil
		})
		must(t, "fire", res.Err)
		if seen.Schedule.ID != s.ID || len(seen.Open) != 0 || seen.Last != nil {
			t.Fatalf("Decide saw %+v", seen)
		}
		if res.Schedule.Version != s.Version+1 || res.Schedule.LastRunID != held || !sameInstant(res.Schedule.HighWater, f.At(sec(10))) {
			t.Fatalf("state after fire: version %d, %+v", res.Schedule.Version, res.Schedule.ScheduleState)
		}
		if len(res.Inserted) != 3 || len(res.Duplicates) != 0 {
			t.Fatalf("inserted %d, duplicates %v", len(res.Inserted), res.Duplicates)
		}
		sk := f.Get(skipped)
		wantStatus(t, sk, rota.StatusSkipped)
		wantInstant(t, "skipped EndTime", sk.EndTime, f.At(sec(10)))
		if sk.ScheduleID != s.ID || !sameInstant(sk.FireTime, f.At(0)) {
			t.Fatalf("skipped run: schedule %q fire %v", sk.ScheduleID, sk.FireTime)
		}
		c := f.ClaimOne("w1", f.At(sec(11)), kindK)
		if c.TaskID != ready {
			t.Fatalf("claimed %s, want the ready run %s", c.TaskID, ready)
		}
		if !jsonEqual(c.Payload, s.Payload) || c.TimeoutSeconds != s.TimeoutSeconds {
			t.Fatalf("claimed run: payload %s timeout %d", c.Payload, c.TimeoutSeconds)
		}
		f.ClaimNone("w2", f.At(sec(12)), kindK) // the held run is not claimable
		runs := f.allRuns(s.ID)
		got := map[string]rota.ScheduleRun{}
		for _, r := range runs {
			got[r.TaskID] = r
		}
		if r := got[ready]; r.Attempt != 2 || r.Status != rota.StatusRunning {
			t.Fatalf("ready run: %+v", r)
		}
		if r := got[held]; !r.Held || r.Status != rota.StatusScheduled {
			t.Fatalf("held run: %+v", r)
		}
		if r := got[skipped]; r.Reason != rota.SkipMisfire || r.Message != "missed" || r.EndTime.IsZero() {
			t.Fatalf("skipped run: %+v", r)
		}
		// Next fire sees the live state and releases the held run.
		s2 := res.Schedule
		res = f.fire(s.ID, s2.Version, f.At(sec(13)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			seen = st
			return store.ScheduleDecision{State: st.Schedule.ScheduleState, Release: []string{held}}, nil
		})
		must(t, "fire (release)", res.Err)
		if len(seen.Open) != 2 || seen.Last == nil || seen.Last.TaskID != held || !seen.Last.Held {
			t.Fatalf("live state: open %d, last %+v", len(seen.Open), seen.Last)
		}
		diff(t, "released", []string{held}, res.Released)
		if c := f.ClaimOne("w2", f.At(sec(14)), kindK); c.TaskID != held {
			t.Fatalf("claimed %s, want the released run %s", c.TaskID, held)
		}
	})
}

// testScheduleFireOnce covers the compare-and-set of fires, Decide errors and one run per fire time.
func testScheduleFireOnce(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "CompareAndSetAndDecideError", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		called := false
		res := f.fire(s.ID, s.Version+7, f.At(sec(5)), func(store.ScheduleRunState) (store.ScheduleDecision, error) {
			called = true
			return store.ScheduleDecision{}, nil
		})
		wantErr(t, "fire with a stale version", res.Err, rota.ErrConflict)
		if called {
			t.Fatal("Decide was called despite the version mismatch")
		}
		boom := errors.New("boom")
		res = f.fire(s.ID, s.Version, f.At(sec(5)), func(store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{Runs: []store.ScheduleRunInsert{{TaskID: f.NewTaskID(f.At(0)), FireTime: f.At(sec(5)), Attempt: 1}}}, boom
		})
		if !errors.Is(res.Err, boom) {
			t.Fatalf("Decide's error: got %v", res.Err)
		}
		if got, _ := f.ss.ScheduleGet(f.Ctx(), s.ID); got.Version != s.Version || len(f.allRuns(s.ID)) != 0 {
			t.Fatal("an item whose Decide failed changed something")
		}
		res = f.fire(f.NewTaskID(f.At(0)), 1, f.At(sec(5)), nil)
		wantErr(t, "fire unknown schedule", res.Err, rota.ErrNotFound)
	})

	parallelSched(t, ns, "OneRunPerFireTime", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		first, second := f.NewTaskID(f.At(0)), f.NewTaskID(f.At(0))
		res := f.fire(s.ID, s.Version, f.At(sec(5)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			state := st.Schedule.ScheduleState
			state.LastRunID = first
			return store.ScheduleDecision{State: state, Runs: []store.ScheduleRunInsert{{TaskID: first, FireTime: f.At(sec(5)), Attempt: 1}}}, nil
		})
		must(t, "fire", res.Err)
		res = f.fire(s.ID, res.Schedule.Version, f.At(sec(6)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			state := st.Schedule.ScheduleState
			state.LastRunID = second
			return store.ScheduleDecision{State: state, Runs: []store.ScheduleRunInsert{{TaskID: second, FireTime: f.At(sec(5)), Attempt: 1, Skip: rota.SkipOverlap}}}, nil
		})
		must(t, "fire duplicate", res.Err)
		if len(res.Inserted) != 0 || len(res.Duplicates) != 1 || !sameInstant(res.Duplicates[0], f.At(sec(5))) {
			t.Fatalf("duplicate: inserted %v, duplicates %v", res.Inserted, res.Duplicates)
		}
		if res.Schedule.LastRunID != first {
			t.Fatalf("LastRunID = %s, want the run that exists (%s)", res.Schedule.LastRunID, first)
		}
		if n := len(f.allRuns(s.ID)); n != 1 {
			t.Fatalf("%d runs for one fire time, want 1", n)
		}
	})
}

// testScheduleFireRaces covers concurrent fires (one winner) and target runs.
func testScheduleFireRaces(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "ConcurrentFiresOneWinner", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := f.NewTaskID(f.At(0))
				res, err := f.ss.ScheduleFire(f.Ctx(), []store.ScheduleFireParams{{ID: s.ID, Version: s.Version, Now: f.At(sec(5)),
					Decide: func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
						state := st.Schedule.ScheduleState
						state.HighWater = f.At(sec(5))
						return store.ScheduleDecision{State: state, Runs: []store.ScheduleRunInsert{{TaskID: id, FireTime: f.At(sec(5)), Attempt: 1}}}, nil
					}}})
				if err == nil {
					err = res[0].Err
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, rota.ErrConflict):
				t.Fatalf("racing fire: %v", err)
			}
		}
		if ok != 1 || len(f.allRuns(s.ID)) != 1 {
			t.Fatalf("%d fires won, %d runs; want 1 and 1", ok, len(f.allRuns(s.ID)))
		}
	})

	parallelSched(t, ns, "TargetRunsPinnedAndDisable", func(t *testing.T, f *schedFixture) {
		sc := f.newSchedule("a", f.At(0))
		sc.Target = &rota.Target{URL: "http://x.test"}
		s := f.insertSchedule(sc, f.At(0))
		id := f.NewTaskID(f.At(0))
		res := f.fire(s.ID, s.Version, f.At(sec(5)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
			state := st.Schedule.ScheduleState
			state.Ended = true
			return store.ScheduleDecision{State: state, Disable: true, Runs: []store.ScheduleRunInsert{{TaskID: id, FireTime: f.At(sec(5)), Attempt: 1}}}, nil
		})
		must(t, "fire", res.Err)
		if res.Schedule.Enabled || !res.Schedule.Ended {
			t.Fatalf("Disable: enabled %v ended %v", res.Schedule.Enabled, res.Schedule.Ended)
		}
		diff(t, "worker ids of a target run", []string{rota.HTTPWorkerID}, f.Get(id).WorkerIDs)
		f.ClaimNone("w1", f.At(sec(6)), kindK)
		if c := f.ClaimOne(rota.HTTPWorkerID, f.At(sec(6)), kindK); c.TaskID != id {
			t.Fatalf("claimed %s", c.TaskID)
		}
	})
}

func testScheduleRuns(t *testing.T, ns newStoreFunc) {
	parallelSched(t, ns, "TriggerPagingOpen", func(t *testing.T, f *schedFixture) {
		s := f.insertSchedule(f.newSchedule("a", f.At(0)), f.At(0))
		v := s.Version
		var ids []string
		for i := 1; i <= 5; i++ {
			id := f.NewTaskID(f.At(0))
			skip := rota.SkipReason("")
			if i%2 == 0 {
				skip = rota.SkipConcurrency
			}
			res := f.fire(s.ID, v, f.At(sec(5*i)), func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
				return store.ScheduleDecision{State: st.Schedule.ScheduleState, Runs: []store.ScheduleRunInsert{{TaskID: id, FireTime: f.At(sec(5 * i)), Attempt: 1, Skip: skip}}}, nil
			})
			must(t, "fire", res.Err)
			v = res.Schedule.Version
			ids = append([]string{id}, ids...)
		}
		// A trigger in the same second as a regular fire time is not a
		// duplicate: it is outside the series.
		trig, err := f.ss.ScheduleTrigger(f.Ctx(), store.ScheduleTriggerParams{ID: s.ID, TaskID: f.NewTaskID(f.At(0)), Now: f.At(sec(25))})
		must(t, "ScheduleTrigger", err)
		if !trig.Triggered || trig.Attempt != 1 || trig.Status != rota.StatusScheduled {
			t.Fatalf("triggered run: %+v", trig)
		}
		got, err := f.ss.ScheduleGet(f.Ctx(), s.ID)
		must(t, "ScheduleGet", err)
		if got.LastRunID != trig.TaskID || got.Version != v+1 {
			t.Fatalf("after trigger: last %s version %d", got.LastRunID, got.Version)
		}
		_, err = f.ss.ScheduleTrigger(f.Ctx(), store.ScheduleTriggerParams{ID: f.NewTaskID(f.At(0)), TaskID: f.NewTaskID(f.At(0)), Now: f.At(sec(26))})
		wantErr(t, "ScheduleTrigger(unknown)", err, rota.ErrNotFound)

		all := f.allRuns(s.ID)
		if len(all) != 6 {
			t.Fatalf("%d runs, want 6", len(all))
		}
		// Newest first: fire times 25 (the regular one and the trigger), 20, ...
		for i := 1; i < len(all); i++ {
			if all[i].FireTime.After(all[i-1].FireTime) {
				t.Fatalf("runs not newest first: %v after %v", all[i].FireTime, all[i-1].FireTime)
			}
		}
		diff(t, "paged run ids", runIDs(all), f.pagedRunIDs(s.ID, 2))
		sk, err := f.ss.ScheduleRuns(f.Ctx(), store.ScheduleRunsParams{ScheduleID: s.ID, Status: rota.StatusSkipped})
		must(t, "ScheduleRuns(SKIPPED)", err)
		if len(sk.Runs) != 2 || sk.Runs[0].Reason != rota.SkipConcurrency {
			t.Fatalf("skipped runs: %+v", sk.Runs)
		}
		_, err = f.ss.ScheduleRuns(f.Ctx(), store.ScheduleRunsParams{ScheduleID: s.ID, Cursor: "garbage"})
		wantErr(t, "ScheduleRuns(bad cursor)", err, rota.ErrInvalid)

		open, err := f.ss.ScheduleOpenRuns(f.Ctx(), []string{s.ID, f.NewTaskID(f.At(0))})
		must(t, "ScheduleOpenRuns", err)
		if len(open) != 1 || len(open[s.ID]) != 4 {
			t.Fatalf("open runs: %+v", open)
		}
		// Ending one run removes it from the open runs.
		c := f.ClaimOne("w1", f.At(sec(30)), kindK)
		f.Succeed("w1", c.RunID, f.At(sec(31)))
		open, err = f.ss.ScheduleOpenRuns(f.Ctx(), []string{s.ID})
		must(t, "ScheduleOpenRuns", err)
		if len(open[s.ID]) != 3 {
			t.Fatalf("open runs after a success: %d, want 3", len(open[s.ID]))
		}
		_ = ids
	})
}
