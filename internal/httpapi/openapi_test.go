package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/docs"
)

// specOperations returns the operations of docs/openapi.json as Go
// patterns ("GET /api/tasks/{id}"), sorted, split by who handles them: the
// API, or the server, which mounts them in the API's router
// (Config.Handlers; marked x-rota-served-by: server).
func specOperations(t testing.TB) (api, server []string) {
	t.Helper()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("docs/openapi.json: openapi %q, want 3.1.x", doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	for path, item := range doc.Paths {
		for name, raw := range item {
			if !slices.Contains(methods, name) {
				continue
			}
			var op struct {
				ServedBy string `json:"x-rota-served-by"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("docs/openapi.json: %s %s: %v", name, path, err)
			}
			pattern := strings.ToUpper(name) + " " + path
			if op.ServedBy == "server" {
				server = append(server, pattern)
			} else {
				api = append(api, pattern)
			}
		}
	}
	slices.Sort(api)
	slices.Sort(server)
	return api, server
}

// TestOpenAPIDescribesEveryRoute is the drift test: every route of the
// router (with the handlers a server adds) has an operation in
// docs/openapi.json, and every operation names a route of the router.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.handlers = serverHandlers() })
	api, server := specOperations(t)
	described := slices.Sorted(slices.Values(append(api, server...)))
	routes := e.api.Patterns()
	if len(routes) == 0 {
		t.Fatal("the API records no routes")
	}
	for _, r := range routes {
		if !slices.Contains(described, r) {
			t.Errorf("route %q has no operation in docs/openapi.json", r)
		}
	}
	for _, op := range described {
		if !slices.Contains(routes, op) {
			t.Errorf("docs/openapi.json describes %q, which the router does not serve", op)
		}
	}
	var added []string
	for p := range serverHandlers() {
		added = append(added, p)
	}
	slices.Sort(added)
	if diff := cmp.Diff(added, server); diff != "" {
		t.Errorf("operations marked x-rota-served-by: server, against the handlers a server adds (-want +got):\n%s", diff)
	}
}

// TestOpenAPIDocumentValid checks docs/openapi.json against the OpenAPI 3.1
// schema.
func TestOpenAPIDocumentValid(t *testing.T) {
	t.Parallel()
	c := loadSpec(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok, errs := c.v.ValidateDocument(); !ok {
		t.Fatalf("docs/openapi.json is not a valid OpenAPI 3.1 document: %s", describe(errs))
	}
}

// TestOpenAPIServed checks that GET /api/openapi.json serves the file as is.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	res, err := http.Get(e.url + "/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !bytes.Equal(body, docs.OpenAPI()) {
		t.Fatal("GET /api/openapi.json is not docs/openapi.json")
	}
	wantErr(t, e.do("POST", "/api/openapi.json", "{}"), rota.CodeMethod)
}

// TestOpenAPIErrorCodes checks that the description lists every error code
// with its status.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum       json.RawMessage `json:"enum"`
				Properties struct {
					Code struct {
						Enum []any `json:"enum"`
					} `json:"code"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	codes := []rota.Code{rota.CodeInvalid, rota.CodeMalformed, rota.CodeUnknownField, rota.CodeUnauthorized,
		rota.CodeForbidden, rota.CodeNotFound, rota.CodeMethod, rota.CodeConflict, rota.CodeLeaseLost,
		rota.CodeTooLarge, rota.CodeUnsupportedType, rota.CodeRateLimited, rota.CodeInternal, rota.CodeUnavailable}
	var want []int
	byStatus := map[int][]int{}
	for _, c := range codes {
		want = append(want, c.Number())
		byStatus[c.HTTPStatus()] = append(byStatus[c.HTTPStatus()], c.Number())
	}
	var got []int
	if err := json.Unmarshal(doc.Components.Schemas["ErrorCode"].Enum, &got); err != nil {
		t.Fatalf("ErrorCode enum: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ErrorCode enum (-want +got):\n%s", diff)
	}
	perStatus := map[int]string{400: "BadRequestError", 401: "UnauthorizedError", 403: "ForbiddenError",
		404: "NotFoundError", 405: "MethodNotAllowedError", 409: "ConflictError", 413: "TooLargeError", 429: "RateLimitedError",
		500: "InternalError", 503: "UnavailableError"}
	for status, name := range perStatus {
		var got []int
		for _, v := range doc.Components.Schemas[name].Properties.Code.Enum {
			f, _ := v.(float64)
			got = append(got, int(f))
		}
		if diff := cmp.Diff(byStatus[status], got); diff != "" {
			t.Errorf("%s codes (-want +got):\n%s", name, diff)
		}
	}
}

// recordingTB is a testing.TB that records Errorf instead of failing.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestSpecCheckCatchesDrift shows that the check of the HTTP tests fails on
// what drift looks like: a renamed field, an undocumented status, a request
// the description refuses but the API accepts, a non-envelope 404.
func TestSpecCheckCatchesDrift(t *testing.T) {
	t.Parallel()
	c := loadSpec(t)
	const id = "0123456789abcdef0123456789abcdef"
	worker := `{"worker_id":"w1","address":"a","kinds":["k"],"running":0,"first_seen":1,"last_seen":1,"status":"active","stop_requested":false}`
	tests := []struct {
		name         string
		method, path string
		body         string
		status       int
		answer       string
		wantProblem  string // "" when the exchange is right
	}{
		{"right", "POST", "/api/workers/w1/stop", "", 200, `{"code":0,"message":"ok","data":` + worker + `}`, ""},
		{"renamed field", "POST", "/api/workers/w1/stop", "", 200,
			`{"code":0,"message":"ok","data":` + strings.Replace(worker, `"running"`, `"runs"`, 1) + `}`, "'running'"},
		{"undocumented status", "GET", "/api/stats", "", 418, `{"code":41800,"message":"teapot","data":null}`, "418"},
		{"undocumented error code", "GET", "/api/tasks/" + id, "", 404, `{"code":40401,"message":"x","data":null}`, "does not match"},
		{"error field", "GET", "/api/tasks/x", "", 400, `{"code":40001,"message":"bad id","data":{"field":"id"}}`, ""},
		{"refused but accepted", "POST", "/api/tasks", `{"kind":"a b","task":1}`, 200,
			`{"code":0,"message":"ok","data":{"task_id":"` + id + `"}}`, "refuses the request"},
		{"refused and refused", "POST", "/api/tasks", `{"kind":"a b","task":1}`, 400,
			`{"code":40001,"message":"bad kind","data":{"field":"kind"}}`, ""},
		{"unknown route", "GET", "/api/nope", "", 404, `{"code":40400,"message":"no route","data":null}`, ""},
		{"unknown route, plain text", "GET", "/api/nope", "", 404, `404 page not found`, "not an Error envelope"},
		{"unknown route answered", "GET", "/api/nope", "", 200, `{"code":0,"message":"ok","data":null}`, "no operation"},
		{"other method", "DELETE", "/api/tasks", "", 405, `{"code":40500,"message":"no","data":null}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingTB{TB: t}
			h := c.wrap(rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.answer)
			}))
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, body))
			got := strings.Join(rec.errors, "\n")
			switch {
			case tt.wantProblem == "" && got != "":
				t.Fatalf("want no problem, got:\n%s", got)
			case tt.wantProblem != "" && !strings.Contains(got, tt.wantProblem):
				t.Fatalf("want a problem with %q, got:\n%s", tt.wantProblem, got)
			}
		})
	}
}
