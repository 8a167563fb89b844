package httpapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
)

// TestDepsBatchGraph submits a graph in one batch (refs), follows it
// through claims and reads the links back on the task pages and the list.
func TestDepsBatchGraph(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var b batchResponse
	e.ok("POST", "/api/tasks/batch", map[string]any{"tasks": []any{
		map[string]any{"kind": "dg", "task": 1, "ref": "a"},
		map[string]any{"kind": "dg", "task": 2, "ref": "b", "depends_on": []string{"ref:a"}},
		map[string]any{"kind": "dg", "task": 3, "depends_on": []string{"ref:a", "ref:b"}},
	}}, &b)
	a, bID, c := b.Results[0].TaskID, b.Results[1].TaskID, b.Results[2].TaskID
	for _, id := range []string{bID, c} {
		if got := e.task(id).Status; got != rota.StatusWaiting {
			t.Fatalf("task %s: status %s, want WAITING", id, got)
		}
	}
	got := e.task(bID)
	if !slices.Equal(got.DependsOn, []string{a}) || !slices.Equal(got.Dependents, []string{c}) {
		t.Fatalf("b: depends_on %v dependents %v, want [%s] [%s]", got.DependsOn, got.Dependents, a, c)
	}
	var l listResponse
	e.ok("GET", "/api/tasks?depends_on="+a, nil, &l)
	if len(l.Tasks) != 2 || l.Tasks[0].TaskID != c || l.Tasks[1].TaskID != bID {
		t.Fatalf("list depends_on=a: %+v, want c then b", l.Tasks)
	}

	for _, want := range []string{a, bID, c} {
		cl := e.claimOne("w1", "dg", 0)
		if cl.TaskID != want {
			t.Fatalf("claimed %s, want %s", cl.TaskID, want)
		}
		if n := len(e.claim("w1", []string{"dg"}, 1, 0).Tasks); n != 0 {
			t.Fatalf("claimed %d more tasks while %s runs, want none", n, want)
		}
		e.succeed(cl.RunID, "w1")
	}
}

// TestDepsFailureCancels: a parent's final failure cancels the chain.
func TestDepsFailureCancels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.submit(map[string]any{"kind": "df", "task": 1, "max_retries": 0})
	b := e.submit(map[string]any{"kind": "df", "task": 2, "depends_on": []string{a}})
	c := e.submit(map[string]any{"kind": "df", "task": 3, "depends_on": []string{b}})
	cl := e.claimOne("w1", "df", 0)
	e.fail(cl.RunID, "w1")
	for _, id := range []string{b, c} {
		got := e.task(id)
		if got.Status != rota.StatusCanceled || !strings.HasPrefix(got.Message, "dependency_failed") {
			t.Fatalf("task %s: %s %q, want CANCELED dependency_failed…", id, got.Status, got.Message)
		}
	}
}

// TestDepsErrors: bad dependencies are 400 naming the field.
func TestDepsErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	real := e.submit(map[string]any{"kind": "de", "task": 1})
	missing := strings.Repeat("0", 31) + "1"
	many := make([]string, 101)
	for i := range many {
		many[i] = real
	}
	cases := []struct {
		name, path string
		body       any
		field      string
	}{
		{"unknown id", "/api/tasks", map[string]any{"kind": "de", "task": 1, "depends_on": []string{real, missing}}, "depends_on"},
		{"bad id", "/api/tasks", map[string]any{"kind": "de", "task": 1, "depends_on": []string{"nope"}}, "depends_on[0]"},
		{"ref outside a batch", "/api/tasks", map[string]any{"kind": "de", "task": 1, "depends_on": []string{"ref:a"}}, "depends_on[0]"},
		{"ref field outside a batch", "/api/tasks", map[string]any{"kind": "de", "task": 1, "ref": "a"}, "ref"},
		{"too many", "/api/tasks", map[string]any{"kind": "de", "task": 1, "depends_on": many}, "depends_on"},
		{"unknown ref", "/api/tasks/batch", map[string]any{"tasks": []any{
			map[string]any{"kind": "de", "task": 1, "ref": "a"},
			map[string]any{"kind": "de", "task": 1, "depends_on": []string{"ref:b"}},
		}}, "tasks[1].depends_on[0]"},
		{"later ref (no cycle)", "/api/tasks/batch", map[string]any{"tasks": []any{
			map[string]any{"kind": "de", "task": 1, "ref": "a", "depends_on": []string{"ref:b"}},
			map[string]any{"kind": "de", "task": 1, "ref": "b", "depends_on": []string{"ref:a"}},
		}}, "tasks[0].depends_on[0]"},
		{"duplicate ref", "/api/tasks/batch", map[string]any{"tasks": []any{
			map[string]any{"kind": "de", "task": 1, "ref": "a"},
			map[string]any{"kind": "de", "task": 1, "ref": "a"},
		}}, "tasks[1].ref"},
		{"unknown id in a batch", "/api/tasks/batch", map[string]any{"tasks": []any{
			map[string]any{"kind": "de", "task": 1},
			map[string]any{"kind": "de", "task": 1, "depends_on": []string{missing}},
		}}, "tasks[1].depends_on"},
		{"bad filter", "/api/tasks?depends_on=x", nil, "depends_on"},
	}
	for _, c := range cases {
		method := "POST"
		if c.body == nil {
			method = "GET"
		}
		r := e.do(method, c.path, c.body)
		wantErr(t, r, rota.CodeInvalid)
		if r.field() != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, r.field(), c.field, r)
		}
	}
	var l listResponse
	e.ok("GET", "/api/tasks?kind=de", nil, &l)
	if len(l.Tasks) != 1 {
		t.Fatalf("%d tasks of kind de after refused submits, want 1", len(l.Tasks))
	}
}

// TestDepsReleaseWakesWaiters: a worker long-polling the dependent's kind
// gets it as soon as its parent (of another kind) succeeds, not at its
// next safety poll.
func TestDepsReleaseWakesWaiters(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.dispatch.SafetyPoll = time.Minute })
	a := e.submit(map[string]any{"kind": "dwp", "task": 1})
	b := e.submit(map[string]any{"kind": "dwc", "task": 2, "depends_on": []string{a}})
	got := make(chan apiResp, 1)
	go func() {
		r, err := sendRequest(e.url, "POST", "/api/workers/claim",
			map[string]any{"worker_id": "w2", "kinds": []string{"dwc"}, "max": 1, "wait_seconds": 20})
		if err != nil {
			r.Message = err.Error()
		}
		got <- r
	}()
	waitFor(t, 5*time.Second, "the dependent's worker to wait", func() bool { return e.disp.Waiting("dwc") > 0 })
	cl := e.claimOne("w1", "dwp", 0)
	start := time.Now()
	e.succeed(cl.RunID, "w1")
	select {
	case r := <-got:
		var c claimed
		if err := json.Unmarshal(r.Data, &c); err != nil || len(c.Tasks) != 1 || c.Tasks[0].TaskID != b {
			t.Fatalf("waiting claim: %v, want task %s", r, b)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiting claim did not get the released dependent within 10s")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("released dependent claimed after %s, want at once", d)
	}
}

// TestDepsStopCancelsChain: stopping a waiting parent cancels its
// dependents at once; its own parent is untouched.
func TestDepsStopCancelsChain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.submit(map[string]any{"kind": "ds", "task": 1})
	b := e.submit(map[string]any{"kind": "ds", "task": 2, "depends_on": []string{a}})
	c := e.submit(map[string]any{"kind": "ds", "task": 3, "depends_on": []string{b}})
	e.ok("POST", "/api/tasks/stop/"+b, map[string]any{}, nil)
	got := e.task(c)
	if got.Status != rota.StatusCanceled || !strings.HasPrefix(got.Message, "dependency_failed") {
		t.Fatalf("c after stopping b: %s %q, want CANCELED dependency_failed…", got.Status, got.Message)
	}
	if got := e.task(a).Status; got != rota.StatusScheduled {
		t.Fatalf("a after stopping b: %s, want SCHEDULED", got)
	}
}
