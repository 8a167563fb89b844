package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// undoIdleStatus takes a database back to the schema before
// 0015_status_index_idle.
const undoIdleStatus = `
	DROP INDEX tasks_kind_status;
	CREATE INDEX tasks_kind_status ON tasks (kind, status);
`

// TestMigrateIdleStatusIndex opens a data directory that the store wrote
// before 0015_status_index_idle, holding tasks scheduled, running (their
// run in their row, and a multi-worker task's in run_log) and succeeded:
// its tasks are kept, tasks_kind_status leaves the running rows out, and
// the lists, counts and stats by status are those of the tasks, before
// and after a running task reports and another is claimed.
func TestMigrateIdleStatusIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rota.db")
	old, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture(t, old)
	for i := range 6 {
		f.InsertNew(fmt.Sprintf("k%d", i%2), f.At(time.Duration(i)*time.Second))
	}
	multi := f.Params("k1", f.At(10*time.Second))
	multi.Workers = 2
	f.Insert(multi)
	runs := f.Claim("w1", f.At(time.Minute), 2, "k0").Runs
	f.Succeed("w1", runs[0].RunID, f.At(time.Minute)) // k0: 1 SUCCESS, 1 RUNNING, 1 SCHEDULED
	f.Claim("w1", f.At(time.Minute), 1, "k1")         // k1: 1 RUNNING, 2 SCHEDULED and the multi-worker task
	f.Claim("w2", f.At(time.Minute), 3, "k1")         // k1: 4 RUNNING (the multi-worker task's run in run_log)
	before := f.ListAll(store.TaskListParams{})
	old.Close()
	if err := sqlitestore.ExecForTest(ctx, path, undoIdleStatus); err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.SetSchemaVersionForTest(ctx, path, sqlitestore.SchemaVersion()-1); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	defer st.Close()
	def, err := st.IndexSQLForTest(ctx, "tasks_kind_status")
	if err != nil || !strings.HasSuffix(def, "WHERE run_lease = 0") {
		t.Fatalf("tasks_kind_status after the migration: %q, %v; want WHERE run_lease = 0", def, err)
	}
	f = storetest.NewFixture(t, st)
	all := wantByStatus(t, st, "after the migration")
	if ids := taskIDs(all); !slices.Equal(ids, taskIDs(before)) {
		t.Fatalf("tasks after the migration: %v; want %v", ids, taskIDs(before))
	}
	if n := countStatus(all, rota.StatusRunning); n != 5 {
		t.Fatalf("%d RUNNING tasks after the migration; want 5", n)
	}
	f.Succeed("w1", runs[1].RunID, f.At(time.Minute+10*time.Second))
	f.Claim("w3", f.At(time.Minute+10*time.Second), 1, "k0")
	all = wantByStatus(t, st, "after a report and a claim")
	if got := [3]int{countStatus(all, rota.StatusScheduled), countStatus(all, rota.StatusRunning), countStatus(all, rota.StatusSuccess)}; got != [3]int{0, 5, 2} {
		t.Fatalf("SCHEDULED, RUNNING, SUCCESS after a report and a claim: %v; want [0 5 2]", got)
	}
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// wantByStatus checks that every list, count and stat by status of st
// agrees with its unfiltered list, which it returns.
func wantByStatus(t *testing.T, st *sqlitestore.Store, when string) []rota.Task {
	t.Helper()
	ctx := context.Background()
	all, err := st.TaskList(ctx, store.TaskListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	statuses := []rota.Status{rota.StatusScheduled, rota.StatusRunning, rota.StatusSuccess}
	for _, kind := range []string{"", "k0", "k1"} {
		for _, status := range statuses {
			p := store.TaskListParams{Kind: kind, Status: status, Limit: 1000}
			res, err := st.TaskList(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := taskIDs(res.Tasks), expectList(all.Tasks, p); !slices.Equal(got, want) {
				t.Errorf("%s: list of kind %q, %s: %v; want %v", when, kind, status, got, want)
			}
		}
		counts, err := st.TaskCountByStatus(ctx, store.TaskListParams{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		if want := expectCounts(all.Tasks, kind); fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("%s: counts of kind %q: %v; want %v", when, kind, counts, want)
		}
	}
	stats, err := st.Stats(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, ks := range stats.Kinds {
		if want := expectCounts(all.Tasks, ks.Kind); fmt.Sprint(ks.Counts) != fmt.Sprint(want) {
			t.Errorf("%s: stats of kind %q: %v; want %v", when, ks.Kind, ks.Counts, want)
		}
	}
	return all.Tasks
}

func taskIDs(tasks []rota.Task) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}

func countStatus(tasks []rota.Task, status rota.Status) int {
	n := 0
	for _, t := range tasks {
		if t.Status == status {
			n++
		}
	}
	return n
}
