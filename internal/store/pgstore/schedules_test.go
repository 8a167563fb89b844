package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// testSchedule is a schedule firing every 5 seconds, armed at now.
func testSchedule(ids *rota.IDGenerator, name string, now time.Time) rota.Schedule {
	return rota.Schedule{
		ID: ids.New(now), Name: name, Kind: "sched", Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
		CronExpr: "*/5 * * * * *", Timezone: "UTC", Enabled: true, MaxConcurrency: 1000,
		ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapParallel,
		FailureAction: rota.FailureRunNew, MisfirePolicy: rota.MisfireSkip, TimeoutSeconds: 10,
		ScheduleState: rota.ScheduleState{HighWater: now, NextFire: now.Add(5 * time.Second)},
	}
}

// fireUntilApplied fires (schedule, fire) from st as a stale or racing
// engine would: whatever the run state, it decides one run at fire and
// makes it the last run; on a conflict it reads the schedule again and
// retries. It returns the applied result.
func fireUntilApplied(ctx context.Context, st store.Store, ids *rota.IDGenerator, id string, version int64, fire time.Time) (store.ScheduleFireResult, error) {
	for range 100 {
		task := ids.New(fire)
		res, err := st.ScheduleFire(ctx, []store.ScheduleFireParams{{ID: id, Version: version, Now: fire,
			Decide: func(rs store.ScheduleRunState) (store.ScheduleDecision, error) {
				state := rs.Schedule.ScheduleState
				state.HighWater, state.LastRunID = fire, task
				return store.ScheduleDecision{State: state, Runs: []store.ScheduleRunInsert{{TaskID: task, FireTime: fire, Attempt: 1}}}, nil
			}}})
		if err != nil {
			return store.ScheduleFireResult{}, err
		}
		if !errors.Is(res[0].Err, rota.ErrConflict) {
			return res[0], res[0].Err
		}
		sc, err := st.ScheduleGet(ctx, id)
		if err != nil {
			return store.ScheduleFireResult{}, err
		}
		version = sc.Version
	}
	return store.ScheduleFireResult{}, errors.New("conflicts do not end")
}

// TestScheduleFireTwoNodes fires the same (schedule, fire time) from two
// stores on one schema (two nodes, as after a leader change with a stale
// leader still firing) at the same instant, both starting from the same
// version and retrying their conflicts: each fire time gets exactly one
// run, the other node is told it is a duplicate, and the schedule's last
// run is the run that exists.
func TestScheduleFireTwoNodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	nodes := []*pgstore.Store{openSchema(t, schema, "node-1"), openSchema(t, schema, "node-2")}
	ids := &rota.IDGenerator{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sc, err := nodes[0].ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: testSchedule(ids, "race", base), Now: base})
	if err != nil {
		t.Fatal(err)
	}
	version := sc.Version
	for round := 1; round <= 20; round++ {
		fire := base.Add(time.Duration(round) * 5 * time.Second)
		results := make([]store.ScheduleFireResult, len(nodes))
		errs := make([]error, len(nodes))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for n, st := range nodes {
			wg.Go(func() {
				<-start
				results[n], errs[n] = fireUntilApplied(ctx, st, ids, sc.ID, version, fire)
			})
		}
		close(start)
		wg.Wait()
		inserted, dups := 0, 0
		var runID string
		for n := range nodes {
			if errs[n] != nil {
				t.Fatalf("round %d, node %d: %v", round, n+1, errs[n])
			}
			inserted += len(results[n].Inserted)
			dups += len(results[n].Duplicates)
			for _, r := range results[n].Inserted {
				runID = r.TaskID
			}
			version = max(version, results[n].Schedule.Version)
		}
		if inserted != 1 || dups != 1 {
			t.Fatalf("round %d: %d inserted, %d duplicates; want 1 and 1", round, inserted, dups)
		}
		for n := range nodes {
			if got := results[n].Schedule.LastRunID; got != runID {
				t.Fatalf("round %d, node %d: LastRunID %s, want the run that exists (%s)", round, n+1, got, runID)
			}
		}
		runs, err := nodes[1].ScheduleRuns(ctx, store.ScheduleRunsParams{ScheduleID: sc.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Runs) != round || runs.Runs[0].TaskID != runID {
			t.Fatalf("round %d: %d runs (newest %+v), want %d, newest %s", round, len(runs.Runs), runs.Runs[0], round, runID)
		}
	}
	if err := nodes[0].Check(ctx); err != nil {
		t.Fatalf("store inconsistent: %v", err)
	}
}

// TestScheduleFireBatchesCrossing fires the same schedules from two nodes
// in batches given in opposite orders: the locks are taken in id order, so
// the batches wait for each other rather than deadlock, and every
// schedule gets exactly one run.
func TestScheduleFireBatchesCrossing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	nodes := []*pgstore.Store{openSchema(t, schema, "node-1"), openSchema(t, schema, "node-2")}
	ids := &rota.IDGenerator{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fire := base.Add(5 * time.Second)
	var params []store.ScheduleFireParams
	for i := range 50 {
		sc, err := nodes[0].ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: testSchedule(ids, fmt.Sprintf("s%02d", i), base), Now: base})
		if err != nil {
			t.Fatal(err)
		}
		params = append(params, store.ScheduleFireParams{ID: sc.ID, Version: sc.Version, Now: fire})
	}
	for round := range 10 {
		var wg sync.WaitGroup
		for n, st := range nodes {
			ps := slices.Clone(params)
			if n == 1 {
				slices.Reverse(ps)
			}
			for i := range ps {
				ps[i].Decide = func(rs store.ScheduleRunState) (store.ScheduleDecision, error) {
					return store.ScheduleDecision{State: rs.Schedule.ScheduleState, Runs: []store.ScheduleRunInsert{
						{TaskID: ids.New(fire), FireTime: fire.Add(time.Duration(round) * time.Second), Attempt: 1}}}, nil
				}
			}
			wg.Go(func() {
				res, err := st.ScheduleFire(ctx, ps)
				if err != nil {
					t.Errorf("round %d, node %d: %v", round, n+1, err)
					return
				}
				for i, r := range res {
					if r.Err != nil && !errors.Is(r.Err, rota.ErrConflict) {
						t.Errorf("round %d, node %d, item %d: %v", round, n+1, i, r.Err)
					}
				}
			})
		}
		wg.Wait()
		open, err := nodes[0].ScheduleOpenRuns(ctx, scheduleIDs(params))
		if err != nil {
			t.Fatal(err)
		}
		for i := range params {
			runs := open[params[i].ID]
			if len(runs) != round+1 {
				t.Fatalf("round %d: schedule %d has %d runs, want %d", round, i, len(runs), round+1)
			}
			sc, err := nodes[1].ScheduleGet(ctx, params[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			params[i].Version = sc.Version
		}
	}
	if err := nodes[0].Check(ctx); err != nil {
		t.Fatalf("store inconsistent: %v", err)
	}
}

func scheduleIDs(ps []store.ScheduleFireParams) []string {
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = ps[i].ID
	}
	return out
}

// BenchmarkScheduleFire fires 2,560 schedules per iteration, one ready run
// each, in batches of 256 sent concurrently, as the engine does, and
// reports the fires per second. Between iterations (untimed) the runs are
// ended, so that the open runs each fire reads stay few.
func BenchmarkScheduleFire(b *testing.B) {
	const schedules, batch = 2560, 256
	ctx := context.Background()
	schema := newSchema(b)
	st := openSchema(b, schema, "bench")
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	ids := &rota.IDGenerator{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	params := make([]store.ScheduleFireParams, schedules)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < schedules; i += 16 {
				sc, err := st.ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: testSchedule(ids, fmt.Sprintf("s%05d", i), base), Now: base})
				if err != nil {
					b.Error(err)
					return
				}
				params[i] = store.ScheduleFireParams{ID: sc.ID, Version: sc.Version}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		fire := base.Add(time.Duration(n+1) * 5 * time.Second)
		for i := range params {
			params[i].Now = fire
			params[i].Decide = func(rs store.ScheduleRunState) (store.ScheduleDecision, error) {
				state := rs.Schedule.ScheduleState
				id := ids.New(fire)
				state.HighWater, state.NextFire, state.LastRunID = fire, fire.Add(5*time.Second), id
				return store.ScheduleDecision{State: state, Runs: []store.ScheduleRunInsert{{TaskID: id, FireTime: fire, Attempt: 1}}}, nil
			}
		}
		for lo := 0; lo < schedules; lo += batch {
			wg.Go(func() {
				res, err := st.ScheduleFire(ctx, params[lo:lo+batch])
				if err != nil {
					b.Error(err)
					return
				}
				for j, r := range res {
					if r.Err != nil || len(r.Inserted) != 1 {
						b.Errorf("item %d: err %v, %d inserted", lo+j, r.Err, len(r.Inserted))
						return
					}
					params[lo+j].Version = r.Schedule.Version
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "tasks"}.Sanitize()+`
			SET status = 'SUCCESS', avail = false, end_time = $1 WHERE NOT done`, fire.UnixMilli()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*schedules)/b.Elapsed().Seconds(), "fires/s")
}

// TestScheduleFireSameScheduleTwice gives one schedule twice in a call,
// the second item at the version the first makes: the items apply one
// after the other, the second seeing the first's run.
func TestScheduleFireSameScheduleTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := open(t).(*pgstore.Store)
	ids := &rota.IDGenerator{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sc, err := st.ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: testSchedule(ids, "twice", base), Now: base})
	if err != nil {
		t.Fatal(err)
	}
	first, second := ids.New(base), ids.New(base)
	var seen store.ScheduleRunState
	decide := func(id string, fire time.Time) func(store.ScheduleRunState) (store.ScheduleDecision, error) {
		return func(rs store.ScheduleRunState) (store.ScheduleDecision, error) {
			seen = rs
			state := rs.Schedule.ScheduleState
			state.LastRunID = id
			return store.ScheduleDecision{State: state, Runs: []store.ScheduleRunInsert{{TaskID: id, FireTime: fire, Attempt: 1}}}, nil
		}
	}
	res, err := st.ScheduleFire(ctx, []store.ScheduleFireParams{
		{ID: sc.ID, Version: sc.Version, Now: base.Add(5 * time.Second), Decide: decide(first, base.Add(5*time.Second))},
		{ID: sc.ID, Version: sc.Version + 1, Now: base.Add(10 * time.Second), Decide: decide(second, base.Add(10*time.Second))},
		{ID: sc.ID, Version: sc.Version + 1, Now: base.Add(10 * time.Second), Decide: decide(ids.New(base), base.Add(15*time.Second))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || len(res[0].Inserted) != 1 || len(res[1].Inserted) != 1 {
		t.Fatalf("results: %+v", res)
	}
	if !errors.Is(res[2].Err, rota.ErrConflict) {
		t.Fatalf("third item (stale version): err %v, want a conflict", res[2].Err)
	}
	if len(seen.Open) != 1 || seen.Last == nil || seen.Last.TaskID != first {
		t.Fatalf("the second item saw open %+v, last %+v", seen.Open, seen.Last)
	}
	if res[1].Schedule.Version != sc.Version+2 || res[1].Schedule.LastRunID != second {
		t.Fatalf("after both: version %d, last %s", res[1].Schedule.Version, res[1].Schedule.LastRunID)
	}
}

// TestScheduleFireNotifies checks that a fire notifies the kinds of the
// runs it made claimable (ready and released ones) to other nodes.
func TestScheduleFireNotifies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	a, b := openSchema(t, schema, "node-a"), openSchema(t, schema, "node-b")
	notes := storetest.Subscribe(t, b)
	warmUp(t, storetest.NewFixture(t, a), notes)
	ids := &rota.IDGenerator{}
	base := time.Now().UTC().Truncate(time.Second)
	sc, err := a.ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: testSchedule(ids, "n", base), Now: base})
	if err != nil {
		t.Fatal(err)
	}
	held := ids.New(base)
	res, err := a.ScheduleFire(ctx, []store.ScheduleFireParams{{ID: sc.ID, Version: sc.Version, Now: base,
		Decide: func(rs store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{State: rs.Schedule.ScheduleState, Runs: []store.ScheduleRunInsert{
				{TaskID: held, FireTime: base, Attempt: 1, Held: true}}}, nil
		}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("fire held: %v %v", err, res)
	}
	if n, ok := waitFor(notes, "sched", 300*time.Millisecond); ok {
		t.Fatalf("a held run was announced: %+v", n)
	}
	res, err = a.ScheduleFire(ctx, []store.ScheduleFireParams{{ID: sc.ID, Version: res[0].Schedule.Version, Now: base,
		Decide: func(rs store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{State: rs.Schedule.ScheduleState, Release: []string{held}}, nil
		}}})
	if err != nil || res[0].Err != nil || len(res[0].Released) != 1 {
		t.Fatalf("release: %v %+v", err, res)
	}
	if _, ok := waitFor(notes, "sched", 10*time.Second); !ok {
		t.Fatal("no notification for a released run")
	}
	res, err = a.ScheduleFire(ctx, []store.ScheduleFireParams{{ID: sc.ID, Version: res[0].Schedule.Version, Now: base,
		Decide: func(rs store.ScheduleRunState) (store.ScheduleDecision, error) {
			return store.ScheduleDecision{State: rs.Schedule.ScheduleState, Runs: []store.ScheduleRunInsert{
				{TaskID: ids.New(base), FireTime: base.Add(5 * time.Second), RunAt: base.Add(5 * time.Second), Attempt: 1}}}, nil
		}}})
	if err != nil || res[0].Err != nil || len(res[0].Inserted) != 1 {
		t.Fatalf("fire ahead: %v %+v", err, res)
	}
	n, ok := waitFor(notes, "sched", 10*time.Second)
	if !ok || !n.RunAt.Equal(base.Add(5*time.Second)) {
		t.Fatalf("notification of a run due later: %+v (heard: %v), want RunAt %v", n, ok, base.Add(5*time.Second))
	}
}
