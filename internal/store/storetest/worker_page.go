package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func testWorkerPage(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "ListPage", workerListPage)
	parallel(t, ns, "ListFilters", workerListFilters)
	parallel(t, ns, "Deregister", workerDeregister)
	parallel(t, ns, "DeregisterUnknown", workerDeregisterUnknown)
	parallel(t, ns, "Prune", workerPrune)
	parallel(t, ns, "PingWrite", pingWrite)
	parallel(t, ns, "KindsBounded", workerKindsBounded)
	parallel(t, ns, "RunsActive", workerRunsActive)
	parallel(t, ns, "PinnedWaiting", pinnedWaiting)
}

// pinnedWaiting is the PinnedWaiting subtest: claimable pinned tasks by
// kind and named workers (in any order), with the oldest ready time;
// unpinned, future and running tasks are left out.
func pinnedWaiting(t *testing.T, f *Fixture) {
	pin := func(kind string, at time.Duration, workers ...string) {
		p := f.Params(kind, f.At(at))
		p.WorkerIDs = workers
		f.Insert(p)
	}
	pin("a", sec(2), "w2", "w1")
	pin("a", sec(1), "w1", "w2")
	pin("a", sec(3), "w3")
	pin("b", sec(4), "w1")
	pin("b", sec(100), "w9")  // not due yet
	f.InsertNew("a", f.At(0)) // not pinned
	pin("c", sec(1), "w5")
	f.ClaimOne("w5", f.At(sec(5)), "c") // running: not claimable
	got, err := f.Store.TaskPinnedWaiting(f.Ctx(), f.At(sec(10)))
	must(t, "TaskPinnedWaiting", err)
	diff(t, "pinned waiting", []store.PinnedWaiting{
		{Kind: "a", WorkerIDs: []string{"w1", "w2"}, Oldest: f.At(sec(1))},
		{Kind: "a", WorkerIDs: []string{"w3"}, Oldest: f.At(sec(3))},
		{Kind: "b", WorkerIDs: []string{"w1"}, Oldest: f.At(sec(4))},
	}, got)
}

// workerRunsActive is the RunsActive subtest: the running runs of the
// workers asked for, oldest start first; finished runs, other workers and
// workers holding none are left out.
func workerRunsActive(t *testing.T, f *Fixture) {
	for range 3 {
		f.InsertNew(kindK, f.At(0))
	}
	a := f.ClaimOne("w1", f.At(sec(1)), kindK)
	b := f.ClaimOne("w1", f.At(sec(2)), kindK)
	c := f.ClaimOne("w2", f.At(sec(3)), kindK)
	f.claimWait("idle", f.At(sec(3)), 0, "x")
	_, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: c.RunID, WorkerID: "w2", Success: true, Now: f.At(sec(4))})
	must(t, "RunComplete", err)
	got, err := f.Store.WorkerRunsActive(f.Ctx(), []string{"w1", "w2", "idle", "nope"})
	must(t, "WorkerRunsActive", err)
	want := map[string][]rota.WorkerRun{"w1": {
		{RunID: a.RunID, TaskID: a.TaskID, Kind: kindK, StartedAt: f.At(sec(1))},
		{RunID: b.RunID, TaskID: b.TaskID, Kind: kindK, StartedAt: f.At(sec(2))},
	}}
	diff(t, "runs of w1, w2, idle, nope", want, got)
	none, err := f.Store.WorkerRunsActive(f.Ctx(), nil)
	must(t, "WorkerRunsActive(none)", err)
	if len(none) != 0 {
		t.Fatalf("WorkerRunsActive(nil) = %+v, want empty", none)
	}
}

// workerKindsBounded is the KindsBounded subtest: the kinds of a worker's
// claims accumulate up to store.MaxWorkerKinds; past it the record keeps
// the latest claim's kinds.
func workerKindsBounded(t *testing.T, f *Fixture) {
	batch := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%03d", prefix, i)
		}
		return out
	}
	f.claimWait("w1", f.At(0), 0, batch("a", 60)...)
	f.claimWait("w1", f.At(sec(1)), 0, batch("b", 40)...)
	if got := len(f.worker("w1", f.At(sec(1))).Kinds); got != 100 {
		t.Fatalf("after 60 + 40 kinds: %d kinds, want 100", got)
	}
	f.claimWait("w1", f.At(sec(2)), 0, batch("c", 10)...)
	diff(t, "kinds past the bound", batch("c", 10), f.worker("w1", f.At(sec(2))).Kinds)
}

// workerIDs lists the ids of ws.
func workerIDs(ws []rota.Worker) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

// page calls WorkerListPage and fails the test on error.
func (f *Fixture) page(p store.WorkerListParams) store.WorkerListResult {
	f.TB.Helper()
	res, err := f.Store.WorkerListPage(f.Ctx(), p)
	must(f.TB, "WorkerListPage", err)
	return res
}

// workerListPage is the ListPage subtest: pages by id, with the cursor of
// the last worker of a page; the last page has no cursor.
func workerListPage(t *testing.T, f *Fixture) {
	for _, w := range []string{"w3", "w1", "w5", "w2", "w4"} {
		f.claimWait(w, f.At(0), 0, kindK)
	}
	now := f.At(sec(1))
	var got []string
	cursor := ""
	for range 10 {
		res := f.page(store.WorkerListParams{Limit: 2, Cursor: cursor, Now: now})
		if len(res.Workers) > 2 {
			t.Fatalf("page of limit 2 has %d workers", len(res.Workers))
		}
		got = append(got, workerIDs(res.Workers)...)
		if res.NextCursor == "" {
			break
		}
		if res.NextCursor != res.Workers[len(res.Workers)-1].ID {
			t.Fatalf("NextCursor %q, want the last worker's id", res.NextCursor)
		}
		cursor = res.NextCursor
	}
	diff(t, "workers over pages", []string{"w1", "w2", "w3", "w4", "w5"}, got)
	if res := f.page(store.WorkerListParams{Limit: 5, Now: now}); res.NextCursor != "" || len(res.Workers) != 5 {
		t.Fatalf("one full page: %d workers, cursor %q; want 5 and none", len(res.Workers), res.NextCursor)
	}
	all := f.page(store.WorkerListParams{Now: now})
	diff(t, "default page", f.workers(now), all.Workers)
}

// workerListFilters is the ListFilters subtest: by kind and by status at
// Now (active, lost, stopped by an operator or by deregistering).
func workerListFilters(t *testing.T, f *Fixture) {
	f.claimWait("active", f.At(sec(100)), 0, "a", "b")
	f.claimWait("lost", f.At(0), 0, "b")
	f.claimWait("stopped", f.At(sec(100)), 0, "a")
	f.claimWait("dereg", f.At(sec(100)), 0, "c")
	_, err := f.Store.WorkerStop(f.Ctx(), "stopped", f.At(sec(100)))
	must(t, "WorkerStop", err)
	_, err = f.Store.WorkerDeregister(f.Ctx(), "dereg", f.At(sec(101)))
	must(t, "WorkerDeregister", err)
	now := f.At(sec(102))
	for _, tc := range []struct {
		status rota.WorkerStatus
		kind   string
		want   []string
	}{
		{"", "", []string{"active", "dereg", "lost", "stopped"}},
		{"", "a", []string{"active", "stopped"}},
		{"", "b", []string{"active", "lost"}},
		{"", "zz", []string{}},
		{rota.WorkerActive, "", []string{"active"}},
		{rota.WorkerLost, "", []string{"lost"}},
		{rota.WorkerStopped, "", []string{"dereg", "stopped"}},
		{rota.WorkerStopped, "a", []string{"stopped"}},
		{rota.WorkerLost, "a", []string{}},
	} {
		res := f.page(store.WorkerListParams{Status: tc.status, Kind: tc.kind, Now: now})
		diff(t, "workers of status "+string(tc.status)+" kind "+tc.kind, tc.want, workerIDs(res.Workers))
		for _, w := range res.Workers {
			if tc.status != "" && w.Status != tc.status {
				t.Fatalf("filter %s returned %s with status %s", tc.status, w.ID, w.Status)
			}
		}
	}
}

// workerDeregister is the Deregister subtest: a worker that stopped
// gracefully lists as stopped once it holds no runs, not lost; claiming
// again makes it active, and it gets work (a deregistered worker is not
// drained).
func workerDeregister(t *testing.T, f *Fixture) {
	f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	w, err := f.Store.WorkerDeregister(f.Ctx(), "w1", f.At(sec(2)))
	must(t, "WorkerDeregister", err)
	if w.ID != "w1" || w.Status != rota.WorkerActive || w.Running != 1 || w.StopRequested {
		t.Fatalf("deregistered while holding a run: %+v; want active, Running 1, no stop request", w)
	}
	_, err = f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Release: true, Now: f.At(sec(3))})
	must(t, "RunComplete(release)", err)
	for _, at := range []time.Duration{sec(3), time.Hour} {
		if got := f.worker("w1", f.At(at)); got.Status != rota.WorkerStopped {
			t.Fatalf("deregistered worker at +%v: %s, want stopped", at, got.Status)
		}
	}
	res := f.claimWait("w1", f.At(time.Hour), 0, kindK)
	if res.Drain || len(res.Runs) != 1 {
		t.Fatalf("claim after deregistering: drain %v, %d runs; want work", res.Drain, len(res.Runs))
	}
	if got := f.worker("w1", f.At(time.Hour)); got.Status != rota.WorkerActive {
		t.Fatalf("worker claiming again: %s, want active", got.Status)
	}
}

// workerDeregisterUnknown is the DeregisterUnknown subtest.
func workerDeregisterUnknown(t *testing.T, f *Fixture) {
	_, err := f.Store.WorkerDeregister(f.Ctx(), "nope", f.At(0))
	wantErr(t, "WorkerDeregister(unknown)", err, rota.ErrNotFound)
}

// workerPrune is the Prune subtest: workers not seen since SeenBefore
// (their last claim's wait included) and holding no run are deleted, up to
// Limit, others stay.
func workerPrune(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.HeartbeatTimeoutSeconds = 3600
	f.Insert(p)
	f.claimWait("old1", f.At(0), 0, "x")
	f.claimWait("old2", f.At(sec(1)), 0, "x")
	f.claimWait("waiting", f.At(sec(1)), 60*time.Second, "x") // seen until 61s
	f.claimWait("holder", f.At(0), 0, kindK)                  // holds a run
	f.claimWait("recent", f.At(sec(100)), 0, "x")
	if got := f.worker("holder", f.At(0)); got.Running != 1 {
		t.Fatalf("holder runs %d, want 1", got.Running)
	}
	n, err := f.Store.WorkerPrune(f.Ctx(), store.WorkerPruneParams{SeenBefore: f.At(sec(50)), Limit: 1})
	must(t, "WorkerPrune", err)
	if n != 1 {
		t.Fatalf("WorkerPrune with Limit 1 deleted %d", n)
	}
	n, err = f.Store.WorkerPrune(f.Ctx(), store.WorkerPruneParams{SeenBefore: f.At(sec(50))})
	must(t, "WorkerPrune", err)
	if n != 1 {
		t.Fatalf("second WorkerPrune deleted %d, want 1", n)
	}
	diff(t, "workers after pruning", []string{"holder", "recent", "waiting"}, workerIDs(f.workers(f.At(sec(100)))))
}

// pingWrite is the PingWrite subtest: it succeeds, repeatedly, and
// changes nothing listed.
func pingWrite(t *testing.T, f *Fixture) {
	for i := range 3 {
		must(t, "PingWrite", f.Store.PingWrite(f.Ctx(), f.At(sec(i))))
	}
	if ws := f.workers(f.At(0)); len(ws) != 0 {
		t.Fatalf("PingWrite listed workers: %+v", ws)
	}
}
