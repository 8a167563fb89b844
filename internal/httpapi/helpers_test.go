package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/netguard"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// testEnv is a real API server over a real SQLite store and a started
// dispatcher.
type testEnv struct {
	t     testing.TB
	url   string
	store store.Store
	disp  *dispatch.Dispatcher
	api   *API
	logs  *syncBuffer
}

// setupOptions tweak setup.
type setupOptions struct {
	dispatch    dispatch.Config               // Store is filled in by setup
	wrapStore   func(store.Store) store.Store // e.g. to inject faults
	maxPayload  int64
	follower    bool // do not make the dispatcher leader: no lease reaper
	bodyTimeout time.Duration
	// scheduleChanged is Config.ScheduleChanged.
	scheduleChanged func(id string)
	// targetGuard is Config.TargetGuard.
	targetGuard *netguard.Guard
	// auth, when set, is the Authenticator's config (Tokens and Logger
	// are filled in); handlers is Config.Handlers.
	auth     *AuthConfig
	handlers map[string]http.Handler
	// maxInflight and inflightWait are Config.MaxInflightBytes and
	// Config.InflightWait.
	maxInflight  int64
	inflightWait time.Duration
	// events is Config.Events.
	events func(rota.Event)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func setup(t testing.TB, opts ...func(*setupOptions)) *testEnv {
	t.Helper()
	var o setupOptions
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Relaxed: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	var s store.Store = st
	if o.wrapStore != nil {
		s = o.wrapStore(s)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dc := o.dispatch
	dc.Store = s
	dc.Logger = logger
	d, err := dispatch.New(dc)
	if err != nil {
		t.Fatalf("dispatch.New: %v", err)
	}
	d.SetLeader(!o.follower) // a single node leads: it runs the lease reaper
	if err := d.Start(ctx); err != nil {
		t.Fatalf("dispatcher start: %v", err)
	}
	var auth *Authenticator
	if o.auth != nil {
		ac := *o.auth
		ac.Tokens, ac.Logger = s, logger
		auth = NewAuthenticator(ac)
	}
	a, err := New(Config{Store: s, Dispatcher: d, Logger: logger, MaxPayload: o.maxPayload, BodyReadTimeout: o.bodyTimeout, NodeID: "node-1", Version: "test",
		ScheduleChanged: o.scheduleChanged, TargetGuard: o.targetGuard, Auth: auth, Handlers: o.handlers,
		MaxInflightBytes: o.maxInflight, InflightWait: o.inflightWait, Events: o.events})
	if err != nil {
		t.Fatalf("httpapi.New: %v", err)
	}
	// Every request and response is checked against docs/openapi.json.
	srv := httptest.NewServer(loadSpec(t).wrap(t, a.Handler()))
	// Cleanups run last-in first-out: stop the dispatcher (waiting claims
	// return), then the server, then the store.
	t.Cleanup(srv.Close)
	t.Cleanup(d.Stop)
	return &testEnv{t: t, url: srv.URL, store: s, disp: d, api: a, logs: logs}
}

// apiResp is a decoded envelope.
type apiResp struct {
	Status  int
	Header  http.Header
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// field returns data.field of an error envelope.
func (r apiResp) field() string {
	var d struct {
		Field string `json:"field"`
	}
	_ = json.Unmarshal(r.Data, &d)
	return d.Field
}

func (r apiResp) String() string {
	return fmt.Sprintf("HTTP %d {code:%d message:%q data:%s}", r.Status, r.Code, r.Message, r.Data)
}

// do sends a request; body is nil (no body), a string or []byte (sent as
// is) or any other value (JSON-encoded). Content-Type is application/json
// unless contentType is given.
func (e *testEnv) do(method, path string, body any, contentType ...string) apiResp {
	e.t.Helper()
	return doRequest(e.t, e.url, method, path, body, contentType...)
}

func doRequest(t testing.TB, base, method, path string, body any, contentType ...string) apiResp {
	t.Helper()
	r, err := sendRequest(base, method, path, body, contentType...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sendRequest is doRequest for goroutines: it returns its failure.
func sendRequest(base, method, path string, body any, contentType ...string) (apiResp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return apiResp{}, fmt.Errorf("marshal request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return apiResp{}, fmt.Errorf("new request: %w", err)
	}
	if rd != nil {
		ct := "application/json"
		if len(contentType) > 0 {
			ct = contentType[0]
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiResp{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return apiResp{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	out := apiResp{Status: res.StatusCode, Header: res.Header}
	if method == http.MethodHead {
		return out, nil
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return out, fmt.Errorf("%s %s: Content-Type %q, body %q", method, path, ct, raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var env struct {
		Code    *int            `json:"code"`
		Message *string         `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := dec.Decode(&env); err != nil || env.Code == nil || env.Message == nil || env.Data == nil {
		return out, fmt.Errorf("%s %s: not an envelope (%v): %s", method, path, err, raw)
	}
	out.Code, out.Message, out.Data = *env.Code, *env.Message, env.Data
	return out, nil
}

// ok sends a request that must succeed and decodes its data into out
// (when out is not nil).
func (e *testEnv) ok(method, path string, body any, out any) {
	e.t.Helper()
	r := e.do(method, path, body)
	if r.Status != http.StatusOK || r.Code != 0 || r.Message != "ok" {
		e.t.Fatalf("%s %s: want success, got %v", method, path, r)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			e.t.Fatalf("%s %s: decode data %s: %v", method, path, r.Data, err)
		}
	}
}

// wantErr asserts that r is an error envelope with code (and its status).
func wantErr(t testing.TB, r apiResp, code rota.Code) {
	t.Helper()
	if r.Status != code.HTTPStatus() || r.Code != code.Number() {
		t.Fatalf("want %s (HTTP %d, code %d), got %v", code, code.HTTPStatus(), code.Number(), r)
	}
}

// submit submits a task and returns its id.
func (e *testEnv) submit(body map[string]any) string {
	e.t.Helper()
	var out struct {
		TaskID string `json:"task_id"`
	}
	e.ok("POST", "/api/tasks", body, &out)
	if !rota.ValidID(out.TaskID) {
		e.t.Fatalf("submit: bad task_id %q", out.TaskID)
	}
	return out.TaskID
}

// claimed is the data of a claim.
type claimed struct {
	Tasks        []claimedJSON `json:"tasks"`
	Drain        bool          `json:"drain"`
	ServerTimeMs int64         `json:"server_time_ms"`
}

func (e *testEnv) claim(worker string, kinds []string, max, wait int) claimed {
	e.t.Helper()
	var out claimed
	e.ok("POST", "/api/workers/claim", map[string]any{"worker_id": worker, "kinds": kinds, "max": max, "wait_seconds": wait}, &out)
	if out.Tasks == nil {
		e.t.Fatalf("claim: tasks is null, want []")
	}
	return out
}

// claimOne claims exactly one task or fails.
func (e *testEnv) claimOne(worker, kind string, wait int) claimedJSON {
	e.t.Helper()
	c := e.claim(worker, []string{kind}, 1, wait)
	if len(c.Tasks) != 1 {
		e.t.Fatalf("claim by %s of %s: want 1 task, got %+v", worker, kind, c)
	}
	return c.Tasks[0]
}

func (e *testEnv) task(id string) taskDetailJSON {
	e.t.Helper()
	var out taskDetailJSON
	e.ok("GET", "/api/tasks/"+id, nil, &out)
	return out
}

// report is the data of succeed and fail.
type report struct {
	TaskID    string      `json:"task_id"`
	Status    rota.Status `json:"status"`
	RunStatus rota.Status `json:"run_status"`
}

func (e *testEnv) succeed(runID, worker string) report {
	e.t.Helper()
	var out report
	e.ok("POST", "/api/runs/"+runID+"/succeed", map[string]any{"worker_id": worker, "message": "done"}, &out)
	return out
}

func (e *testEnv) fail(runID, worker string) report {
	e.t.Helper()
	var out report
	e.ok("POST", "/api/runs/"+runID+"/fail", map[string]any{"worker_id": worker, "message": "boom"}, &out)
	return out
}

type heartbeat struct {
	Stop  bool `json:"stop"`
	Drain bool `json:"drain"`
}

func (e *testEnv) heartbeat(runID, worker string) heartbeat {
	e.t.Helper()
	var out heartbeat
	e.ok("POST", "/api/runs/"+runID+"/heartbeat", map[string]any{"worker_id": worker}, &out)
	return out
}

// waitFor polls cond every 10ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// workerStatus returns the status of a worker in GET /api/workers ("" if
// unknown).
func (e *testEnv) workerStatus(id string) rota.WorkerStatus {
	e.t.Helper()
	var out struct {
		Workers []workerJSON `json:"workers"`
	}
	e.ok("GET", "/api/workers", nil, &out)
	for _, w := range out.Workers {
		if w.WorkerID == id {
			return w.Status
		}
	}
	return ""
}
