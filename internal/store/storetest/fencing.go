package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// fenceTTL is the leader lease of the fencing tests.
const fenceTTL = 10 * time.Second

// testFencing covers the fencing of leader-only writes (store.CheckFence):
// RunExpire, TaskCleanup and ScheduleFire apply under the current term and
// are refused with store.ErrFenced, changing nothing, under a deposed one.
func testFencing(t *testing.T, ns newStoreFunc) {
	writes := []struct {
		name  string
		setup fencedWriteSetup
	}{
		{"RunExpire", setupFencedExpire},
		{"TaskCleanup", setupFencedCleanup},
		{"ScheduleFire", setupFencedFire},
	}
	for _, w := range writes {
		parallel(t, ns, w.name+"/DeposedLeaderRefused", func(t *testing.T, f *Fixture) {
			fencingDeposedLeaderRefused(t, f, w.setup)
		})
	}

	parallel(t, ns, "LeaseLapsedRefused", fencingLeaseLapsedRefused)

	parallel(t, ns, "ResignedRefused", fencingResignedRefused)

	parallel(t, ns, "NeverElectedRefused", fencingNeverElectedRefused)

	parallel(t, ns, "FutureTermRefused", fencingFutureTermRefused)

	parallel(t, ns, "TermZeroUnfenced", fencingTermZeroUnfenced)
}

// fencedWriteSetup prepares the work of a leader-only write and returns
// the write under a term and a check that it did apply.
type fencedWriteSetup func(f *Fixture) (apply func(term int64, now time.Time) error, applied func() bool)

// setupFencedExpire claims a task whose run's lease passes at +30 s; the
// write expires it.
func setupFencedExpire(f *Fixture) (func(int64, time.Time) error, func() bool) {
	f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(0), kindK) // lease: 30 s
	return func(term int64, now time.Time) error {
			_, err := f.Store.RunExpire(f.Ctx(), store.RunExpireParams{Now: now, Limit: 10, Term: term})
			return err
		}, func() bool {
			return runByID(f.TB, f.Get(c.TaskID), c.RunID).Status != rota.StatusRunning
		}
}

// setupFencedCleanup finishes a task of a kind kept for 1 s; the write
// deletes it.
func setupFencedCleanup(f *Fixture) (func(int64, time.Time) error, func() bool) {
	keep := 1
	if _, err := f.Store.KindUpsert(f.Ctx(), store.KindUpsertParams{Name: kindK, RetentionSeconds: &keep}); err != nil {
		f.TB.Fatal(err)
	}
	task := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(0), kindK)
	f.Succeed("w1", c.RunID, f.At(sec(1)))
	return func(term int64, now time.Time) error {
			_, err := f.Store.TaskCleanup(f.Ctx(), store.TaskCleanupParams{Now: now, Limit: 10, Term: term})
			return err
		}, func() bool {
			_, err := f.Store.TaskGet(f.Ctx(), task.ID)
			return errors.Is(err, rota.ErrNotFound)
		}
}

// setupFencedFire stores a schedule; the write fires it once.
func setupFencedFire(f *Fixture) (func(int64, time.Time) error, func() bool) {
	sc := fenceSchedule(f)
	return func(term int64, now time.Time) error {
			_, err := f.Store.ScheduleFire(f.Ctx(), []store.ScheduleFireParams{{ID: sc.ID, Version: sc.Version, Now: now, Term: term,
				Decide: func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
					return store.ScheduleDecision{State: st.Schedule.ScheduleState,
						Runs: []store.ScheduleRunInsert{{TaskID: f.NewTaskID(now), FireTime: now, Attempt: 1}}}, nil
				}}})
			return err
		}, func() bool {
			got, err := f.Store.ScheduleGet(f.Ctx(), sc.ID)
			if err != nil {
				f.TB.Fatal(err)
			}
			return got.Version != sc.Version
		}
}

// wantFenced fails t unless the write's err is store.ErrFenced and it
// changed nothing.
func wantFenced(t *testing.T, what string, err error, applied func() bool) {
	t.Helper()
	wantErr(t, what, err, store.ErrFenced)
	if applied() {
		t.Fatal("a fenced write changed the store")
	}
}

// fencingDeposedLeaderRefused is the deposed leader's late write: a took
// over term 1, b took over after a's lease passed; a, still believing it
// leads, writes with term 1.
func fencingDeposedLeaderRefused(t *testing.T, f *Fixture, setup fencedWriteSetup) {
	apply, applied := setup(f)
	a := elect(f, "a", f.At(sec(1)))
	b := elect(f, "b", f.At(sec(40)))
	if !b.Leader || b.Term == a.Term {
		t.Fatalf("b after a's lease = %+v, want b leads with a new term (a had %d)", b, a.Term)
	}
	wantFenced(t, "write under the deposed term", apply(a.Term, f.At(sec(45))), applied)
	if err := apply(b.Term, f.At(sec(45))); err != nil {
		t.Fatalf("write under the current term: %v", err)
	}
	if !applied() {
		t.Fatal("the current leader's write did not apply")
	}
}

// fencingLeaseLapsedRefused: nobody took over, but a's lease passed: a
// must not act.
func fencingLeaseLapsedRefused(t *testing.T, f *Fixture) {
	apply, applied := setupFencedExpire(f) // the run's lease passes at +30 s
	a := elect(f, "a", f.At(sec(25)))
	wantFenced(t, "write after the lease passed", apply(a.Term, f.At(sec(25)+fenceTTL)), applied)
}

// fencingResignedRefused: a leader that resigned must not act.
func fencingResignedRefused(t *testing.T, f *Fixture) {
	apply, applied := setupFencedExpire(f)
	a := elect(f, "a", f.At(sec(35))) // leads until +45 s
	if err := f.Store.LeaderResign(f.Ctx(), "a"); err != nil {
		t.Fatal(err)
	}
	wantFenced(t, "write after resigning", apply(a.Term, f.At(sec(40))), applied)
}

// fencingNeverElectedRefused: a term nobody was elected for is refused.
func fencingNeverElectedRefused(t *testing.T, f *Fixture) {
	apply, applied := setupFencedCleanup(f)
	wantFenced(t, "write with a term nobody was elected for", apply(7, f.At(sec(40))), applied)
}

// fencingFutureTermRefused: a term ahead of the current one is refused.
func fencingFutureTermRefused(t *testing.T, f *Fixture) {
	apply, applied := setupFencedFire(f)
	a := elect(f, "a", f.At(sec(1)))
	wantFenced(t, "write with a term ahead of the current one", apply(a.Term+1, f.At(sec(2))), applied)
}

// fencingTermZeroUnfenced: term 0 is an unfenced write, which applies
// whoever leads.
func fencingTermZeroUnfenced(t *testing.T, f *Fixture) {
	apply, applied := setupFencedExpire(f)
	elect(f, "a", f.At(sec(1))) // someone leads; an unfenced write ignores it
	if err := apply(0, f.At(sec(40))); err != nil {
		t.Fatalf("unfenced write: %v", err)
	}
	if !applied() {
		t.Fatal("the unfenced write did not apply")
	}
}

// elect runs one election round for node at now with fenceTTL.
func elect(f *Fixture, node string, now time.Time) store.LeaderElectResult {
	f.TB.Helper()
	res, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams(node, fenceTTL, now))
	if err != nil {
		f.TB.Fatalf("elect %s: %v", node, err)
	}
	return res
}

// fenceSchedule stores an enabled schedule of kindK.
func fenceSchedule(f *Fixture) *rota.Schedule {
	f.TB.Helper()
	now := f.At(0)
	sc, err := f.Store.ScheduleInsert(f.Ctx(), store.ScheduleInsertParams{Now: now, Schedule: rota.Schedule{
		ID: f.NewTaskID(now), Name: "fenced", Kind: kindK, Priority: rota.PriorityMid,
		Payload: json.RawMessage(`{}`), CronExpr: "*/5 * * * * *", Timezone: "UTC", Enabled: true,
		MaxConcurrency: 1, ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapAllow,
		FailureAction: rota.FailureRunNew, MisfirePolicy: rota.MisfireSkip, CatchupLimit: 3, TimeoutSeconds: 10,
		ScheduleState: rota.ScheduleState{HighWater: now, NextFire: now.Add(5 * time.Second)},
	}})
	if err != nil {
		f.TB.Fatalf("ScheduleInsert: %v", err)
	}
	return sc
}
