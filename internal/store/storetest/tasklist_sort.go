package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// testTaskListMore: sorted task lists and their cursors, the schedule and
// time-range filters, the history aggregate and the deletion of finished
// tasks (the stores' side of the UI's bulk actions and charts).
func testTaskListMore(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "Sort", taskListSort)
	parallel(t, ns, "Ranges", taskListRanges)
	parallel(t, ns, "History", taskHistory)
	parallel(t, ns, "DeleteFinished", taskDeleteFinished)
}

// sortFixture inserts 7 tasks created one second apart whose run_at
// values collide (ties are broken by id) and returns them in creation
// order.
func sortFixture(f *Fixture) []*rota.Task {
	runAts := []int{50, 40, 50, 10, 40, 50, 30}
	var out []*rota.Task
	for i, r := range runAts {
		p := f.Params(kindK, f.At(sec(i)))
		p.RunAt = f.At(sec(r))
		out = append(out, f.Insert(p))
	}
	return out
}

// taskListSort: every sort lists each task once, in the order of its
// column then id, and paging by 2 gives the same order as one page.
func taskListSort(t *testing.T, f *Fixture) {
	tasks := sortFixture(f)
	for _, name := range []string{"run_at", "-run_at", "created", "-created", "finished", "-finished"} {
		s, err := store.ParseTaskSort(name)
		must(t, "ParseTaskSort", err)
		want := make([]*rota.Task, len(tasks))
		copy(want, tasks)
		slices.SortStableFunc(want, func(a, b *rota.Task) int {
			va, vb := sortKey(s.Field, a), sortKey(s.Field, b)
			c := va.Compare(vb)
			if c == 0 {
				c = compareStrings(a.ID, b.ID)
			}
			if !s.Asc {
				c = -c
			}
			return c
		})
		var wantIDs []string
		for _, w := range want {
			wantIDs = append(wantIDs, w.ID)
		}
		diff(t, "sort "+name, wantIDs, ids(f.ListAll(store.TaskListParams{Sort: s})))
		var paged []string
		p := store.TaskListParams{Sort: s, Limit: 2}
		for range 10 {
			res := f.List(p)
			paged = append(paged, ids(res.Tasks)...)
			if res.NextCursor == "" {
				break
			}
			p.Cursor = res.NextCursor
		}
		diff(t, "sort "+name+" by pages of 2", wantIDs, paged)
	}
	// A sorted list with a filter and a cursor keeps the filter.
	s, _ := store.ParseTaskSort("run_at")
	res := f.List(store.TaskListParams{Sort: s, Limit: 1, RunBefore: f.At(sec(45))})
	next := f.List(store.TaskListParams{Sort: s, Limit: 10, RunBefore: f.At(sec(45)), Cursor: res.NextCursor})
	diff(t, "filtered sorted pages", []string{tasks[3].ID}, ids(res.Tasks))
	diff(t, "filtered sorted rest", []string{tasks[6].ID, tasks[1].ID, tasks[4].ID}, ids(next.Tasks))
	if _, err := store.ParseTaskSort("payload"); err == nil {
		t.Fatal("ParseTaskSort(payload) accepted")
	}
	if _, _, err := store.ParseSortCursor(tasks[0].ID); err == nil {
		t.Fatal("ParseSortCursor accepted a plain id")
	}
}

func sortKey(field string, t *rota.Task) time.Time {
	switch field {
	case "created":
		return t.CreatedAt
	case "run_at":
		return t.RunAt
	}
	return t.EndTime
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// taskListRanges: created, run at and finished ranges (after inclusive,
// before exclusive; finished ranges match finished tasks only) and the
// schedule filter, with the counts over the same filters.
func taskListRanges(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(sec(0)))
	b := f.InsertNew(kindK, f.At(sec(10)))
	p := f.Params(kindK, f.At(sec(20)))
	p.ScheduleID, p.FireTime = "nightly", f.At(sec(20))
	p.RunAt = f.At(sec(100))
	c := f.Insert(p)
	run := f.ClaimOne("w", f.At(sec(30)), kindK) // a
	f.Succeed("w", run.RunID, f.At(sec(40)))
	run = f.ClaimOne("w", f.At(sec(50)), kindK) // b
	f.Succeed("w", run.RunID, f.At(sec(60)))
	for _, tc := range []struct {
		name string
		p    store.TaskListParams
		want []string
	}{
		{"created after", store.TaskListParams{CreatedAfter: f.At(sec(10))}, []string{c.ID, b.ID}},
		{"created before", store.TaskListParams{CreatedBefore: f.At(sec(10))}, []string{a.ID}},
		{"created between", store.TaskListParams{CreatedAfter: f.At(sec(5)), CreatedBefore: f.At(sec(15))}, []string{b.ID}},
		{"run after", store.TaskListParams{RunAfter: f.At(sec(60))}, []string{c.ID}},
		{"run before", store.TaskListParams{RunBefore: f.At(sec(10))}, []string{a.ID}},
		{"finished after", store.TaskListParams{FinishedAfter: f.At(sec(50))}, []string{b.ID}},
		{"finished before", store.TaskListParams{FinishedBefore: f.At(sec(50))}, []string{a.ID}},
		{"finished before far", store.TaskListParams{FinishedBefore: f.At(sec(1000))}, []string{b.ID, a.ID}},
		{"schedule", store.TaskListParams{ScheduleID: "nightly"}, []string{c.ID}},
		{"other schedule", store.TaskListParams{ScheduleID: "weekly"}, nil},
	} {
		got := ids(f.ListAll(tc.p))
		if len(tc.want) == 0 && len(got) == 0 {
			continue
		}
		diff(t, tc.name, tc.want, got)
	}
	counts, err := f.Store.TaskCountByStatus(f.Ctx(), store.TaskListParams{FinishedBefore: f.At(sec(1000))})
	must(t, "TaskCountByStatus", err)
	diff(t, "counts of finished", map[rota.Status]int{rota.StatusSuccess: 2}, counts)
}

// taskHistory: finished tasks aggregated by bucket of end time, with
// outcome counts, queue wait and duration; unfinished ones left out.
func taskHistory(t *testing.T, f *Fixture) {
	f.InsertNew(kindK, f.At(sec(0)))
	f.InsertNew(kindK, f.At(sec(1)))
	f.InsertNew(kindK, f.At(sec(2)))
	f.InsertNew(kindK, f.At(sec(3))) // never claimed
	r := f.ClaimOne("w", f.At(sec(10)), kindK)
	f.Succeed("w", r.RunID, f.At(sec(14))) // bucket 0: wait 10 s, took 4 s
	r = f.ClaimOne("w", f.At(sec(61)), kindK)
	f.Succeed("w", r.RunID, f.At(sec(62))) // bucket 1: wait 60 s, took 1 s (the next waited 61 s)
	r = f.ClaimOne("w", f.At(sec(63)), kindK)
	f.Complete(store.RunCompleteParams{RunID: r.RunID, WorkerID: "w", Message: "no", Now: f.At(sec(70))}) // bucket 1: failed, took 7 s
	h, err := f.Store.TaskHistory(f.Ctx(), store.HistoryParams{From: f.At(0), Bucket: time.Minute, Buckets: 3})
	must(t, "TaskHistory", err)
	if len(h) != 3 || !h[1].Start.Equal(f.At(time.Minute)) {
		t.Fatalf("buckets: %+v", h)
	}
	got := [][]int64{}
	for _, b := range h {
		got = append(got, []int64{int64(b.Succeeded), int64(b.Failed), int64(b.Started), b.WaitSumMs, b.WaitMaxMs, b.DurationSumMs, b.DurationMaxMs})
	}
	diff(t, "history", [][]int64{{1, 0, 1, 10000, 10000, 4000, 4000}, {1, 1, 2, 121000, 61000, 8000, 7000}, {0, 0, 0, 0, 0, 0, 0}}, got)
}

// taskDeleteFinished: only finished tasks go, with their runs; unknown
// ids are ignored.
func taskDeleteFinished(t *testing.T, f *Fixture) {
	done := f.InsertNew(kindK, f.At(sec(0)))
	open := f.InsertNew(kindK, f.At(sec(1)))
	r := f.ClaimOne("w", f.At(sec(2)), kindK)
	f.Succeed("w", r.RunID, f.At(sec(3)))
	n, err := f.Store.TaskDeleteFinished(f.Ctx(), []string{done.ID, open.ID, f.NewTaskID(f.At(sec(9)))})
	must(t, "TaskDeleteFinished", err)
	if n != 1 {
		t.Fatalf("deleted %d, want 1", n)
	}
	diff(t, "left", []string{open.ID}, ids(f.ListAll(store.TaskListParams{})))
	if left := f.ListAll(store.TaskListParams{WorkerID: "w"}); len(left) != 0 {
		t.Fatalf("runs of the deleted task still list it: %v", ids(left))
	}
}
