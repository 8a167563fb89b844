package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// secondNode serves another API over e's store, with its own
// authenticator (its own token cache), as another node of a cluster.
func secondNode(t *testing.T, e *testEnv, ac AuthConfig) string {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{Store: e.store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ac.Tokens, ac.Logger = e.store, slog.New(slog.DiscardHandler)
	a, err := New(Config{Store: e.store, Dispatcher: d, Logger: slog.New(slog.DiscardHandler), Auth: NewAuthenticator(ac)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loadSpec(t).wrap(t, a.Handler())) // checked against docs/openapi.json
	t.Cleanup(srv.Close)
	t.Cleanup(d.Stop)
	return srv.URL
}

func TestTokensCreateListRevoke(t *testing.T) {
	t.Parallel()
	clk := newFakeNow()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{BootstrapToken: "boot", Now: clk.Now} })
	other := secondNode(t, e, AuthConfig{BootstrapToken: "boot", Now: clk.Now})
	secret, id := mustToken(t, e, "boot", "ci", rota.RoleSubmitter, "email")

	// Both nodes know it at once (nothing is cached for unknown tokens).
	for _, base := range []string{e.url, other} {
		if r := doAs(t, base, secret, "GET", "/api/tasks", nil); r.Status != 200 {
			t.Fatalf("new token on %s: %v", base, r)
		}
	}
	// The list shows it without its secret or hash.
	r := doAs(t, e.url, "boot", "GET", "/api/tokens", nil)
	if r.Status != 200 || strings.Contains(string(r.Data), secret) || strings.Contains(string(r.Data), HashToken(secret)) {
		t.Fatalf("list: %v", r)
	}
	var list rotaapi.TokenList
	if err := json.Unmarshal(r.Data, &list); err != nil {
		t.Fatal(err)
	}
	want := []rotaapi.Token{{TokenID: id, Name: "ci", Role: rota.RoleSubmitter, Kinds: []string{"email"}, CreatedAt: list.Tokens[0].CreatedAt}}
	if diff := cmp.Diff(want, list.Tokens); diff != "" {
		t.Fatalf("tokens (-want +got):\n%s", diff)
	}
	// A second live token of the same name is a conflict.
	if r := doAs(t, e.url, "boot", "POST", "/api/tokens", map[string]any{"name": "ci", "role": "reader"}); r.Status != 409 {
		t.Fatalf("duplicate name: %v", r)
	}

	// Revoke on this node: refused here at once, on the other node once
	// its cache entry (2 s) is past — within the 5 s promised.
	if r := doAs(t, e.url, "boot", "DELETE", "/api/tokens/"+id, nil); r.Status != 200 {
		t.Fatalf("revoke: %v", r)
	}
	if r := doAs(t, e.url, secret, "GET", "/api/tasks", nil); r.Status != 401 {
		t.Fatalf("revoked token on its node: %v", r)
	}
	clk.Add(DefaultTokenCacheTTL)
	if r := doAs(t, other, secret, "GET", "/api/tasks", nil); r.Status != 401 {
		t.Fatalf("revoked token on the other node after %v: %v", DefaultTokenCacheTTL, r)
	}
	if r := doAs(t, e.url, "boot", "DELETE", "/api/tokens/0123456789abcdef0123456789abcdef", nil); r.Status != 404 {
		t.Fatalf("revoke unknown: %v", r)
	}
}

func TestTokenCreateValidation(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{BootstrapToken: "boot"} })
	cases := []struct {
		body  string
		field string
	}{
		{`{"role":"reader"}`, "name"},
		{`{"name":"x","role":"root"}`, "role"},
		{`{"name":"x"}`, "role"},
		{`{"name":"x","role":"operator","kinds":["a"]}`, "kinds"},
		{`{"name":"x","role":"worker","kinds":["bad kind"]}`, "kinds[0]"},
	}
	for _, c := range cases {
		r := doAs(t, e.url, "boot", "POST", "/api/tokens", c.body)
		if r.Status != 400 || r.field() != c.field {
			t.Errorf("%s: %v, want 400 on field %q", c.body, r, c.field)
		}
	}
}

func TestKindConfinedTokens(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{BootstrapToken: "boot"} })
	sub, _ := mustToken(t, e, "boot", "sub", rota.RoleSubmitter, "a")
	wrk, _ := mustToken(t, e, "boot", "wrk", rota.RoleWorker, "a")

	if r := doAs(t, e.url, sub, "POST", "/api/tasks", map[string]any{"kind": "a", "task": 1}); r.Status != 200 {
		t.Fatalf("submit of its kind: %v", r)
	}
	if r := doAs(t, e.url, sub, "POST", "/api/tasks", map[string]any{"kind": "b", "task": 1}); r.Status != 403 || r.field() != "kind" {
		t.Fatalf("submit of another kind: %v", r)
	}
	batch := map[string]any{"tasks": []any{map[string]any{"kind": "a", "task": 1}, map[string]any{"kind": "b", "task": 1}}}
	if r := doAs(t, e.url, sub, "POST", "/api/tasks/batch", batch); r.Status != 403 || r.field() != "tasks[1].kind" ||
		r.Message != `token "sub" may not use kind "b" (it is confined to a)` {
		t.Fatalf("batch with another kind: %v", r)
	}
	if r := doAs(t, e.url, wrk, "POST", "/api/workers/claim", map[string]any{"worker_id": "w", "kinds": []string{"a", "b"}}); r.Status != 403 || r.field() != "kinds[1]" {
		t.Fatalf("claim of another kind: %v", r)
	}
	// A run of kind b, held by worker w through the admin.
	if r := doAs(t, e.url, "boot", "POST", "/api/tasks", map[string]any{"kind": "b", "task": 1}); r.Status != 200 {
		t.Fatal(r)
	}
	r := doAs(t, e.url, "boot", "POST", "/api/workers/claim", map[string]any{"worker_id": "w", "kinds": []string{"b"}})
	var claim rotaapi.ClaimResponse
	if err := json.Unmarshal(r.Data, &claim); err != nil || len(claim.Tasks) != 1 {
		t.Fatalf("claim b: %v", r)
	}
	runB := claim.Tasks[0].RunID
	for _, route := range []string{"heartbeat", "succeed", "fail", "release"} {
		if r := doAs(t, e.url, wrk, "POST", "/api/runs/"+runB+"/"+route, map[string]any{"worker_id": "w"}); r.Status != 403 {
			t.Errorf("%s of a run of another kind: %v", route, r)
		}
	}
	// Its own kind works, and in a batch of reports only the other kind's
	// report is refused.
	r = doAs(t, e.url, wrk, "POST", "/api/workers/claim", map[string]any{"worker_id": "w", "kinds": []string{"a"}})
	if err := json.Unmarshal(r.Data, &claim); err != nil || len(claim.Tasks) != 1 {
		t.Fatalf("claim a: %v", r)
	}
	runA := claim.Tasks[0].RunID
	reports := map[string]any{"worker_id": "w", "reports": []any{
		map[string]any{"run_id": runB, "outcome": "succeed"},
		map[string]any{"run_id": runA, "outcome": "succeed"},
	}}
	r = doAs(t, e.url, wrk, "POST", "/api/runs/reports", reports)
	var res rotaapi.ReportsResponse
	if err := json.Unmarshal(r.Data, &res); err != nil || r.Status != 200 || len(res.Results) != 2 {
		t.Fatalf("reports: %v", r)
	}
	if res.Results[0].Error == nil || res.Results[0].Error.Code != 40300 || res.Results[1].Error != nil || res.Results[1].Status != rota.StatusSuccess {
		t.Fatalf("reports results: %s", r.Data)
	}
}

func TestAuditLog(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{BootstrapToken: "boot"} })
	op, _ := mustToken(t, e, "boot", "alice", rota.RoleOperator)

	steps := []struct {
		method, path string
		body         any
	}{
		{"PUT", "/api/kinds/email", map[string]any{"max_running": 5}},
		{"PUT", "/api/kinds/email", map[string]any{"max_running": 7}},
		{"POST", "/api/kinds/email/pause", nil},
		{"POST", "/api/tasks", map[string]any{"kind": "email", "task": 1}}, // the workload: not audited
	}
	for _, s := range steps {
		if r := doAs(t, e.url, op, s.method, s.path, s.body, "X-Request-ID", "req-42"); r.Status != 200 {
			t.Fatalf("%s %s: %v", s.method, s.path, r)
		}
	}
	if r := doAs(t, e.url, op, "GET", "/api/audit", nil); r.Status != 403 {
		t.Fatalf("operator reading the audit log: %v", r)
	}
	r := doAs(t, e.url, "boot", "GET", "/api/audit?limit=10", nil)
	var got rotaapi.AuditList
	if err := json.Unmarshal(r.Data, &got); err != nil || r.Status != 200 {
		t.Fatalf("audit: %v", r)
	}
	var actions []string
	for _, rec := range got.Records {
		actions = append(actions, rec.Action+" "+rec.Actor+" "+rec.Target)
	}
	want := []string{"kind.pause alice email", "kind.update alice email", "kind.update alice email", "token.create bootstrap " + got.Records[3].Target}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Fatalf("audit actions, newest first (-want +got):\n%s", diff)
	}
	second := got.Records[1]
	if second.Role != rota.RoleOperator || second.RequestID != "req-42" || second.RemoteAddr == "" {
		t.Fatalf("record: %+v", second)
	}
	var before, after rotaapi.Kind
	if err := json.Unmarshal(second.Before, &before); err != nil || before.MaxRunning != 5 {
		t.Fatalf("before: %s", second.Before)
	}
	if err := json.Unmarshal(second.After, &after); err != nil || after.MaxRunning != 7 {
		t.Fatalf("after: %s", second.After)
	}
	if strings.Contains(string(got.Records[3].After), TokenPrefix) {
		t.Fatalf("the token's secret is in the audit log: %s", got.Records[3].After)
	}
	// Filters and pages.
	r = doAs(t, e.url, "boot", "GET", "/api/audit?action=kind.update&limit=1", nil)
	var page rotaapi.AuditList
	if err := json.Unmarshal(r.Data, &page); err != nil || len(page.Records) != 1 || page.NextCursor == "" {
		t.Fatalf("page 1: %v", r)
	}
	r = doAs(t, e.url, "boot", "GET", "/api/audit?action=kind.update&limit=1&cursor="+page.NextCursor, nil)
	if err := json.Unmarshal(r.Data, &page); err != nil || len(page.Records) != 1 || page.Records[0].ID != got.Records[2].ID {
		t.Fatalf("page 2: %v", r)
	}
	since := time.Now().Add(time.Hour).Unix()
	r = doAs(t, e.url, "boot", "GET", "/api/audit?since="+itoa(since), nil)
	if err := json.Unmarshal(r.Data, &page); err != nil || len(page.Records) != 0 {
		t.Fatalf("since the future: %v", r)
	}
	for _, q := range []string{"since=x", "cursor=zz", "limit=0", "bogus=1"} {
		if r := doAs(t, e.url, "boot", "GET", "/api/audit?"+q, nil); r.Status != 400 {
			t.Errorf("?%s: %v, want 400", q, r)
		}
	}
}

func TestAuditAnonymousWithAuthOff(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{} })
	if r := doAs(t, e.url, "", "POST", "/api/workers/claim", map[string]any{"worker_id": "w1", "kinds": []string{"k"}, "wait_seconds": 0}); r.Status != 200 {
		t.Fatalf("claim: %v", r)
	}
	if r := doAs(t, e.url, "", "POST", "/api/workers/w1/stop", nil); r.Status != 200 {
		t.Fatalf("worker stop: %v", r)
	}
	res, err := e.store.AuditList(t.Context(), storeAuditAll())
	if err != nil || len(res.Records) != 1 {
		t.Fatalf("audit: %+v, %v", res, err)
	}
	if rec := res.Records[0]; rec.Actor != ActorAnonymous || rec.Role != rota.RoleAdmin || rec.Action != "worker.stop" || rec.Target != "w1" {
		t.Fatalf("record %+v", rec)
	}
	r := doAs(t, e.url, "", "GET", "/api/auth/me", nil)
	if r.Status != 200 || !strings.Contains(string(r.Data), `"auth":false`) {
		t.Fatalf("me: %v", r)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func storeAuditAll() store.AuditListParams { return store.AuditListParams{Limit: 100} }
