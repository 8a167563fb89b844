package storetest

import (
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// taskListFiltersMore is the FiltersMore subtest of testTaskList: several
// statuses at once, priority, worker, search by id, key or message (LIKE
// wildcards taken literally), and TaskCountByStatus over the same filters
// but the statuses.
func taskListFiltersMore(t *testing.T, f *Fixture) {
	insert := func(kind string, prio rota.Priority, key string, at int) *rota.Task {
		p := f.Params(kind, f.At(sec(at)))
		p.Priority, p.Key = prio, key
		return f.Insert(p)
	}
	done := insert("a", rota.PriorityHigh, "Nightly-Report", 0)
	running := insert("a", rota.PriorityLow, "", 1)
	waiting := insert("b", rota.PriorityMid, "x_y", 2)
	percent := insert("a", rota.PriorityMid, "100%done", 3)
	c := f.ClaimOne("w1", f.At(sec(10)), "a") // done: high priority first
	_, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Success: true,
		Message: "SMTP down, sent later", Now: f.At(sec(11))})
	must(t, "RunComplete", err)
	if c2 := f.ClaimOne("w2", f.At(sec(12)), "a"); c2.TaskID != percent.ID { // mid before low
		t.Fatalf("second claim got %s, want %s", c2.TaskID, percent.ID)
	}
	_ = running
	for _, tc := range []struct {
		name string
		p    store.TaskListParams
		want []*rota.Task
	}{
		{"two statuses", store.TaskListParams{Statuses: []rota.Status{rota.StatusSuccess, rota.StatusRunning}}, []*rota.Task{percent, done}},
		{"statuses and kind", store.TaskListParams{Kind: "b", Statuses: []rota.Status{rota.StatusScheduled, rota.StatusRunning}}, []*rota.Task{waiting}},
		{"priority", store.TaskListParams{Priority: rota.PriorityLow}, []*rota.Task{running}},
		{"worker", store.TaskListParams{WorkerID: "w1"}, []*rota.Task{done}},
		{"search message", store.TaskListParams{Search: "smtp"}, []*rota.Task{done}},
		{"search key", store.TaskListParams{Search: "NIGHTLY"}, []*rota.Task{done}},
		{"search id", store.TaskListParams{Search: waiting.ID}, []*rota.Task{waiting}},
		{"search percent", store.TaskListParams{Search: "%"}, []*rota.Task{percent}},
		{"search underscore", store.TaskListParams{Search: "_"}, []*rota.Task{waiting}},
		{"nothing", store.TaskListParams{Search: "nope"}, nil},
	} {
		var want []string
		for _, w := range tc.want {
			want = append(want, w.ID)
		}
		got := ids(f.ListAll(tc.p))
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		diff(t, tc.name, want, got)
	}
	counts, err := f.Store.TaskCountByStatus(f.Ctx(), store.TaskListParams{Kind: "a", Statuses: []rota.Status{rota.StatusSuccess}, Limit: 1})
	must(t, "TaskCountByStatus", err)
	diff(t, "counts of kind a", map[rota.Status]int{rota.StatusSuccess: 1, rota.StatusRunning: 1, rota.StatusScheduled: 1}, counts)
	counts, err = f.Store.TaskCountByStatus(f.Ctx(), store.TaskListParams{Search: "zzz"})
	must(t, "TaskCountByStatus", err)
	if len(counts) != 0 {
		t.Fatalf("counts of no task: %v", counts)
	}
}
