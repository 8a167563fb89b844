package httpapi

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// TestTaskListFiltersAndCounts: several statuses at once, priority,
// worker and search, and the counts by status of the same filters.
func TestTaskListFiltersAndCounts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	done := e.submit(map[string]any{"kind": "f", "task": 1, "priority": "high", "key": "Nightly"})
	running := e.submit(map[string]any{"kind": "f", "task": 2})
	waiting := e.submit(map[string]any{"kind": "f", "task": 3, "priority": "low"})
	other := e.submit(map[string]any{"kind": "g", "task": 4})
	c := e.claimOne("w1", "f", 0)
	if c.TaskID != done {
		t.Fatalf("claimed %s, want the high-priority %s", c.TaskID, done)
	}
	e.ok("POST", "/api/runs/"+c.RunID+"/succeed", map[string]any{"worker_id": "w1", "message": "Mailed 3 people"}, nil)
	if c := e.claimOne("w2", "f", 0); c.TaskID != running {
		t.Fatalf("claimed %s, want %s", c.TaskID, running)
	}
	list := func(query string) string {
		t.Helper()
		var l listResponse
		e.ok("GET", "/api/tasks?"+query, nil, &l)
		var ids []string
		for _, task := range l.Tasks {
			ids = append(ids, task.TaskID)
		}
		return fmt.Sprint(ids)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"status=SUCCESS,running", []string{running, done}},
		{"status=scheduled,RUNNING&kind=f", []string{waiting, running}},
		{"status=SUCCESS,SUCCESS", []string{done}},
		{"priority=LOW", []string{waiting}},
		{"worker_id=w2", []string{running}},
		{"q=mailed", []string{done}},
		{"q=nightly", []string{done}},
		{"q=" + other, []string{other}},
		{"q=%25", nil},
	} {
		want := fmt.Sprint(tc.want)
		if tc.want == nil {
			want = "[]"
		}
		if got := list(tc.query); got != want {
			t.Errorf("GET /api/tasks?%s = %s, want %s", tc.query, got, want)
		}
	}
	var counts rotaapi.TaskCounts
	e.ok("GET", "/api/tasks/counts?kind=f&status=SUCCESS", nil, &counts)
	want := map[rota.Status]int{}
	for _, s := range rota.Statuses() {
		want[s] = 0
	}
	want[rota.StatusSuccess], want[rota.StatusRunning], want[rota.StatusScheduled] = 1, 1, 1
	if fmt.Sprint(counts.Counts) != fmt.Sprint(want) || counts.Total != 3 {
		t.Errorf("counts of kind f = %+v, want %v and total 3", counts, want)
	}
	e.ok("GET", "/api/tasks/counts?q="+url.QueryEscape("nope"), nil, &counts)
	if counts.Total != 0 {
		t.Errorf("counts of nothing: %+v", counts)
	}
	for _, tc := range []struct{ query, field string }{
		{"status=SUCCESS,bogus", "status"},
		{"status=SUCCESS,", "status"},
		{"priority=urgent", "priority"},
		{"worker_id=%00", "worker_id"},
		{"limit=5", "limit"},
	} {
		path := "/api/tasks/counts?" + tc.query
		if tc.field == "limit" {
			r := e.do("GET", path, nil)
			wantErr(t, r, rota.CodeUnknownField)
			continue
		}
		for _, p := range []string{path, "/api/tasks?" + tc.query} {
			r := e.do("GET", p, nil)
			wantErr(t, r, rota.CodeInvalid)
			if r.field() != tc.field {
				t.Errorf("GET %s: field %q, want %q", p, r.field(), tc.field)
			}
		}
	}
}
