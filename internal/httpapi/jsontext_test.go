package httpapi

import (
	"testing"

	"github.com/rotahq/rota"
)

func TestTextProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw string
		bad bool
	}{
		{`{"a":"plain"}`, false},
		{`{"a":"é ü 日本 😀"}`, false},
		{`{"a":"\ud83d\ude00 \n \\u0000 \" \\"}`, false}, // a pair; an escaped backslash before u0000
		{"{\"a\":\"\xff\"}", true},
		{"{\"a\":\"\xc3\"}", true},         // truncated sequence
		{"{\"a\":\"\xed\xa0\x80\"}", true}, // a surrogate encoded in UTF-8
		{`{"a":"\u0000"}`, true},
		{`{"a":"x\u0000"}`, true},
		{`{"a":"\ud800"}`, true},
		{`{"a":"\ud800\u0041"}`, true},
		{`{"a":"\udc00"}`, true},
		{`["ok", {"b": ["\ud83d"]}]`, true},
	} {
		if got := textProblem([]byte(tc.raw)) != ""; got != tc.bad {
			t.Errorf("textProblem(%q) bad = %v, want %v", tc.raw, got, tc.bad)
		}
	}
}

// TestBadTextRefusedNamingTheField sends payloads, results, messages, keys
// and worker ids that a store could not keep or give back intact, and
// wants 400 invalid naming the field, with nothing stored.
func TestBadTextRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		path, body, field string
	}{
		{"/api/tasks", "{\"kind\":\"k\",\"task\":{\"a\":[1,\"\xff\"]}}", "task.a[1]"},
		{"/api/tasks", `{"kind":"k","task":{"a":"\u0000"}}`, "task.a"},
		{"/api/tasks", `{"kind":"k","task":"\ud800"}`, "task"},
		{"/api/tasks", `{"kind":"k","task":{},"key":"a\u0000b"}`, "key"},
		{"/api/tasks", "{\"kind\":\"k\",\"task\":{},\"key\":\"\xfe\"}", "key"},
		{"/api/tasks/batch", `{"tasks":[{"kind":"k","task":{}},{"kind":"k","task":{"x":"\udfff"}}]}`, "tasks[1].task.x"},
		{"/api/workers/claim", `{"worker_id":"w\u0000","kinds":["k"]}`, "worker_id"},
	} {
		r := e.do("POST", tc.path, tc.body)
		wantErr(t, r, rota.CodeInvalid)
		if r.field() != tc.field {
			t.Errorf("POST %s %q: field %q, want %q (%v)", tc.path, tc.body, r.field(), tc.field, r)
		}
	}
	var list struct {
		Tasks []taskJSON `json:"tasks"`
	}
	e.ok("GET", "/api/tasks", nil, &list)
	if len(list.Tasks) != 0 {
		t.Fatalf("refused submits stored tasks: %+v", list.Tasks)
	}
	// Reports: a result or a message the store could not keep.
	e.submit(map[string]any{"kind": "r", "task": map[string]any{}})
	c := e.claimOne("w1", "r", 0)
	for _, tc := range []struct {
		path, body, field string
	}{
		{"/api/runs/" + c.RunID + "/succeed", `{"worker_id":"w1","result":{"v":"\u0000"}}`, "result.v"},
		{"/api/runs/" + c.RunID + "/succeed", `{"worker_id":"w1","message":"bad \ud800"}`, "message"},
		{"/api/runs/" + c.RunID + "/heartbeat", "{\"worker_id\":\"w1\",\"message\":\"\xff\"}", "message"},
		{"/api/runs/reports", `{"worker_id":"w1","reports":[{"run_id":"` + c.RunID + `","outcome":"succeed","result":"\u0000"}]}`, "reports[0].result"},
	} {
		r := e.do("POST", tc.path, tc.body)
		wantErr(t, r, rota.CodeInvalid)
		if r.field() != tc.field {
			t.Errorf("POST %s %q: field %q, want %q (%v)", tc.path, tc.body, r.field(), tc.field, r)
		}
	}
	if got := e.task(c.TaskID); got.Status != rota.StatusRunning {
		t.Fatalf("task after refused reports: %s, want RUNNING", got.Status)
	}
	// Text that is fine is kept exactly.
	r := e.do("POST", "/api/runs/"+c.RunID+"/succeed", `{"worker_id":"w1","result":{"v":"é \ud83d\ude00"}}`)
	if r.Status != 200 {
		t.Fatalf("succeed with good text: %v", r)
	}
}
