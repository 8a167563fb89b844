package sqlitestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestMigrateLean opens a database of the schema before 0011_lean (runs a
// table, no run in task rows) with the new code: its tasks and runs are
// kept, a run running at the upgrade still heartbeats and reports, its
// dependent is released by the migrated dependency bookkeeping, a retried
// task's next run goes to its row after its older runs, and the invariants
// hold throughout.
func TestMigrateLean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newDatabase(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids rota.IDGenerator
	old := base.Add(-time.Hour) // the runs of the old database are older than any new one
	r1, r2, r3 := ids.New(old), ids.New(old), ids.New(old)
	at := func(d time.Duration) int64 { return base.Add(d).UnixMilli() }
	err := sqlitestore.ExecForTest(ctx, path, undoIdleStatus+undoPinnedWaiting+undoStatusIndex+undoPush+sqlitestore.UndoLeanForTest()+fmt.Sprintf(`
		INSERT INTO kinds (name) VALUES ('k');
		INSERT INTO tasks (id, kind, level, payload, status, done, avail, attempt, successes, failures, running, max_retries,
			workers, timeout_s, hb_timeout_s, created_at, run_at, start_time, end_time, deps_waiting, updated_at) VALUES
			('t1', 'k', 1, '{}', 'SUCCESS',   1, 0, 1, 1, 0, 0, 3, 1, 0, 30, %[1]d, %[1]d, %[1]d, %[1]d, 0, %[1]d),
			('t2', 'k', 1, '{}', 'RUNNING',   0, 0, 1, 0, 0, 1, 3, 1, 0, 30, %[1]d, %[1]d, %[1]d, 0,      0, %[1]d),
			('t3', 'k', 1, '{}', 'SCHEDULED', 0, 1, 1, 0, 1, 0, 3, 1, 0, 30, %[1]d, %[1]d, %[1]d, 0,      0, %[1]d),
			('t4', 'k', 1, '{}', 'WAITING',   0, 0, 0, 0, 0, 0, 3, 1, 0, 30, %[1]d, %[1]d, 0,      0,      1, %[1]d);
		INSERT INTO runs (id, task_id, kind, worker_id, attempt, status, start_time, end_time, lease_expires_at, expires_at) VALUES
			('%[3]s', 't1', 'k', 'w1', 1, 'SUCCESS', %[1]d, %[1]d, 0, 0),
			('%[4]s', 't2', 'k', 'w1', 1, 'RUNNING', %[1]d, 0, %[2]d, %[2]d),
			('%[5]s', 't3', 'k', 'w2', 1, 'FAILED',  %[1]d, %[1]d, 0, 0);
		INSERT INTO task_deps (task_id, dep_id) VALUES ('t4', 't2');`, at(0), at(30*time.Second), r1, r2, r3))
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.SetSchemaVersionForTest(ctx, path, sqlitestore.SchemaVersion()-5); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	defer st.Close()
	check := func(when string) {
		t.Helper()
		if err := st.Check(ctx); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	check("after the migration")
	f := storetest.NewFixture(t, st)
	wantRuns(t, f.Get("t1"), r1+" SUCCESS")
	wantRuns(t, f.Get("t2"), r2+" RUNNING")

	// The run running at the upgrade heartbeats and reports; its end
	// releases its dependent.
	f.Heartbeat("w1", r2, f.At(10*time.Second))
	done := f.Succeed("w1", r2, f.At(20*time.Second))
	if done.Status != rota.StatusSuccess || len(done.Dependents) != 1 || done.Dependents[0] != "t4" {
		t.Fatalf("t2 after its report: %s, dependents %v; want SUCCESS, [t4]", done.Status, done.Dependents)
	}
	if got := f.Get("t4"); got.Status != rota.StatusScheduled {
		t.Fatalf("t4 after t2 succeeded: %s; want SCHEDULED", got.Status)
	}
	check("after the report")

	// The retried task's next run is kept in its row, after its history.
	c := f.ClaimOne("w3", f.At(30*time.Second), "k")
	if c.TaskID != "t3" || c.Attempt != 2 {
		t.Fatalf("claimed %s attempt %d; want t3 attempt 2", c.TaskID, c.Attempt)
	}
	wantRuns(t, f.Get("t3"), r3+" FAILED", c.RunID+" RUNNING")
	f.Succeed("w3", c.RunID, f.At(31*time.Second))
	wantRuns(t, f.Get("t3"), r3+" FAILED", c.RunID+" SUCCESS")
	check("after the retry")
}

// wantRuns checks task's runs, oldest first, as "id STATUS".
func wantRuns(t *testing.T, task *rota.Task, want ...string) {
	t.Helper()
	var got []string
	for _, r := range task.Runs {
		got = append(got, r.ID+" "+string(r.Status))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs of %s: %v; want %v", task.ID, got, want)
	}
}
