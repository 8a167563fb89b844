package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// handOffFixture opens a counted store whose kind "k" and worker "w" are
// stored (one task inserted, claimed by w and reported).
func handOffFixture(t *testing.T) (*pgstore.Store, *storecost.Counter, *storetest.Fixture, time.Time) {
	t.Helper()
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	f.InsertNew("k", now)
	f.Succeed("w", f.ClaimOne("w", now, "k").RunID, now)
	return st, &c, f, now
}

func startFor(f *storetest.Fixture, worker string, now time.Time) store.StartFor {
	return store.StartFor{WorkerID: worker, WorkerAddress: "10.0.0.7:9000", RunID: f.NewRunID(), Now: now}
}

// TestInsertStarted: a task submitted while nothing stands in a claim's
// way is stored RUNNING with its run for the claim's worker, exactly as an
// insert and a claim at that instant leave it, in one statement, one
// commit and one row version.
func TestInsertStarted(t *testing.T) {
	t.Parallel()
	st, c, f, now := handOffFixture(t)
	ctx := t.Context()

	// The reference: inserted, then claimed by w at the same instant.
	pRef := f.Params("k", now)
	pRef.TimeoutSeconds = 60
	f.Insert(pRef)
	refRun := f.ClaimOne("w", now, "k")
	ref := f.Get(pRef.ID)
	// The reference run is w's: w may hold more than one run.

	// Warm: the statement is prepared once per connection.
	warm := startFor(f, "w", now)
	if _, run, err := st.TaskInsertStarted(ctx, f.Params("k", now), warm); err != nil || run == nil {
		t.Fatalf("warm-up: run %v, err %v; want a run", run, err)
	}
	f.Succeed("w", warm.RunID, now)

	p := f.Params("k", now)
	p.TimeoutSeconds = 60
	sp := startFor(f, "w", now)
	before := c.Snapshot()
	rowsBefore, err := st.RowWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, run, err := st.TaskInsertStarted(ctx, p, sp)
	if err != nil {
		t.Fatal(err)
	}
	cost := c.Snapshot().Sub(before).Caller
	cost.RoundTrips -= cost.Prepares // a connection prepares a statement once (see storetest.MeasureCost)
	rowsAfter, err := st.RowWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if run == nil {
		t.Fatal("TaskInsertStarted handed no run: want the task started for w")
	}
	if res.Task == nil || res.Task.ID != p.ID || res.Task.Status != rota.StatusScheduled || res.Existing {
		t.Fatalf("answer = %+v, want the task as submitted (SCHEDULED)", res)
	}
	if cost.Statements != 1 || cost.RoundTrips != 1 || cost.Commits != 1 {
		t.Errorf("cost = %+v, want 1 statement, 1 round trip, 1 commit", cost)
	}
	if got := rowsAfter["tasks"].Inserted - rowsBefore["tasks"].Inserted; got != 1 {
		t.Errorf("tasks rows inserted = %d, want 1", got)
	}
	if got := rowsAfter["tasks"].Updated - rowsBefore["tasks"].Updated; got != 0 {
		t.Errorf("tasks rows updated = %d, want 0", got)
	}
	if got := rowsAfter["kinds"].Versions() + rowsAfter["workers"].Versions() -
		rowsBefore["kinds"].Versions() - rowsBefore["workers"].Versions(); got != 0 {
		t.Errorf("kinds and workers row versions = %d, want 0", got)
	}

	// The run handed out is the one a claim would have made.
	want := refRun
	want.TaskID, want.RunID = p.ID, sp.RunID
	if run.TaskID != want.TaskID || run.RunID != want.RunID || run.Kind != want.Kind || run.Priority != want.Priority ||
		string(run.Payload) != string(want.Payload) || run.Attempt != want.Attempt ||
		run.HeartbeatTimeoutSeconds != want.HeartbeatTimeoutSeconds || run.TimeoutSeconds != want.TimeoutSeconds ||
		!run.LeaseExpiresAt.Equal(want.LeaseExpiresAt) || !run.RunAt.Equal(want.RunAt) {
		t.Errorf("run = %+v\nwant %+v", *run, want)
	}
	got := f.Get(p.ID)
	if got.Status != ref.Status || got.Attempt != ref.Attempt || !got.StartTime.Equal(ref.StartTime) ||
		got.WorkerAddress != "10.0.0.7:9000" || len(got.Runs) != 1 {
		t.Fatalf("stored task = %+v\nwant as %+v", got, ref)
	}
	r, rr := got.Runs[0], ref.Runs[0]
	if r.ID != sp.RunID || r.WorkerID != "w" || r.Status != rr.Status || r.Attempt != rr.Attempt ||
		!r.StartTime.Equal(rr.StartTime) || !r.LeaseExpiresAt.Equal(rr.LeaseExpiresAt) || !r.Deadline.Equal(rr.Deadline) {
		t.Errorf("stored run = %+v\nwant as %+v", r, rr)
	}
	// It is w's like any claimed run: heartbeats and the report go through.
	f.Heartbeat("w", sp.RunID, now.Add(time.Second))
	if done := f.Succeed("w", sp.RunID, now.Add(2*time.Second)); done.Status != rota.StatusSuccess {
		t.Errorf("after the report: %s, want SUCCESS", done.Status)
	}
	f.Succeed("w", refRun.RunID, now.Add(2*time.Second))
	f.ClaimNone("w2", now.Add(3*time.Second), "k")
}

// TestInsertStartedRefused: whatever would stop or change a claim leaves
// the task waiting (no run; claimable as if inserted alone), and a task
// that is not store.Startable is inserted as TaskInsertMany would.
func TestInsertStartedRefused(t *testing.T) {
	t.Parallel()
	yes, one := true, 1
	cases := []struct {
		name   string
		setup  func(t *testing.T, st *pgstore.Store, f *storetest.Fixture, now time.Time)
		worker string
		params func(p *store.TaskInsertParams, now time.Time)
	}{
		{name: "a task of the kind waits", setup: func(t *testing.T, st *pgstore.Store, f *storetest.Fixture, now time.Time) {
			p := f.Params("k", now)
			p.Priority = rota.PriorityLow // any level counts
			f.Insert(p)
		}},
		{name: "kind paused", setup: func(t *testing.T, st *pgstore.Store, f *storetest.Fixture, now time.Time) {
			if _, err := st.KindUpsert(t.Context(), store.KindUpsertParams{Name: "k", Paused: &yes}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "kind capped", setup: func(t *testing.T, st *pgstore.Store, f *storetest.Fixture, now time.Time) {
			if _, err := st.KindUpsert(t.Context(), store.KindUpsertParams{Name: "k", MaxRunning: &one}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "kind rate-limited", setup: func(t *testing.T, st *pgstore.Store, f *storetest.Fixture, now time.Time) {
			rate := 100.0
			if _, err := st.KindUpsert(t.Context(), store.KindUpsertParams{Name: "k", Rate: &rate}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "worker asked to stop", setup: func(t *testing.T, st *pgstore.Store, f *storetest.Fixture, now time.Time) {
			if _, err := st.WorkerStop(t.Context(), "w", now); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "worker unknown", worker: "nobody"},
		{name: "keyed", params: func(p *store.TaskInsertParams, now time.Time) { p.Key = "a-key" }},
		{name: "delayed", params: func(p *store.TaskInsertParams, now time.Time) { p.RunAt = now.Add(time.Minute) }},
		{name: "pinned", params: func(p *store.TaskInsertParams, now time.Time) { p.WorkerIDs = []string{"w"} }},
		{name: "multi-worker", params: func(p *store.TaskInsertParams, now time.Time) { p.Workers = 2 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, _, f, now := handOffFixture(t)
			if tc.setup != nil {
				tc.setup(t, st, f, now)
			}
			worker := tc.worker
			if worker == "" {
				worker = "w"
			}
			p := f.Params("k", now)
			if tc.params != nil {
				tc.params(&p, now)
			}
			res, run, err := st.TaskInsertStarted(t.Context(), p, startFor(f, worker, now))
			if err != nil {
				t.Fatal(err)
			}
			if run != nil {
				t.Fatalf("handed run %+v, want none", *run)
			}
			if res.Task == nil || res.Task.ID != p.ID || res.Existing {
				t.Fatalf("answer = %+v, want task %s inserted", res, p.ID)
			}
			got := f.Get(p.ID)
			if got.Status == rota.StatusRunning || len(got.Runs) != 0 || got.Attempt != 0 {
				t.Errorf("stored task = %+v, want it waiting, without a run", got)
			}
		})
	}
}

// TestEmptyClaimTakesNoLock: a claim that finds nothing takes no row lock
// (so its transaction gets no id and its COMMIT no WAL flush): with the
// worker's and the kind's rows locked by another transaction, it returns
// at once. With a task claimable it locks both, as every claim does (the
// worker's row orders it with WorkerStop, the kind's with the kind's
// other claims), so it waits for that transaction.
func TestEmptyClaimTakesNoLock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	st := openSchema(t, schema, "n1")
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	f.InsertNew("k", now)
	f.Succeed("w", f.ClaimOne("w", now, "k").RunID, now) // the worker's and the kind's rows exist
	f.ClaimNone("w", now, "k", "k2")                     // the worker's row names both kinds

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s+`.workers WHERE id = 'w' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s+`.kinds WHERE name = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	claimAs := func(woken bool, kinds ...string) (store.TaskClaimResult, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return st.TaskClaim(cctx, store.TaskClaimParams{WorkerID: "w", WorkerAddress: storetest.Addr("w"), Kinds: kinds, Max: 1,
			Now: now.Add(100 * time.Millisecond), NewRunID: f.NewRunID, Woken: woken})
	}
	claim := func() (store.TaskClaimResult, error) { return claimAs(false, "k") }
	if res, err := claim(); err != nil || len(res.Runs) != 0 {
		t.Fatalf("empty claim with the rows locked elsewhere = %+v, %v; want nothing at once", res, err)
	}
	// Of several kinds (their locks are separate statements), likewise.
	if res, err := claimAs(false, "k", "k2"); err != nil || len(res.Runs) != 0 {
		t.Fatalf("empty claim of two kinds with the rows locked elsewhere = %+v, %v; want nothing at once", res, err)
	}
	// After a wake-up the claim skips the probes and locks as it always
	// did: it waits.
	if res, err := claimAs(true, "k"); err == nil {
		t.Fatalf("woken empty claim with the rows locked elsewhere = %+v; want it to wait for the locks (and time out)", res)
	}
	f.InsertNew("k", now)
	if res, err := claim(); err == nil {
		t.Fatalf("claim of a claimable task with the rows locked elsewhere = %+v; want it to wait for the locks (and time out)", res)
	}
}
