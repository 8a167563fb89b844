package sqlitestore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestPinnedWaitingIndex: the no-worker alarm's read of the pinned tasks
// waiting goes through tasks_pinned_waiting (0014), which holds only
// available pinned tasks, not through the table, and still finds every
// group.
func TestPinnedWaitingIndex(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	plan, err := st.PinnedWaitingPlanForTest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "tasks_pinned_waiting") {
		t.Errorf("plan %q, want it to read tasks_pinned_waiting", got)
	}

	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	for range 50 {
		f.InsertNew("a", now) // unpinned: not in the index
	}
	pin := func(kind string, at time.Time, workers ...string) {
		p := f.Params(kind, at)
		p.WorkerIDs = workers
		f.Insert(p)
	}
	pin("a", now, "w1")
	pin("a", now.Add(-time.Second), "w1")
	pin("b", now, "w2", "w3")
	pin("b", now.Add(time.Hour), "w4") // not due yet
	got, err := st.TaskPinnedWaiting(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != "a" || strings.Join(got[0].WorkerIDs, ",") != "w1" || !got[0].Oldest.Equal(now.Add(-time.Second)) ||
		got[1].Kind != "b" || strings.Join(got[1].WorkerIDs, ",") != "w2,w3" || !got[1].Oldest.Equal(now) {
		t.Errorf("TaskPinnedWaiting = %+v, want a (w1, oldest 1 s earlier) and b (w2,w3, now)", got)
	}
}
