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
	// Each case: a leader-only write under a term, and a check that it did
	// or did not apply. setup prepares the work the write would do.
	type write struct {
		name  string
		setup func(f *Fixture) (apply func(term int64, now time.Time) error, applied func() bool)
	}
	writes := []write{
		{"RunExpire", func(f *Fixture) (func(int64, time.Time) error, func() bool) {
			f.InsertNew(kindK, f.At(0))
			c := f.ClaimOne("w1", f.At(0), kindK) // lease: 30 s
			return func(term int64, now time.Time) error {
					_, err := f.Store.RunExpire(f.Ctx(), store.RunExpireParams{Now: now, Limit: 10, Term: term})
					return err
				}, func() bool {
					return runByID(f.TB, f.Get(c.TaskID), c.RunID).Status != rota.StatusRunning
				}
		}},
		{"TaskCleanup", func(f *Fixture) (func(int64, time.Time) error, func() bool) {
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
		}},
		{"ScheduleFire", func(f *Fixture) (func(int64, time.Time) error, func() bool) {
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
		}},
	}

	// The deposed leader's late write: a took over term 1, b took over after
	// a's lease passed; a, still believing it leads, writes with term 1.
	for _, w := range writes {
		parallel(t, ns, w.name+"/DeposedLeaderRefused", func(t *testing.T, f *Fixture) {
			apply, applied := w.setup(f)
			a := elect(f, "a", f.At(sec(1)))
			b := elect(f, "b", f.At(sec(40)))
			if !b.Leader || b.Term == a.Term {
				t.Fatalf("b after a's lease = %+v, want b leads with a new term (a had %d)", b, a.Term)
			}
			err := apply(a.Term, f.At(sec(45)))
			wantErr(t, "write under the deposed term", err, store.ErrFenced)
			if applied() {
				t.Fatal("a fenced write changed the store")
			}
			if err := apply(b.Term, f.At(sec(45))); err != nil {
				t.Fatalf("write under the current term: %v", err)
			}
			if !applied() {
				t.Fatal("the current leader's write did not apply")
			}
		})
	}

	parallel(t, ns, "LeaseLapsedRefused", func(t *testing.T, f *Fixture) {
		apply, applied := writes[0].setup(f) // the run's lease passes at +30 s
		a := elect(f, "a", f.At(sec(25)))
		// Nobody took over, but a's lease passed: a must not act.
		wantErr(t, "write after the lease passed", apply(a.Term, f.At(sec(25)+fenceTTL)), store.ErrFenced)
		if applied() {
			t.Fatal("a fenced write changed the store")
		}
	})

	parallel(t, ns, "ResignedRefused", func(t *testing.T, f *Fixture) {
		apply, applied := writes[0].setup(f)
		a := elect(f, "a", f.At(sec(35))) // leads until +45 s
		if err := f.Store.LeaderResign(f.Ctx(), "a"); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "write after resigning", apply(a.Term, f.At(sec(40))), store.ErrFenced)
		if applied() {
			t.Fatal("a fenced write changed the store")
		}
	})

	parallel(t, ns, "NeverElectedRefused", func(t *testing.T, f *Fixture) {
		apply, applied := writes[1].setup(f)
		wantErr(t, "write with a term nobody was elected for", apply(7, f.At(sec(40))), store.ErrFenced)
		if applied() {
			t.Fatal("a fenced write changed the store")
		}
	})

	parallel(t, ns, "FutureTermRefused", func(t *testing.T, f *Fixture) {
		apply, applied := writes[2].setup(f)
		a := elect(f, "a", f.At(sec(1)))
		wantErr(t, "write with a term ahead of the current one", apply(a.Term+1, f.At(sec(2))), store.ErrFenced)
		if applied() {
			t.Fatal("a fenced write changed the store")
		}
	})

	parallel(t, ns, "TermZeroUnfenced", func(t *testing.T, f *Fixture) {
		apply, applied := writes[0].setup(f)
		elect(f, "a", f.At(sec(1))) // someone leads; an unfenced write ignores it
		if err := apply(0, f.At(sec(40))); err != nil {
			t.Fatalf("unfenced write: %v", err)
		}
		if !applied() {
			t.Fatal("the unfenced write did not apply")
		}
	})
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
