package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
)

// TestBadRequests sends requests that must fail and checks the HTTP status,
// the envelope code and that the message and data.field name the field.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	const maxPayload = 1024
	e := setup(t, func(o *setupOptions) { o.maxPayload = maxPayload })

	// Fixtures: a finished task and a running run (held by "w1").
	finished := e.submit(map[string]any{"kind": "fix-done", "task": 1})
	c := e.claimOne("w0", "fix-done", 0)
	e.succeed(c.RunID, "w0")
	e.submit(map[string]any{"kind": "fix-run", "task": 1, "heartbeat_timeout_seconds": 3600})
	running := e.claimOne("w1", "fix-run", 0)
	unknownID := strings.Repeat("0", 31) + "1"
	fill := strings.NewReplacer("{finished}", finished, "{run}", running.RunID, "{unknown}", unknownID).Replace

	big := `"` + strings.Repeat("x", maxPayload) + `"` // maxPayload+2 bytes of JSON
	huge := strings.Repeat(" ", maxPayload+bodySlack+1) + "{}"
	manyTasks := `{"tasks":[` + strings.Repeat(`{"kind":"k","task":1},`, maxBatch) + `{"kind":"k","task":1}]}`
	// rep builds a body of POST /api/runs/reports by worker w1 from items.
	rep := func(items ...string) string {
		return `{"worker_id":"w1","reports":[` + strings.Join(items, ",") + `]}`
	}
	runA, runB := `"`+unknownID+`"`, `"`+strings.Repeat("0", 31)+`2"`
	manyReports := make([]string, maxReports+1)
	for i := range manyReports {
		manyReports[i] = fmt.Sprintf(`{"run_id":"%032x","outcome":"release"}`, i+1)
	}
	long := func(n int) string { return strings.Repeat("a", n) }

	cases := []struct {
		name        string
		method      string
		path        string
		body        string
		contentType string // default application/json
		code        rota.Code
		field       string // the field data.field and the message must name
	}{
		// Body syntax.
		{"malformed JSON", "POST", "/api/tasks", `{"kind":`, "", rota.CodeMalformed, ""},
		{"unquoted key", "POST", "/api/tasks", `{kind:"email"}`, "", rota.CodeMalformed, ""},
		{"empty body", "POST", "/api/tasks", ``, "", rota.CodeMalformed, ""},
		{"blank body", "POST", "/api/tasks", "  \n ", "", rota.CodeMalformed, ""},
		{"trailing data", "POST", "/api/tasks", `{"kind":"a","task":1} x`, "", rota.CodeMalformed, ""},
		{"two objects", "POST", "/api/tasks", `{"kind":"a","task":1}{"kind":"a","task":1}`, "", rota.CodeMalformed, ""},
		{"body is an array", "POST", "/api/tasks", `[{"kind":"a","task":1}]`, "", rota.CodeMalformed, ""},
		{"body is null", "POST", "/api/tasks", `null`, "", rota.CodeMalformed, ""},
		{"malformed with form content type", "POST", "/api/tasks", `kind=email`, "application/x-www-form-urlencoded", rota.CodeMalformed, ""},
		{"field twice", "POST", "/api/tasks", `{"kind":"a","kind":"b","task":1}`, "", rota.CodeMalformed, "kind"},
		// Types.
		{"kind is a number", "POST", "/api/tasks", `{"kind":5,"task":1}`, "", rota.CodeInvalid, "kind"},
		{"priority is a number", "POST", "/api/tasks", `{"kind":"a","priority":1,"task":1}`, "", rota.CodeInvalid, "priority"},
		{"max_retries is a string", "POST", "/api/tasks", `{"kind":"a","task":1,"max_retries":"3"}`, "", rota.CodeInvalid, "max_retries"},
		{"max_retries is fractional", "POST", "/api/tasks", `{"kind":"a","task":1,"max_retries":1.5}`, "", rota.CodeInvalid, "max_retries"},
		{"run_at overflows", "POST", "/api/tasks", `{"kind":"a","task":1,"run_at":1e300}`, "", rota.CodeInvalid, "run_at"},
		{"worker_ids is a string", "POST", "/api/tasks", `{"kind":"a","task":1,"worker_ids":"w1"}`, "", rota.CodeInvalid, "worker_ids"},
		{"worker_ids has a number", "POST", "/api/tasks", `{"kind":"a","task":1,"worker_ids":["w1",2]}`, "", rota.CodeInvalid, "worker_ids"},
		// Unknown fields.
		{"unknown field", "POST", "/api/tasks", `{"kind":"a","task":1,"color":"red"}`, "", rota.CodeUnknownField, "color"},
		{"field in another case", "POST", "/api/tasks", `{"Kind":"a","task":1}`, "", rota.CodeUnknownField, "Kind"},
		// Values.
		{"kind missing", "POST", "/api/tasks", `{"task":1}`, "", rota.CodeInvalid, "kind"},
		{"kind with spaces", "POST", "/api/tasks", `{"kind":"send email","task":1}`, "", rota.CodeInvalid, "kind"},
		{"kind of 129 chars", "POST", "/api/tasks", `{"kind":"` + long(129) + `","task":1}`, "", rota.CodeInvalid, "kind"},
		{"priority urgent", "POST", "/api/tasks", `{"kind":"a","priority":"urgent","task":1}`, "", rota.CodeInvalid, "priority"},
		{"priority in capitals", "POST", "/api/tasks", `{"kind":"a","priority":"HIGH","task":1}`, "", rota.CodeInvalid, "priority"},
		{"task null", "POST", "/api/tasks", `{"kind":"a","task":null}`, "", rota.CodeInvalid, "task"},
		{"task missing", "POST", "/api/tasks", `{"kind":"a"}`, "", rota.CodeInvalid, "task"},
		{"task over MaxPayload", "POST", "/api/tasks", `{"kind":"a","task":` + big + `}`, "", rota.CodeTooLarge, "task"},
		{"body over its limit", "POST", "/api/tasks", huge, "", rota.CodeTooLarge, ""},
		{"key empty", "POST", "/api/tasks", `{"kind":"a","task":1,"key":""}`, "", rota.CodeInvalid, "key"},
		{"key of 257 chars", "POST", "/api/tasks", `{"kind":"a","task":1,"key":"` + long(257) + `"}`, "", rota.CodeInvalid, "key"},
		{"run_at and delay_seconds", "POST", "/api/tasks", `{"kind":"a","task":1,"run_at":1,"delay_seconds":1}`, "", rota.CodeInvalid, "delay_seconds"},
		{"negative delay", "POST", "/api/tasks", `{"kind":"a","task":1,"delay_seconds":-1}`, "", rota.CodeInvalid, "delay_seconds"},
		{"negative run_at", "POST", "/api/tasks", `{"kind":"a","task":1,"run_at":-5}`, "", rota.CodeInvalid, "run_at"},
		{"negative max_retries", "POST", "/api/tasks", `{"kind":"a","task":1,"max_retries":-1}`, "", rota.CodeInvalid, "max_retries"},
		{"max_retries over cap", "POST", "/api/tasks", `{"kind":"a","task":1,"max_retries":1001}`, "", rota.CodeInvalid, "max_retries"},
		{"negative timeout", "POST", "/api/tasks", `{"kind":"a","task":1,"timeout_seconds":-5}`, "", rota.CodeInvalid, "timeout_seconds"},
		{"heartbeat 0", "POST", "/api/tasks", `{"kind":"a","task":1,"heartbeat_timeout_seconds":0}`, "", rota.CodeInvalid, "heartbeat_timeout_seconds"},
		{"heartbeat 3601", "POST", "/api/tasks", `{"kind":"a","task":1,"heartbeat_timeout_seconds":3601}`, "", rota.CodeInvalid, "heartbeat_timeout_seconds"},
		{"workers 0", "POST", "/api/tasks", `{"kind":"a","task":1,"workers":0}`, "", rota.CodeInvalid, "workers"},
		{"workers 1001", "POST", "/api/tasks", `{"kind":"a","task":1,"workers":1001}`, "", rota.CodeInvalid, "workers"},
		{"workers over worker_ids", "POST", "/api/tasks", `{"kind":"a","task":1,"workers":3,"worker_ids":["w1","w2"]}`, "", rota.CodeInvalid, "workers"},
		{"empty worker id", "POST", "/api/tasks", `{"kind":"a","task":1,"worker_ids":["w1",""]}`, "", rota.CodeInvalid, "worker_ids[1]"},
		// Batch.
		{"batch without tasks", "POST", "/api/tasks/batch", `{"tasks":[]}`, "", rota.CodeInvalid, "tasks"},
		{"batch tasks missing", "POST", "/api/tasks/batch", `{}`, "", rota.CodeInvalid, "tasks"},
		{"batch of 1001", "POST", "/api/tasks/batch", manyTasks, "", rota.CodeInvalid, "tasks"},
		{"batch item bad kind", "POST", "/api/tasks/batch", `{"tasks":[{"kind":"ok","task":1},{"kind":"ok","task":1},{"kind":"ok","task":1},{"kind":"no way","task":1}]}`, "", rota.CodeInvalid, "tasks[3].kind"},
		{"batch item kind type", "POST", "/api/tasks/batch", `{"tasks":[{"kind":7,"task":1}]}`, "", rota.CodeInvalid, "tasks[0].kind"},
		{"batch item unknown field", "POST", "/api/tasks/batch", `{"tasks":[{"kind":"ok","task":1,"nope":1}]}`, "", rota.CodeUnknownField, "tasks[0].nope"},
		{"batch item null", "POST", "/api/tasks/batch", `{"tasks":[null]}`, "", rota.CodeInvalid, "tasks[0]"},
		{"batch item payload too large", "POST", "/api/tasks/batch", `{"tasks":[{"kind":"ok","task":` + big + `}]}`, "", rota.CodeTooLarge, "tasks[0].task"},
		{"batch tasks not an array", "POST", "/api/tasks/batch", `{"tasks":{}}`, "", rota.CodeInvalid, "tasks"},
		// Task ids and listing.
		{"bad task id", "GET", "/api/tasks/xyz", "", "", rota.CodeInvalid, "id"},
		{"task id in capitals", "GET", "/api/tasks/" + strings.ToUpper(unknownID[:30]) + "AB", "", "", rota.CodeInvalid, "id"},
		{"unknown task", "GET", "/api/tasks/{unknown}", "", "", rota.CodeNotFound, ""},
		{"limit 0", "GET", "/api/tasks?limit=0", "", "", rota.CodeInvalid, "limit"},
		{"limit 1001", "GET", "/api/tasks?limit=1001", "", "", rota.CodeInvalid, "limit"},
		{"limit not a number", "GET", "/api/tasks?limit=ten", "", "", rota.CodeInvalid, "limit"},
		{"bad status filter", "GET", "/api/tasks?status=DONE", "", "", rota.CodeInvalid, "status"},
		{"bad cursor", "GET", "/api/tasks?cursor=abc", "", "", rota.CodeInvalid, "cursor"},
		{"bad kind filter", "GET", "/api/tasks?kind=a%20b", "", "", rota.CodeInvalid, "kind"},
		{"unknown query parameter", "GET", "/api/tasks?page=2", "", "", rota.CodeUnknownField, "page"},
		{"limit given twice", "GET", "/api/tasks?limit=1&limit=2", "", "", rota.CodeInvalid, "limit"},
		// Task actions.
		{"run_again unknown", "POST", "/api/tasks/run_again/{unknown}", "", "", rota.CodeNotFound, ""},
		{"run_again bad id", "POST", "/api/tasks/run_again/nope", "", "", rota.CodeInvalid, "id"},
		{"stop finished task", "POST", "/api/tasks/stop/{finished}", "", "", rota.CodeConflict, ""},
		{"stop unknown task", "POST", "/api/tasks/stop/{unknown}", "", "", rota.CodeNotFound, ""},
		{"stop with unknown field", "POST", "/api/tasks/stop/{finished}", `{"reason":"x"}`, "", rota.CodeUnknownField, "reason"},
		{"patch finished task", "PATCH", "/api/tasks/{finished}", `{"priority":"high"}`, "", rota.CodeConflict, ""},
		{"patch unknown task", "PATCH", "/api/tasks/{unknown}", `{"priority":"high"}`, "", rota.CodeNotFound, ""},
		{"patch kind", "PATCH", "/api/tasks/{finished}", `{"kind":"other"}`, "", rota.CodeUnknownField, "kind"},
		{"patch priority urgent", "PATCH", "/api/tasks/{finished}", `{"priority":"urgent"}`, "", rota.CodeInvalid, "priority"},
		{"patch heartbeat 0", "PATCH", "/api/tasks/{finished}", `{"heartbeat_timeout_seconds":0}`, "", rota.CodeInvalid, "heartbeat_timeout_seconds"},
		{"patch empty worker id", "PATCH", "/api/tasks/{finished}", `{"worker_ids":[""]}`, "", rota.CodeInvalid, "worker_ids[0]"},
		// Ids starting with "rota:" name Rota's own workers (its HTTP executor).
		{"reserved pinned worker", "POST", "/api/tasks", `{"kind":"a","task":1,"worker_ids":["w1","rota:http"]}`, "", rota.CodeInvalid, "worker_ids[1]"},
		{"reserved claiming worker", "POST", "/api/workers/claim", `{"worker_id":"rota:http","kinds":["a"]}`, "", rota.CodeInvalid, "worker_id"},
		{"reserved reporting worker", "POST", "/api/runs/{run}/succeed", `{"worker_id":"rota:x"}`, "", rota.CodeInvalid, "worker_id"},
		{"reserved batch reporter", "POST", "/api/runs/reports", `{"worker_id":"rota:http","reports":[{"run_id":"{run}","outcome":"release"}]}`, "", rota.CodeInvalid, "worker_id"},
		{"reserved worker stopped", "POST", "/api/workers/rota:http/stop", ``, "", rota.CodeInvalid, "id"},
		// Worker protocol.
		{"claim without worker_id", "POST", "/api/workers/claim", `{"kinds":["a"]}`, "", rota.CodeInvalid, "worker_id"},
		{"claim worker_id too long", "POST", "/api/workers/claim", `{"worker_id":"` + long(257) + `","kinds":["a"]}`, "", rota.CodeInvalid, "worker_id"},
		{"claim without kinds", "POST", "/api/workers/claim", `{"worker_id":"w"}`, "", rota.CodeInvalid, "kinds"},
		{"claim bad kind", "POST", "/api/workers/claim", `{"worker_id":"w","kinds":["a","b c"]}`, "", rota.CodeInvalid, "kinds[1]"},
		{"claim wait 61", "POST", "/api/workers/claim", `{"worker_id":"w","kinds":["a"],"wait_seconds":61}`, "", rota.CodeInvalid, "wait_seconds"},
		{"claim max 0", "POST", "/api/workers/claim", `{"worker_id":"w","kinds":["a"],"max":0}`, "", rota.CodeInvalid, "max"},
		{"claim max 1001", "POST", "/api/workers/claim", `{"worker_id":"w","kinds":["a"],"max":1001}`, "", rota.CodeInvalid, "max"},
		{"claim unknown field", "POST", "/api/workers/claim", `{"worker_id":"w","kinds":["a"],"ttl":3}`, "", rota.CodeUnknownField, "ttl"},
		{"claim follow not a bool", "POST", "/api/workers/claim", `{"worker_id":"w","kinds":["a"],"follow":"yes"}`, "", rota.CodeInvalid, "follow"},
		{"heartbeat unknown run", "POST", "/api/runs/{unknown}/heartbeat", `{"worker_id":"w1"}`, "", rota.CodeNotFound, ""},
		{"heartbeat bad run id", "POST", "/api/runs/zzz/heartbeat", `{"worker_id":"w1"}`, "", rota.CodeInvalid, "run_id"},
		{"heartbeat without worker_id", "POST", "/api/runs/{run}/heartbeat", `{}`, "", rota.CodeInvalid, "worker_id"},
		{"heartbeat wait -1", "POST", "/api/runs/{run}/heartbeat", `{"worker_id":"w1","wait_seconds":-1}`, "", rota.CodeInvalid, "wait_seconds"},
		{"heartbeat wait 61", "POST", "/api/runs/{run}/heartbeat", `{"worker_id":"w1","wait_seconds":61}`, "", rota.CodeInvalid, "wait_seconds"},
		{"heartbeat wait not an int", "POST", "/api/runs/{run}/heartbeat", `{"worker_id":"w1","wait_seconds":"5"}`, "", rota.CodeInvalid, "wait_seconds"},
		{"heartbeat by another worker", "POST", "/api/runs/{run}/heartbeat", `{"worker_id":"w2"}`, "", rota.CodeLeaseLost, ""},
		{"succeed by another worker", "POST", "/api/runs/{run}/succeed", `{"worker_id":"w2"}`, "", rota.CodeLeaseLost, ""},
		{"succeed result too large", "POST", "/api/runs/{run}/succeed", `{"worker_id":"w1","result":` + big + `}`, "", rota.CodeTooLarge, "result"},
		{"fail unknown run", "POST", "/api/runs/{unknown}/fail", `{"worker_id":"w1"}`, "", rota.CodeNotFound, ""},
		{"fail retry not a bool", "POST", "/api/runs/{run}/fail", `{"worker_id":"w1","retry":"no"}`, "", rota.CodeInvalid, "retry"},
		{"stop unknown worker", "POST", "/api/workers/nobody/stop", "", "", rota.CodeNotFound, ""},
		// Batch reports.
		{"reports without worker_id", "POST", "/api/runs/reports", `{"reports":[{"run_id":` + runA + `,"outcome":"succeed"}]}`, "", rota.CodeInvalid, "worker_id"},
		{"reports missing", "POST", "/api/runs/reports", `{"worker_id":"w1"}`, "", rota.CodeInvalid, "reports"},
		{"reports empty", "POST", "/api/runs/reports", rep(), "", rota.CodeInvalid, "reports"},
		{"reports of 1001", "POST", "/api/runs/reports", rep(manyReports...), "", rota.CodeInvalid, "reports"},
		{"reports not an array", "POST", "/api/runs/reports", `{"worker_id":"w1","reports":{}}`, "", rota.CodeInvalid, "reports"},
		{"reports unknown field", "POST", "/api/runs/reports", `{"worker_id":"w1","reports":[],"worker":"w1"}`, "", rota.CodeUnknownField, "worker"},
		{"report null", "POST", "/api/runs/reports", rep(`null`), "", rota.CodeInvalid, "reports[0]"},
		{"report without run_id", "POST", "/api/runs/reports", rep(`{"outcome":"succeed"}`), "", rota.CodeInvalid, "reports[0].run_id"},
		{"report bad run_id", "POST", "/api/runs/reports", rep(`{"run_id":`+runA+`,"outcome":"succeed"}`, `{"run_id":`+runB+`,"outcome":"fail"}`, `{"run_id":"0","outcome":"fail"}`, `{"run_id":"zz","outcome":"fail"}`), "", rota.CodeInvalid, "reports[2].run_id"},
		{"report run_id a number", "POST", "/api/runs/reports", rep(`{"run_id":1,"outcome":"succeed"}`), "", rota.CodeInvalid, "reports[0].run_id"},
		{"report run twice", "POST", "/api/runs/reports", rep(`{"run_id":`+runA+`,"outcome":"succeed"}`, `{"run_id":`+runB+`,"outcome":"succeed"}`, `{"run_id":`+runA+`,"outcome":"fail"}`), "", rota.CodeInvalid, "reports[2].run_id"},
		{"report without outcome", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `}`), "", rota.CodeInvalid, "reports[0].outcome"},
		{"report outcome done", "POST", "/api/runs/reports", rep(`{"run_id":`+runA+`,"outcome":"succeed"}`, `{"run_id":`+runB+`,"outcome":"done"}`), "", rota.CodeInvalid, "reports[1].outcome"},
		{"report outcome in capitals", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"SUCCEED"}`), "", rota.CodeInvalid, "reports[0].outcome"},
		{"report result with fail", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"fail","result":{}}`), "", rota.CodeInvalid, "reports[0].result"},
		{"report result with release", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"release","result":1}`), "", rota.CodeInvalid, "reports[0].result"},
		{"report retry with succeed", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"succeed","retry":false}`), "", rota.CodeInvalid, "reports[0].retry"},
		{"report retry with release", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"release","retry":true}`), "", rota.CodeInvalid, "reports[0].retry"},
		{"report retry not a bool", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"fail","retry":"no"}`), "", rota.CodeInvalid, "reports[0].retry"},
		{"report result too large", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"succeed","result":` + big + `}`), "", rota.CodeTooLarge, "reports[0].result"},
		{"report unknown field", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"succeed","worker_id":"w1"}`), "", rota.CodeUnknownField, "reports[0].worker_id"},
		{"report field twice", "POST", "/api/runs/reports", rep(`{"run_id":` + runA + `,"outcome":"succeed","outcome":"fail"}`), "", rota.CodeMalformed, "reports[0].outcome"},
		{"GET on reports", "GET", "/api/runs/reports", "", "", rota.CodeMethod, ""},
		// Kinds.
		{"unknown kind", "GET", "/api/kinds/never-seen", "", "", rota.CodeNotFound, ""},
		{"bad kind in path", "GET", "/api/kinds/a%20b", "", "", rota.CodeInvalid, "kind"},
		{"priority_factor 0", "PUT", "/api/kinds/k1", `{"priority_factor":0}`, "", rota.CodeInvalid, "priority_factor"},
		{"priority_factor 101", "PUT", "/api/kinds/k1", `{"priority_factor":101}`, "", rota.CodeInvalid, "priority_factor"},
		{"negative rate", "PUT", "/api/kinds/k1", `{"rate":-1}`, "", rota.CodeInvalid, "rate"},
		{"negative max_running", "PUT", "/api/kinds/k1", `{"max_running":-1}`, "", rota.CodeInvalid, "max_running"},
		{"paused not a bool", "PUT", "/api/kinds/k1", `{"paused":"yes"}`, "", rota.CodeInvalid, "paused"},
		{"kind name in body", "PUT", "/api/kinds/k1", `{"kind":"k2"}`, "", rota.CodeUnknownField, "kind"},
		// Routing.
		{"unknown route", "GET", "/api/nope", "", "", rota.CodeNotFound, ""},
		{"unknown nested route", "GET", "/api/tasks/" + unknownID + "/runs", "", "", rota.CodeNotFound, ""},
		{"outside /api", "GET", "/", "", "", rota.CodeNotFound, ""},
		{"wrong method on tasks", "DELETE", "/api/tasks", "", "", rota.CodeMethod, ""},
		{"wrong method on a task", "DELETE", "/api/tasks/{unknown}", "", "", rota.CodeMethod, ""},
		{"GET on claim", "GET", "/api/workers/claim", "", "", rota.CodeMethod, ""},
	}
	if len(cases) < 35 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var body any
			if tc.body != "" {
				body = tc.body
			}
			ct := []string{}
			if tc.contentType != "" {
				ct = append(ct, tc.contentType)
			}
			r := doRequest(t, e.url, tc.method, fill(tc.path), body, ct...)
			t.Logf("%s %s → %v", tc.method, tc.path, r)
			wantErr(t, r, tc.code)
			if r.Message == "" || r.Message == "ok" {
				t.Errorf("message %q says nothing", r.Message)
			}
			if got := r.field(); got != tc.field {
				t.Errorf("data.field = %q, want %q (%v)", got, tc.field, r)
			}
			if tc.field != "" && !strings.Contains(r.Message, fmt.Sprintf("%q", tc.field)) {
				t.Errorf("message %q does not name field %q", r.Message, tc.field)
			}
			if tc.field == "" && string(r.Data) != "null" {
				t.Errorf("data = %s, want null", r.Data)
			}
			if tc.code == rota.CodeMethod && r.Header.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
}

// TestBadRequestsChangeNothing checks that refused requests store nothing:
// an invalid batch item rejects the whole batch, and a refused report
// leaves the run running.
func TestBadRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.do("POST", "/api/tasks/batch", `{"tasks":[{"kind":"b","task":1},{"kind":"b","task":2},{"kind":"b","task":3},{"kind":"b c","task":4}]}`)
	wantErr(t, r, rota.CodeInvalid)
	if r.field() != "tasks[3].kind" {
		t.Fatalf("field = %q, want tasks[3].kind", r.field())
	}
	var list listResponse
	e.ok("GET", "/api/tasks?kind=b", nil, &list)
	if len(list.Tasks) != 0 {
		t.Fatalf("an invalid batch stored %d tasks", len(list.Tasks))
	}

	id := e.submit(map[string]any{"kind": "c", "task": 1, "heartbeat_timeout_seconds": 60})
	run := e.claimOne("w1", "c", 0)
	wantErr(t, e.do("POST", "/api/runs/"+run.RunID+"/succeed", map[string]any{"worker_id": "w2"}), rota.CodeLeaseLost)
	wantErr(t, e.do("POST", "/api/runs/"+run.RunID+"/fail", map[string]any{"worker_id": "w2", "retry": false}), rota.CodeLeaseLost)
	if got := e.task(id); got.Status != rota.StatusRunning || len(got.Runs) != 1 || got.Runs[0].Status != rota.StatusRunning {
		t.Fatalf("after refused reports: task %s, runs %+v", got.Status, got.Runs)
	}
}

// TestMethodNotAllowedAllowHeader checks the Allow header lists the route's
// methods.
func TestMethodNotAllowedAllowHeader(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.do("DELETE", "/api/tasks", nil)
	wantErr(t, r, rota.CodeMethod)
	allow := r.Header.Get("Allow")
	for _, m := range []string{"GET", "POST"} {
		if !strings.Contains(allow, m) {
			t.Errorf("Allow %q lacks %s", allow, m)
		}
	}
	r = e.do("PUT", "/api/tasks/"+strings.Repeat("a", 32), nil)
	wantErr(t, r, rota.CodeMethod)
	for _, m := range []string{"GET", "PATCH"} {
		if !strings.Contains(r.Header.Get("Allow"), m) {
			t.Errorf("Allow %q lacks %s", r.Header.Get("Allow"), m)
		}
	}
}

// TestAnyContentTypeWithJSONBody checks the quick start: curl -d sends
// application/x-www-form-urlencoded, and a JSON body must still work.
func TestAnyContentTypeWithJSONBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := `{"kind":"email","priority":"high","task":{"to":"a@b.c"}}`
	for _, ct := range []string{"application/x-www-form-urlencoded", "", "text/plain", "application/json; charset=utf-8", "application/vnd.rota+json"} {
		r := e.do("POST", "/api/tasks", body, ct)
		if r.Status != http.StatusOK || r.Code != 0 {
			t.Fatalf("Content-Type %q: %v", ct, r)
		}
		var d map[string]any
		if err := json.Unmarshal(r.Data, &d); err != nil || !rota.ValidID(fmt.Sprint(d["task_id"])) {
			t.Fatalf("Content-Type %q: data %s", ct, r.Data)
		}
		if _, ok := d["existing"]; ok {
			t.Fatalf("a new task's data has existing: %s", r.Data)
		}
	}
}

// TestStalledBody: a client that stops sending its body gets an error when
// BodyReadTimeout passes, and a long poll after a body read in time is not
// cut by that deadline.
func TestStalledBody(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.bodyTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /api/tasks HTTP/1.1\r\nHost: rota\r\nContent-Length: 100\r\n\r\n{\"kind\":")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || time.Since(start) > 3*time.Second {
		t.Fatalf("stalled body: HTTP %d after %v", res.StatusCode, time.Since(start))
	}

	// A claim waits past the body deadline.
	start = time.Now()
	c := e.claim("w1", []string{"none"}, 1, 1)
	if len(c.Tasks) != 0 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("claim returned after %v: %+v", time.Since(start), c)
	}
}

// TestItemErrorTexts pins the whole error of a bad report of a batch,
// whose path is put on only once its check has failed (underPrefix).
func TestItemErrorTexts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.do("POST", "/api/runs/reports", `{"worker_id":"w1","reports":[`+
		`{"run_id":"`+strings.Repeat("0", 32)+`","outcome":"succeed"},{"run_id":"zz","outcome":"fail"}]}`)
	wantErr(t, r, rota.CodeInvalid)
	if want := `field "reports[1].run_id": must be an id of 32 lowercase hex characters, got "zz"`; r.Message != want || r.field() != "reports[1].run_id" {
		t.Errorf("bad run_id: %q on field %q, want %q on reports[1].run_id", r.Message, r.field(), want)
	}
}

func TestUnderPrefix(t *testing.T) {
	t.Parallel()
	plain := errors.New("plain")
	for _, tc := range []struct {
		err        error
		prefix     string
		field, msg string // of the *rota.Error returned
	}{
		{rota.Invalid("run_id", "must be an id, got %q", "zz"), "reports[2]", "reports[2].run_id", `field "reports[2].run_id": must be an id, got "zz"`},
		{tooLarge("result", 9, 8), "reports[0]", "reports[0].result", `field "reports[0].result": the value is 9 bytes, over the limit of 8`},
		{&rota.Error{Code: rota.CodeForbidden, Field: "kind", Message: `may not use kind "kind"`}, "tasks[3]", "tasks[3].kind", `may not use kind "kind"`},
		{fmt.Errorf("wrapped: %w", rota.Invalid("kind", "bad")), "tasks[1]", "tasks[1].kind", `field "tasks[1].kind": bad`},
		{rota.Errorf(rota.CodeInvalid, "want an object"), "tasks[4]", "tasks[4]", "want an object"},
		{rota.Invalid("kind", "bad"), "", "kind", `field "kind": bad`},
	} {
		got := underPrefix(tc.err, tc.prefix)
		var re *rota.Error
		if !errors.As(got, &re) || re.Field != tc.field || re.Message != tc.msg || re.Code != rota.ErrorCode(tc.err) {
			t.Errorf("underPrefix(%v, %q) = %+v, want field %q, message %q", tc.err, tc.prefix, re, tc.field, tc.msg)
		}
	}
	if got := underPrefix(plain, "tasks[0]"); got != plain {
		t.Errorf("underPrefix(plain) = %v, want it as it was", got)
	}
	orig := rota.Invalid("kind", "bad")
	_ = underPrefix(orig, "tasks[0]")
	if orig.Field != "kind" || orig.Message != `field "kind": bad` {
		t.Errorf("underPrefix changed its argument: %+v", orig)
	}
}
