package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestInsertGroupCommit submits single tasks from many goroutines at once:
// they must share transactions (fewer commits than inserts), and each must
// be committed when its insert returns (another store on the schema, with
// connections of its own, reads it at once).
func TestInsertGroupCommit(t *testing.T) {
	t.Parallel()
	const clients, each = 32, 8
	var c storecost.Counter
	schema := newSchema(t)
	ctx := t.Context()
	st, err := pgstore.New(ctx, pgstore.Config{URL: testURL(), Schema: schema, NodeID: "n1", Cost: &c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other := openSchema(t, schema, "n2")
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	f.InsertNew("k", now) // the kind's row exists: every insert below is one statement
	ps := make([][]store.TaskInsertParams, clients)
	for i := range ps {
		for range each {
			ps[i] = append(ps[i], f.Params("k", now))
		}
	}
	before := c.Snapshot()
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	for i := range clients {
		wg.Go(func() {
			for _, p := range ps[i] {
				res, err := st.TaskInsert(ctx, p)
				if err != nil {
					errs <- err
					return
				}
				// Acknowledged: committed, so visible to any connection.
				if _, err := other.TaskGet(ctx, res.Task.ID); err != nil {
					errs <- errors.Join(errors.New("acknowledged insert not visible elsewhere"), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d := c.Snapshot().Sub(before).Caller
	t.Logf("%d single inserts from %d clients: %v", clients*each, clients, d)
	if d.Commits >= clients*each {
		t.Errorf("%d single inserts took %d commits: want them to share transactions", clients*each, d.Commits)
	}
	list := f.ListAll(store.TaskListParams{Kind: "k"})
	if len(list) != clients*each+1 {
		t.Errorf("%d tasks stored, want %d", len(list), clients*each+1)
	}
}

// TestInsertGroupIsolatesErrors inserts a group in which one request
// reuses a stored task's id: that request alone fails (conflict), the
// others are inserted and answered with their own tasks.
func TestInsertGroupIsolatesErrors(t *testing.T) {
	t.Parallel()
	st := open(t).(*pgstore.Store)
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	taken := f.InsertNew("k", now)
	good1 := []store.TaskInsertParams{f.Params("k", now), f.Params("other", now)}
	bad := f.Params("k", now)
	bad.ID = taken.ID
	good2 := []store.TaskInsertParams{f.Params("k", now)}
	outs, errs := pgstore.InsertGroup(st, t.Context(), [][]store.TaskInsertParams{good1, {bad}, good2})
	if !errors.Is(errs[1], rota.ErrConflict) {
		t.Errorf("request with a taken id: err %v, want a conflict", errs[1])
	}
	for i, want := range map[int][]store.TaskInsertParams{0: good1, 2: good2} {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if len(outs[i]) != len(want) {
			t.Fatalf("request %d: %d results, want %d", i, len(outs[i]), len(want))
		}
		for j, p := range want {
			if got := outs[i][j].Task; got.ID != p.ID || got.Kind != p.Kind {
				t.Errorf("request %d result %d: task %s (%s), want %s (%s)", i, j, got.ID, got.Kind, p.ID, p.Kind)
			}
			f.Get(p.ID) // stored
		}
	}

	// A group that commits whole: one transaction for all its requests.
	var c storecost.Counter
	counted := openCounted(t, &c)
	g := storetest.NewFixture(t, counted)
	g.InsertNew("k", now) // the kind's row (a transaction)
	reqs := make([][]store.TaskInsertParams, 5)
	for i := range reqs {
		reqs[i] = []store.TaskInsertParams{g.Params("k", now)}
	}
	before := c.Snapshot()
	_, errs = pgstore.InsertGroup(counted, t.Context(), reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// One INSERT … unnest of the group's tasks outside a transaction
	// block, a transaction of its own (BEGIN, INSERT and COMMIT before;
	// then a COPY, which costs more than an INSERT below copyMinRows).
	// (A preparation is the connection's, once.)
	if d := c.Snapshot().Sub(before).Caller; d.Statements != 1 || d.RoundTrips-d.Prepares != 1 || d.Commits != 1 {
		t.Errorf("a group of %d single inserts: %v, want 1 statement, 1 round trip (besides prepares), 1 commit", len(reqs), d)
	}
}

// TestInsertStatementBySize checks both ways an unkeyed insert of known
// kinds goes: below CopyMinRows one INSERT, from it on one COPY, each
// outside a transaction block (one statement, one round trip, one commit),
// and every task stored as given either way.
func TestInsertStatementBySize(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	f.InsertNew("k", now) // the kind's row (a transaction)
	for _, n := range []int{1, 2, pgstore.CopyMinRows - 1, pgstore.CopyMinRows, 100} {
		batch := func() []store.TaskInsertParams {
			ps := make([]store.TaskInsertParams, n)
			for i := range ps {
				ps[i] = f.Params("k", now)
				ps[i].Priority = rota.Priorities()[i%3]
				ps[i].Payload = []byte(fmt.Sprintf(`{"i":%d}`, i))
				ps[i].WorkerIDs = []string{"w1"}[:i%2]
			}
			return ps
		}
		ps := batch()
		before := c.Snapshot()
		if _, err := st.TaskInsertMany(t.Context(), ps); err != nil {
			t.Fatalf("%d tasks: %v", n, err)
		}
		// A preparation is the connection's, once (the pool may hand
		// out one that has not prepared the statement yet).
		if d := c.Snapshot().Sub(before).Caller; d.Statements != 1 || d.RoundTrips-d.Prepares != 1 || d.Commits != 1 {
			t.Errorf("%d tasks: %v, want 1 statement, 1 round trip (besides prepares), 1 commit", n, d)
		}
		for _, p := range ps {
			got := f.Get(p.ID)
			if got.Kind != p.Kind || got.Priority.Level() != p.Priority.Level() || string(got.Payload) != string(p.Payload) ||
				len(got.WorkerIDs) != len(p.WorkerIDs) || got.Status != rota.StatusScheduled {
				t.Errorf("%d tasks: stored %+v, want the params %+v", n, got, p)
			}
		}
	}
}

// TestInsertCopyFields inserts a batch large enough for COPY (its rows
// written by hand in the binary format) whose tasks vary every column
// COPY fills, and reads each back as the store's answer gave it.
func TestInsertCopyFields(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	f.InsertNew("k", now) // the kind is known: the batch goes by COPY
	var ps []store.TaskInsertParams
	for i := range 40 {
		p := f.Params("k", now)
		switch i % 5 {
		case 0:
			p.WorkerIDs = []string{"w1"}
		case 1:
			p.WorkerIDs, p.Workers = []string{"w1", "wé-2"}, 2
			p.Priority = rota.PriorityHigh
		case 2:
			p.Payload = nil // NULL
			p.Priority = rota.PriorityLow
		case 3:
			p.RunAt = now.Add(time.Duration(i) * time.Hour)
			p.TimeoutSeconds, p.HeartbeatTimeoutSeconds, p.MaxRetries = 60+i, 5+i, i
		case 4:
			p.Payload = []byte(`{"s":"é\u00e9 \"q\"","a":[1,2.5,null,true]}`)
		}
		ps = append(ps, p)
	}
	before := c.Snapshot()
	res, err := st.TaskInsertMany(t.Context(), ps)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Snapshot().Sub(before).Caller; d.Statements != 1 || d.Commits != 1 {
		t.Errorf("the batch took %+v, want one COPY (one statement, its own commit)", d)
	}
	for i, p := range ps {
		got := f.Get(res[i].Task.ID)
		want := p.NewTask()
		if got.Kind != want.Kind || got.Priority != want.Priority || string(got.Payload) != string(want.Payload) ||
			got.Status != rota.StatusScheduled || got.MaxRetries != want.MaxRetries || got.Workers != want.Workers ||
			fmt.Sprint(got.WorkerIDs) != fmt.Sprint(want.WorkerIDs) || got.TimeoutSeconds != want.TimeoutSeconds ||
			got.HeartbeatTimeoutSeconds != want.HeartbeatTimeoutSeconds || !got.CreatedAt.Equal(want.CreatedAt) ||
			!got.RunAt.Equal(want.RunAt) {
			t.Errorf("task %d read back as\n%+v\nwant\n%+v", i, got, want)
		}
	}
}
