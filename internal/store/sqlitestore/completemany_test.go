package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// The dispatcher hands a worker's batch of reports to a store that has
// RunCompleteMany in one call (dispatch.manyCompleter).
var _ interface {
	RunCompleteMany(context.Context, []store.RunCompleteParams) ([]*rota.Task, []error)
} = (*sqlitestore.Store)(nil)

// TestRunCompleteMany checks that a batch of reports answers each as
// RunComplete would, in one group commit: successes (settled together), a
// failure that retries, a refused report (another worker's run), an
// unknown run, a second report of a run of the batch.
func TestRunCompleteMany(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	const n = 6
	for range n {
		f.InsertNew("k", f.At(0))
	}
	runs := f.Claim("w1", f.At(time.Second), n, "k").Runs
	now := f.At(2 * time.Second)
	ps := []store.RunCompleteParams{
		{RunID: runs[0].RunID, WorkerID: "w1", Success: true, Now: now},
		{RunID: runs[1].RunID, WorkerID: "w1", Success: true, Now: now, Message: "done", Result: json.RawMessage(`{"r":1}`)},
		{RunID: runs[2].RunID, WorkerID: "w1", Message: "boom", Retry: true, Now: now},
		{RunID: runs[3].RunID, WorkerID: "w2", Success: true, Now: now},
		{RunID: f.NewRunID(), WorkerID: "w1", Success: true, Now: now},
		{RunID: runs[4].RunID, WorkerID: "w1", Success: true, Now: now},
		{RunID: runs[4].RunID, WorkerID: "w1", Success: true, Now: now},
		{RunID: runs[5].RunID, WorkerID: "w1", Success: true, Now: now},
	}
	before := c.Snapshot()
	tasks, errs := st.RunCompleteMany(f.Ctx(), ps)
	if len(tasks) != len(ps) || len(errs) != len(ps) {
		t.Fatalf("%d tasks, %d errors for %d reports", len(tasks), len(errs), len(ps))
	}
	if got := c.Snapshot().Sub(before).Total().Commits; got != 1 {
		t.Errorf("the batch cost %d commits; want 1 (one group)", got)
	}
	wantErr := map[int]error{3: rota.ErrLeaseLost, 4: rota.ErrNotFound, 6: rota.ErrLeaseLost}
	for i := range ps {
		if want := wantErr[i]; want != nil {
			if !errors.Is(errs[i], want) || tasks[i] != nil {
				t.Errorf("report %d: %v, task %v; want %v, no task", i, errs[i], tasks[i], want)
			}
			continue
		}
		if errs[i] != nil || tasks[i] == nil {
			t.Fatalf("report %d: %v", i, errs[i])
		}
		want, _ := json.Marshal(f.Get(tasks[i].ID))
		if got, _ := json.Marshal(tasks[i]); string(got) != string(want) {
			t.Errorf("report %d returned\n%s\nwant (TaskGet)\n%s", i, got, want)
		}
	}
	if tasks[2].Status != rota.StatusScheduled || tasks[0].Status != rota.StatusSuccess || string(tasks[1].Result) != `{"r":1}` {
		t.Errorf("statuses %s, %s, result %s; want SUCCESS, SCHEDULED (retry), the report's", tasks[0].Status, tasks[2].Status, tasks[1].Result)
	}
	if err := st.Check(f.Ctx()); err != nil {
		t.Fatal(err)
	}
}

// TestRunCompleteManyClosed checks that a batch reported to a closed
// store fails whole, unavailable.
func TestRunCompleteManyClosed(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	f := storetest.NewFixture(t, st)
	f.InsertNew("k", f.At(0))
	run := f.ClaimOne("w1", f.At(time.Second), "k")
	st.Close()
	tasks, errs := st.RunCompleteMany(context.Background(), []store.RunCompleteParams{
		{RunID: run.RunID, WorkerID: "w1", Success: true, Now: f.At(2 * time.Second)},
		{RunID: f.NewRunID(), WorkerID: "w1", Success: true, Now: f.At(2 * time.Second)},
	})
	for i := range errs {
		if !errors.Is(errs[i], rota.ErrUnavailable) || tasks[i] != nil {
			t.Errorf("report %d to a closed store: %v, %v; want unavailable", i, errs[i], tasks[i])
		}
	}
}

// TestWriteAfterClose checks that a write to a closed store fails at once
// (ErrClosed), every time: a write could be queued into the writer's
// buffer after the writer stopped, and then wait for its outcome for ever.
func TestWriteAfterClose(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	f := storetest.NewFixture(t, st)
	st.Close()
	done := make(chan error, 1)
	go func() {
		for range 100 {
			if _, err := st.TaskInsert(context.Background(), f.Params("k", f.At(0))); !errors.Is(err, sqlitestore.ErrClosed) {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("insert into a closed store: %v; want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an insert into a closed store did not return")
	}
}
