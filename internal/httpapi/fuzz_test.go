package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
)

// fuzzNow is the instant the decoder fuzz targets validate against.
var fuzzNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// wantClientError fails unless err is a *rota.Error of a 4xx code with a
// message.
func wantClientError(t *testing.T, data []byte, err error) {
	t.Helper()
	var re *rota.Error
	if !errors.As(err, &re) {
		t.Fatalf("input %q: error %T %v is not a *rota.Error", data, err, err)
	}
	if s := re.Code.HTTPStatus(); s < 400 || s > 499 {
		t.Fatalf("input %q: code %s (HTTP %d) is not a client error", data, re.Code, s)
	}
	if re.Message == "" {
		t.Fatalf("input %q: empty message", data)
	}
}

func addSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}

// FuzzDecodeSubmit: the submit decoder never panics and either accepts a
// request that meets every rule or refuses it with a 4xx *rota.Error.
func FuzzDecodeSubmit(f *testing.F) {
	addSeeds(f,
		`{"kind":"email","priority":"high","task":{"to":"a@b.c"}}`,
		`{"kind":"k","task":1,"key":"x","delay_seconds":5,"max_retries":0,"timeout_seconds":3,"heartbeat_timeout_seconds":1,"worker_ids":["a","b","a"],"workers":2}`,
		`{"kind":"k","task":null}`, `{"kind":"k","task":1,"run_at":1,"delay_seconds":1}`, `{"Kind":"k"}`,
		`{"kind":"k","kind":"k","task":1}`, `{"kind":"k","task":1} {}`, `[]`, `null`, ``, `{"task":"`,
		`{"kind":"k","task":1,"max_retries":1e99}`, `{"kind":"\u0000","task":{}}`, `{"kind":"k","task":[1,{"a":null}]}`,
	)
	const maxPayload = 256
	f.Fuzz(func(t *testing.T, data []byte) {
		var req submitRequest
		err := decodeStrict(data, &req, "")
		if err == nil {
			_, err = req.check(maxPayload, "", fuzzNow)
		}
		if err != nil {
			wantClientError(t, data, err)
			return
		}
		p, _ := req.check(maxPayload, "", fuzzNow)
		switch {
		case !rota.ValidKind(p.Kind):
			t.Fatalf("accepted kind %q", p.Kind)
		case p.Priority.Level() < 0:
			t.Fatalf("accepted priority %q", p.Priority)
		case len(p.Payload) == 0 || len(p.Payload) > maxPayload || string(p.Payload) == "null" || !json.Valid(p.Payload):
			t.Fatalf("accepted payload %q", p.Payload)
		case p.Key != "" && (len([]rune(p.Key)) > maxKeyLen || strings.ContainsAny(p.Key, "\x00\n")):
			t.Fatalf("accepted key %q", p.Key)
		case p.RunAt.Before(fuzzNow) || p.Now != fuzzNow:
			t.Fatalf("run_at %v before now", p.RunAt)
		case p.MaxRetries < 0 || p.MaxRetries > maxRetriesCap, p.TimeoutSeconds < 0,
			p.HeartbeatTimeoutSeconds < 1 || p.HeartbeatTimeoutSeconds > maxHeartbeatTimeout,
			p.Workers < 1 || p.Workers > maxWorkersCap:
			t.Fatalf("accepted out-of-range options %+v", p)
		case len(p.WorkerIDs) > 0 && p.Workers > len(p.WorkerIDs):
			t.Fatalf("accepted workers %d over %d worker_ids", p.Workers, len(p.WorkerIDs))
		}
		for _, w := range p.WorkerIDs {
			if w == "" {
				t.Fatalf("accepted an empty worker id")
			}
		}
	})
}

// FuzzDecodeBatch: the batch decoder names the item at fault.
func FuzzDecodeBatch(f *testing.F) {
	addSeeds(f,
		`{"tasks":[{"kind":"a","task":1},{"kind":"b","task":2,"key":"k"}]}`,
		`{"tasks":[{"kind":"a","task":1},{"kind":"b c","task":2}]}`,
		`{"tasks":[null]}`, `{"tasks":{}}`, `{"tasks":[]}`, `{"tasks":[{"kind":"a","task":1,"x":1}]}`,
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req batchRequest
		err := decodeStrict(data, &req, "")
		if err == nil {
			a := &API{maxPayload: 256}
			err = req.checkItems(a, fuzzNow)
		}
		if err != nil {
			wantClientError(t, data, err)
			var re *rota.Error
			errors.As(err, &re)
			if re.Code != rota.CodeUnknownField && re.Field != "" && re.Field != "tasks" && !strings.HasPrefix(re.Field, "tasks[") {
				t.Fatalf("input %q: field %q is not under tasks", data, re.Field)
			}
			return
		}
		if len(req.params) == 0 || len(req.params) > maxBatch {
			t.Fatalf("accepted %d tasks", len(req.params))
		}
		for _, p := range req.params {
			if !rota.ValidKind(p.Kind) || string(p.Payload) == "null" || len(p.Payload) == 0 {
				t.Fatalf("accepted item %+v", p)
			}
		}
	})
}

// FuzzDecodeClaim: the claim decoder never panics and either accepts a
// claim that meets every rule or refuses it with a 4xx *rota.Error.
func FuzzDecodeClaim(f *testing.F) {
	addSeeds(f,
		`{"worker_id":"w1","kinds":["email","sms"],"max":10,"wait_seconds":30,"address":"10.0.0.1:80"}`,
		`{"worker_id":"w1","kinds":["email","email"]}`, `{"worker_id":"","kinds":["a"]}`, `{"kinds":["a"]}`,
		`{"worker_id":"w","kinds":[]}`, `{"worker_id":"w","kinds":["a"],"wait_seconds":61}`, `{"worker_id":"w","kinds":"a"}`,
		`{"worker_id":"w","kinds":["a"],"max":-1}`, `{"worker_id":1}`, `{"worker_id":"w","kinds":["a"],"address":""}`,
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := claimRequest{remote: "127.0.0.1"}
		err := decodeStrict(data, &req, "")
		if err == nil {
			err = req.validate(nil)
		}
		if err != nil {
			wantClientError(t, data, err)
			return
		}
		c := req.claim
		switch {
		case c.WorkerID == "" || len([]rune(c.WorkerID)) > maxIDLen:
			t.Fatalf("accepted worker_id %q", c.WorkerID)
		case len(c.Kinds) == 0 || len(c.Kinds) > maxClaimKinds:
			t.Fatalf("accepted %d kinds", len(c.Kinds))
		case c.Max < 1 || c.Max > maxClaim:
			t.Fatalf("accepted max %d", c.Max)
		case c.Wait < 0 || c.Wait > maxWaitSeconds*time.Second:
			t.Fatalf("accepted wait %v", c.Wait)
		case c.Address == "":
			t.Fatalf("no address")
		}
		seen := map[string]bool{}
		for _, k := range c.Kinds {
			if !rota.ValidKind(k) || seen[k] {
				t.Fatalf("accepted kinds %q", c.Kinds)
			}
			seen[k] = true
		}
	})
}

// FuzzAPI sends arbitrary requests through the whole handler, over a real
// store and dispatcher (claims wait at most 1ms): every answer is an
// envelope whose code agrees with the HTTP status, and none is a 5xx.
func FuzzAPI(f *testing.F) {
	e := setup(f, func(o *setupOptions) { o.dispatch.MaxWait = time.Millisecond })
	id := e.submit(map[string]any{"kind": "fz", "task": 1})
	h := e.api.Handler()
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	for _, s := range []struct {
		m    uint8
		path string
		body string
	}{
		{1, "tasks", `{"kind":"fz","task":{"a":1}}`},
		{1, "tasks/batch", `{"tasks":[{"kind":"fz","task":1}]}`},
		{0, "tasks?kind=fz&limit=2&status=SCHEDULED", ``},
		{0, "tasks/" + id, ``},
		{3, "tasks/" + id, `{"priority":"high","worker_ids":["w"]}`},
		{1, "tasks/stop/" + id, `{"message":"x"}`},
		{1, "tasks/run_again/" + id, ``},
		{1, "workers/claim", `{"worker_id":"w","kinds":["fz"],"max":3,"wait_seconds":1}`},
		{1, "runs/" + id + "/heartbeat", `{"worker_id":"w"}`},
		{1, "runs/" + id + "/succeed", `{"worker_id":"w","result":[1]}`},
		{1, "runs/" + id + "/fail", `{"worker_id":"w","retry":false}`},
		{2, "kinds/fz", `{"priority_factor":3,"rate":0.5}`},
		{1, "kinds/fz/pause", ``},
		{0, "stats", ``},
		{0, "workers", ``},
		{1, "workers/w/stop", ``},
		{0, "readyz", ``},
	} {
		f.Add(s.m, s.path, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, m uint8, path string, body []byte) {
		method := methods[int(m)%len(methods)]
		req, err := http.NewRequest(method, "http://rota.test/api/"+path, strings.NewReader(string(body)))
		if err != nil {
			return // not a URL a client could send
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		if res.StatusCode >= 300 && res.StatusCode < 400 {
			if res.Header.Get("Location") == "" {
				t.Fatalf("%s /api/%s: redirect %d without Location", method, path, res.StatusCode)
			}
			return // the router cleans paths ("/api//x" → "/api/x")
		}
		if res.StatusCode >= 500 {
			t.Fatalf("%s /api/%s %q: HTTP %d %s", method, path, body, res.StatusCode, rec.Body)
		}
		if method == "HEAD" {
			return
		}
		var env struct {
			Code    *int            `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Code == nil || env.Message == "" {
			t.Fatalf("%s /api/%s: not an envelope: %s", method, path, rec.Body)
		}
		switch {
		case *env.Code == 0 && res.StatusCode != http.StatusOK,
			*env.Code != 0 && rota.CodeOfNumber(*env.Code).HTTPStatus() != res.StatusCode:
			t.Fatalf("%s /api/%s: HTTP %d with code %d", method, path, res.StatusCode, *env.Code)
		}
	})
}
