package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// TestKindDispatch: a kind is pull by default; PUT sets push (GET and the
// list show it, other changes keep it); anything else is 400 naming
// dispatch.
func TestKindDispatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var k rotaapi.Kind
	e.ok("PUT", "/api/kinds/hooks", map[string]any{"max_running": 3}, &k)
	if k.Dispatch != rota.DispatchPull {
		t.Fatalf("a new kind's dispatch = %q, want pull", k.Dispatch)
	}
	e.ok("PUT", "/api/kinds/hooks", map[string]any{"dispatch": "push"}, &k)
	if k.Dispatch != rota.DispatchPush || k.MaxRunning != 3 {
		t.Fatalf("PUT dispatch push: %+v", k)
	}
	e.ok("POST", "/api/kinds/hooks/pause", nil, &k)
	e.ok("GET", "/api/kinds/hooks", nil, &k)
	if k.Dispatch != rota.DispatchPush || !k.Paused {
		t.Fatalf("GET after pause: %+v", k)
	}
	var list rotaapi.KindList
	e.ok("GET", "/api/kinds", nil, &list)
	if len(list.Kinds) != 1 || list.Kinds[0].Dispatch != rota.DispatchPush {
		t.Fatalf("GET /api/kinds: %+v", list)
	}
	for _, bad := range []any{"PUSH", "", "poll", 1, true} {
		r := e.do("PUT", "/api/kinds/hooks", map[string]any{"dispatch": bad})
		if r.Status != 400 || r.field() != "dispatch" {
			t.Errorf("dispatch %v: %v, want 400 naming dispatch", bad, r)
		}
	}
}

func registerBody(mod func(map[string]any)) map[string]any {
	b := map[string]any{"worker_id": "p1", "kinds": []string{"hooks", "mail", "hooks"},
		"address": "http://worker-1.example:9000/rota", "capacity": 4}
	if mod != nil {
		mod(b)
	}
	return b
}

// TestWorkerRegister: a registration answers the worker; GET
// /api/workers lists it with its address and capacity.
func TestWorkerRegister(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var w rotaapi.Worker
	e.ok("POST", "/api/workers/register", registerBody(nil), &w)
	if w.WorkerID != "p1" || w.Address != "http://worker-1.example:9000/rota" || w.Capacity != 4 ||
		strings.Join(w.Kinds, ",") != "hooks,mail" || w.Status != rota.WorkerActive {
		t.Fatalf("register: %+v", w)
	}
	e.claim("puller", []string{"hooks"}, 1, 0)
	var list rotaapi.WorkerList
	e.ok("GET", "/api/workers", nil, &list)
	got := map[string]rotaapi.Worker{}
	for _, w := range list.Workers {
		got[w.WorkerID] = w
	}
	if p := got["p1"]; p.Capacity != 4 || p.Address != "http://worker-1.example:9000/rota" {
		t.Fatalf("listed push worker: %+v", p)
	}
	if p := got["puller"]; p.Capacity != 0 {
		t.Fatalf("a pull worker lists capacity %d", p.Capacity)
	}
	e.ok("POST", "/api/workers/register", registerBody(func(b map[string]any) { b["capacity"] = 2 }), &w)
	if w.Capacity != 2 {
		t.Fatalf("registered again: capacity %d, want 2", w.Capacity)
	}
}

// TestWorkerRegisterValidation: every bad input is a 400 naming its field.
func TestWorkerRegisterValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name  string
		mod   func(map[string]any)
		field string
	}{
		{"no worker id", func(b map[string]any) { delete(b, "worker_id") }, "worker_id"},
		{"reserved worker id", func(b map[string]any) { b["worker_id"] = "rota:http" }, "worker_id"},
		{"no kinds", func(b map[string]any) { b["kinds"] = []string{} }, "kinds"},
		{"bad kind", func(b map[string]any) { b["kinds"] = []string{"ok", "no way"} }, "kinds[1]"},
		{"no address", func(b map[string]any) { delete(b, "address") }, "address"},
		{"not a URL", func(b map[string]any) { b["address"] = "worker-1:9000" }, "address"},
		{"other scheme", func(b map[string]any) { b["address"] = "ftp://worker-1.example/" }, "address"},
		{"user info", func(b map[string]any) { b["address"] = "http://u:p@worker-1.example/" }, "address"},
		{"loopback", func(b map[string]any) { b["address"] = "http://127.0.0.1:9000/" }, "address"},
		{"localhost", func(b map[string]any) { b["address"] = "http://localhost:9000/" }, "address"},
		{"metadata", func(b map[string]any) { b["address"] = "http://169.254.169.254/" }, "address"},
		{"long address", func(b map[string]any) { b["address"] = "http://a.example/" + strings.Repeat("x", 2048) }, "address"},
		{"no capacity", func(b map[string]any) { delete(b, "capacity") }, "capacity"},
		{"capacity 0", func(b map[string]any) { b["capacity"] = 0 }, "capacity"},
		{"capacity too big", func(b map[string]any) { b["capacity"] = 1001 }, "capacity"},
		{"capacity a string", func(b map[string]any) { b["capacity"] = "2" }, "capacity"},
		{"unknown field", func(b map[string]any) { b["max"] = 2 }, "max"},
	}
	for _, c := range cases {
		r := e.do("POST", "/api/workers/register", registerBody(c.mod))
		if r.Status != 400 || r.field() != c.field {
			t.Errorf("%s: %v, want 400 naming %s", c.name, r, c.field)
		}
	}
	var list rotaapi.WorkerList
	e.ok("GET", "/api/workers", nil, &list)
	if len(list.Workers) != 0 {
		t.Fatalf("refused registrations left workers: %+v", list.Workers)
	}
}

// TestWorkerRegisterRolesAndAudit: the worker role registers (audited as
// worker.register), a submitter may not, and a token confined to kinds
// registers only those.
func TestWorkerRegisterRolesAndAudit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{BootstrapToken: "boot"} })
	wrk, _ := mustToken(t, e, "boot", "pusher", rota.RoleWorker)
	sub, _ := mustToken(t, e, "boot", "producer", rota.RoleSubmitter)
	confined, _ := mustToken(t, e, "boot", "mailer", rota.RoleWorker, "mail")
	if r := doAs(t, e.url, sub, "POST", "/api/workers/register", registerBody(nil)); r.Status != 403 {
		t.Fatalf("submitter registers: %v, want 403", r)
	}
	if r := doAs(t, e.url, confined, "POST", "/api/workers/register", registerBody(nil)); r.Status != 403 {
		t.Fatalf("token confined to mail registers hooks: %v, want 403", r)
	}
	if r := doAs(t, e.url, "", "POST", "/api/workers/register", registerBody(nil)); r.Status != 401 {
		t.Fatalf("no token: %v, want 401", r)
	}
	if r := doAs(t, e.url, wrk, "POST", "/api/workers/register", registerBody(nil)); r.Status != 200 {
		t.Fatalf("worker registers: %v", r)
	}
	res, err := e.store.AuditList(t.Context(), storeAuditAll())
	if err != nil {
		t.Fatal(err)
	}
	rec := res.Records[0]
	if rec.Action != "worker.register" || rec.Actor != "pusher" || rec.Target != "p1" {
		t.Fatalf("newest audit record: %+v", rec)
	}
	var after rotaapi.Worker
	if err := json.Unmarshal(rec.After, &after); err != nil || after.Address != "http://worker-1.example:9000/rota" {
		t.Fatalf("audit after: %s", rec.After)
	}
}
