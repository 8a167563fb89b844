package sqlitestore_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
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
	// The hold's BEGIN and COMMIT; BEGIN, the grouped UPDATE … RETURNING,
	// the dependent's UPDATE (dep_status) and SELECT (its id for the
	// task returned), COMMIT: the reports were settled together.
	if n := c.Snapshot().Sub(before).Total().Statements; n != 2+5 {
		t.Fatalf("the reports cost %d statements; want 7 (settled together)", n)
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
