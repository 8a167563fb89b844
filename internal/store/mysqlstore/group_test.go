package mysqlstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/mysqlstore/mysqltest"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestCompleteGroup applies a group mixing good reports with a report on
// an unknown run, one by the wrong worker and one past its lease: each
// failure is its own (the others commit), and the lapsed run is expired
// on the spot as a lone report would; a second report of a run the group
// ended loses its lease.
func TestCompleteGroup(t *testing.T) {
	t.Parallel()
	st := openDB(t, mysqltest.NewDatabase(t), "n1", nil)
	f := storetest.NewFixture(t, st)
	var runs []string
	for i := range 4 {
		f.InsertNew("g", f.At(time.Duration(i)*time.Millisecond))
	}
	for range 4 {
		runs = append(runs, f.ClaimOne("w1", f.At(time.Second), "g").RunID)
	}
	late := f.At(time.Second + 31*time.Second) // past the 30 s lease
	now := f.At(2 * time.Second)
	ps := []store.RunCompleteParams{
		{RunID: runs[0], WorkerID: "w1", Success: true, Now: now},
		{RunID: "no-such-run", WorkerID: "w1", Success: true, Now: now},
		{RunID: runs[1], WorkerID: "w2", Success: true, Now: now},
		{RunID: runs[2], WorkerID: "w1", Success: true, Now: late},
		{RunID: runs[3], WorkerID: "w1", Message: "boom", Now: now},
		{RunID: runs[0], WorkerID: "w1", Success: true, Now: now}, // again: it ended
	}
	tasks, errs := mysqlstore.CompleteGroup(st, t.Context(), ps)
	want := []error{nil, rota.ErrNotFound, rota.ErrLeaseLost, rota.ErrLeaseLost, nil, rota.ErrLeaseLost}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || w != nil && !errors.Is(errs[i], w) {
			t.Errorf("report %d: error %v, want %v", i, errs[i], w)
		}
	}
	if tasks[0] == nil || tasks[0].Status != rota.StatusSuccess || len(tasks[0].Runs) != 1 {
		t.Fatalf("report 0: task %+v, want SUCCESS with its run", tasks[0])
	}
	if tasks[4] == nil || tasks[4].Status != rota.StatusFailed {
		t.Fatalf("report 4: task %+v, want FAILED", tasks[4])
	}
	// The lapsed run was expired by its report; the wrong worker's run runs on.
	for i, wantRun := range map[int]rota.Status{1: rota.StatusRunning, 2: rota.StatusTimeout} {
		got, err := st.TaskGet(t.Context(), tasksOf(t, st, runs[i]))
		if err != nil {
			t.Fatal(err)
		}
		if r := got.Runs[len(got.Runs)-1]; r.Status != wantRun {
			t.Errorf("run %d ended %s, want %s", i, r.Status, wantRun)
		}
	}
	if err := st.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// tasksOf returns the task of run id.
func tasksOf(t *testing.T, st *mysqlstore.Store, runID string) string {
	t.Helper()
	res, err := st.TaskList(t.Context(), store.TaskListParams{WorkerID: "w1", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range res.Tasks {
		full, err := st.TaskGet(t.Context(), tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range full.Runs {
			if r.ID == runID {
				return tk.ID
			}
		}
	}
	t.Fatalf("no task has run %s", runID)
	return ""
}

// TestCompleteGroupRetry settles a retried failure in a group (set-based:
// the task is claimable again at once) and its second attempt in the next
// group (per report: its first run is in run_history), beside a plain
// report each time.
func TestCompleteGroupRetry(t *testing.T) {
	t.Parallel()
	st := openDB(t, mysqltest.NewDatabase(t), "n1", nil)
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	for range 3 {
		f.InsertNew("g", f.At(0))
	}
	runs := f.Claim("w1", now, 2, "g").Runs
	noBackoff := func(int) time.Duration { return 0 }
	tasks, errs := mysqlstore.CompleteGroup(st, t.Context(), []store.RunCompleteParams{
		{RunID: runs[0].RunID, WorkerID: "w1", Retry: true, Message: "boom", Backoff: noBackoff, Now: now},
		{RunID: runs[1].RunID, WorkerID: "w1", Success: true, Now: now},
	})
	if errs[0] != nil || errs[1] != nil || tasks[0].Status != rota.StatusScheduled || tasks[1].Status != rota.StatusSuccess {
		t.Fatalf("first group: %v, %v; tasks %+v, %+v", errs[0], errs[1], tasks[0], tasks[1])
	}
	again := f.Claim("w1", now, 2, "g").Runs
	if len(again) != 2 {
		t.Fatalf("claimed %d, want the retried task and the third", len(again))
	}
	ps := make([]store.RunCompleteParams, len(again))
	for i, r := range again {
		ps[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now}
	}
	tasks, errs = mysqlstore.CompleteGroup(st, t.Context(), ps)
	for i, tk := range tasks {
		if errs[i] != nil || tk.Status != rota.StatusSuccess {
			t.Fatalf("second group, report %d: %v, task %+v", i, errs[i], tk)
		}
		wantRuns := 1
		if tk.ID == runs[0].TaskID {
			wantRuns = 2
		}
		if len(tk.Runs) != wantRuns || tk.Runs[len(tk.Runs)-1].Status != rota.StatusSuccess {
			t.Errorf("task %s: runs %+v, want %d ending SUCCESS", tk.ID, tk.Runs, wantRuns)
		}
	}
	if err := st.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}
