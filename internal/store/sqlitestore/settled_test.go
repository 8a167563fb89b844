package sqlitestore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestGroupedReportTask checks that a success report settled with others
// in one statement returns the task as TaskGet reads it after the
// commit, for tasks of every shape the grouped statement settles: with a
// key, pinned workers, a timeout, a priority, with and without a result,
// a message, a task that depends on another. The statement returns only
// the columns the report did not set; the rest are filled in from the
// report.
func TestGroupedReportTask(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	now := f.At(0)
	var ps []store.TaskInsertParams
	for i := range 6 {
		p := f.Params("k", now)
		p.Payload = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		switch i {
		case 1:
			p.Key = "key-1"
		case 2:
			p.WorkerIDs = []string{"w1", "w9"}
		case 3:
			p.TimeoutSeconds, p.Priority = 60, rota.PriorityHigh
		case 4:
			p.Priority, p.MaxRetries = rota.PriorityLow, 0
		}
		ps = append(ps, p)
	}
	res, err := st.TaskInsertMany(f.Ctx(), ps)
	if err != nil {
		t.Fatal(err)
	}
	dep := f.Params("k", now)
	dep.RunAt, dep.DependsOn = now.Add(time.Hour), []string{res[5].Task.ID}
	f.Insert(dep)
	runs := f.Claim("w1", f.At(time.Second), len(ps), "k").Runs
	if len(runs) != len(ps) {
		t.Fatalf("claimed %d runs; want %d", len(runs), len(ps))
	}
	got := make([]*rota.Task, len(runs))
	before := c.Snapshot()
	together(t, st, len(runs), func(i int) error {
		p := store.RunCompleteParams{RunID: runs[i].RunID, WorkerID: "w1", Success: true, Now: f.At(2 * time.Second)}
		if i%2 == 0 {
			p.Message, p.Result = fmt.Sprintf("done %d", i), json.RawMessage(fmt.Sprintf(`{"r":%d}`, i))
		}
		var err error
		got[i], err = st.RunComplete(f.Ctx(), p)
		return err
	})
	// The hold's BEGIN and COMMIT; BEGIN, the grouped SELECT of the rows
	// and their two UPDATEs (JSON for the reports without a message or
	// result, bound rows for the others), the dependent's UPDATE
	// (dep_status) and SELECT (its id for the task returned), COMMIT: the
	// reports were settled together.
	if n := c.Snapshot().Sub(before).Total().Statements; n != 2+7 {
		t.Fatalf("the reports cost %d statements; want 9 (settled together)", n)
	}
	for i, task := range got {
		want, _ := json.Marshal(f.Get(task.ID))
		if g, _ := json.Marshal(task); string(g) != string(want) {
			t.Errorf("report %d returned\n%s\nwant (TaskGet)\n%s", i, g, want)
		}
		if task.Status != rota.StatusSuccess || len(task.Runs) != 1 || task.Runs[0].ID != runs[i].RunID {
			t.Errorf("report %d returned status %s, runs %v; want SUCCESS, its run", i, task.Status, task.Runs)
		}
	}
}

// TestGroupedReportsInstants checks a group of reports made at several
// instants: each task ends at its report's instant, as TaskGet reads it
// after the commit; the rows are written by a statement per instant up to
// four, by one statement for all beyond.
func TestGroupedReportsInstants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ instants, statements int }{{1, 1}, {3, 3}, {4, 4}, {8, 1}} {
		t.Run(fmt.Sprint(tc.instants), func(t *testing.T) {
			t.Parallel()
			var c storecost.Counter
			st := openCounted(t, &c)
			f := storetest.NewFixture(t, st)
			const n = 8
			for range n {
				f.InsertNew("k", f.At(0))
			}
			runs := f.Claim("w1", f.At(time.Second), n, "k").Runs
			got := make([]*rota.Task, n)
			at := func(i int) time.Time { return f.At(2*time.Second + time.Duration(i%tc.instants)*time.Millisecond) }
			before := c.Snapshot()
			together(t, st, n, func(i int) error {
				var err error
				got[i], err = st.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: runs[i].RunID, WorkerID: "w1", Success: true, Now: at(i)})
				return err
			})
			// The hold's BEGIN and COMMIT; BEGIN, the grouped SELECT, the
			// UPDATEs, COMMIT.
			if n, want := c.Snapshot().Sub(before).Total().Statements, int64(2+3+tc.statements); n != want {
				t.Fatalf("the reports cost %d statements; want %d", n, want)
			}
			for i, task := range got {
				if !task.EndTime.Equal(at(i)) {
					t.Errorf("report %d: end time %v; want %v", i, task.EndTime, at(i))
				}
				want, _ := json.Marshal(f.Get(task.ID))
				if g, _ := json.Marshal(task); string(g) != string(want) {
					t.Errorf("report %d returned\n%s\nwant (TaskGet)\n%s", i, g, want)
				}
			}
		})
	}
}

// TestGroupedReportLapsed checks that a report in a group whose run's
// lease lapsed before its instant is not settled with the others: it
// takes the general path, which expires the run and refuses the report,
// while the others succeed.
func TestGroupedReportLapsed(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	f := storetest.NewFixture(t, st)
	const n = 4
	for range n {
		f.InsertNew("k", f.At(0))
	}
	runs := f.Claim("w1", f.At(time.Second), n, "k").Runs
	lapsed := f.At(time.Second + time.Duration(store.DefaultHeartbeatTimeout+1)*time.Second)
	errs := make([]error, n)
	together(t, st, n, func(i int) error {
		now := f.At(2 * time.Second)
		if i == 0 {
			now = lapsed
		}
		_, errs[i] = st.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: runs[i].RunID, WorkerID: "w1", Success: true, Now: now})
		return nil
	})
	if !errors.Is(errs[0], rota.ErrLeaseLost) {
		t.Errorf("report after the lease lapsed: %v; want lease lost", errs[0])
	}
	if task := f.Get(runs[0].TaskID); task.Status == rota.StatusSuccess || len(task.Runs) != 1 || task.Runs[0].Status != rota.StatusTimeout {
		t.Errorf("task of the lapsed run: %s, runs %+v; want not SUCCESS, its run TIMEOUT", task.Status, task.Runs)
	}
	for i := 1; i < n; i++ {
		if errs[i] != nil || f.Get(runs[i].TaskID).Status != rota.StatusSuccess {
			t.Errorf("report %d: %v, task %s; want SUCCESS", i, errs[i], f.Get(runs[i].TaskID).Status)
		}
	}
}
