package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// fakeNow is a settable clock for the authenticator.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeNow() *fakeNow { return &fakeNow{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (f *fakeNow) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeNow) Add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// authResp is an answer to doAs: the envelope, or only the status for a
// body that is not JSON (the event stream, metrics).
type authResp struct {
	apiResp
	body string
}

// doAs sends a request with "Authorization: Bearer token" (none when
// token is empty) and the extra headers hdr (pairs of name, value).
func doAs(t testing.TB, base, token, method, path string, body any, hdr ...string) authResp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := authResp{apiResp: apiResp{Status: res.StatusCode, Header: res.Header}, body: string(raw)}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.apiResp); err != nil {
			t.Fatalf("%s %s: not an envelope: %s", method, path, raw)
		}
	}
	return out
}

// mustToken creates a token through the API as the bootstrap admin and
// returns its secret and id.
func mustToken(t testing.TB, e *testEnv, admin, name string, role rota.Role, kinds ...string) (secret, id string) {
	t.Helper()
	body := map[string]any{"name": name, "role": role}
	if len(kinds) > 0 {
		body["kinds"] = kinds
	}
	r := doAs(t, e.url, admin, "POST", "/api/tokens", body)
	if r.Status != 200 {
		t.Fatalf("create token %s: %v", name, r)
	}
	var d rotaapi.TokenCreateResponse
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Token, TokenPrefix) || d.Role != role || d.Name != name {
		t.Fatalf("create token answered %+v", d)
	}
	return d.Token, d.TokenID
}

func TestAuthenticatorCredentials(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{BootstrapToken: "s3cret"} })
	reader, _ := mustToken(t, e, "s3cret", "r", rota.RoleReader)
	cases := []struct {
		name   string
		path   string
		header string
		cookie string
		want   int
	}{
		{"no token", "/api/tasks", "", "", 401},
		{"bootstrap bearer", "/api/tasks", "Bearer s3cret", "", 200},
		{"bearer lower-case scheme", "/api/tasks", "bearer s3cret", "", 200},
		{"stored token", "/api/tasks", "Bearer " + reader, "", 200},
		{"wrong bearer", "/api/tasks", "Bearer nope", "", 401},
		{"unknown token with the prefix", "/api/tasks", "Bearer rota_nope", "", 401},
		{"basic scheme", "/api/tasks", "Basic s3cret", "", 401},
		{"wrong header beats right cookie", "/api/tasks", "Bearer nope", "s3cret", 401},
		{"cookie", "/api/tasks", "", reader, 200},
		{"wrong cookie", "/api/stats", "", "nope", 401},
		{"healthz is open", "/api/healthz", "", "", 200},
		{"readyz is open", "/api/readyz", "", "", 200},
		{"healthz with a wrong token is open too", "/api/healthz", "Bearer nope", "", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hdr []string
			if c.header != "" {
				hdr = append(hdr, "Authorization", c.header)
			}
			if c.cookie != "" {
				hdr = append(hdr, "Cookie", AuthCookie+"="+c.cookie)
			}
			r := doAs(t, e.url, "", "GET", c.path, nil, hdr...)
			if r.Status != c.want {
				t.Fatalf("status %d, want %d: %v", r.Status, c.want, r)
			}
			if c.want == 401 && (r.Code != rota.CodeUnauthorized.Number() || r.Header.Get("WWW-Authenticate") == "") {
				t.Fatalf("401 envelope %v, WWW-Authenticate %q", r, r.Header.Get("WWW-Authenticate"))
			}
		})
	}
	if strings.Contains(e.logs.String(), "nope") {
		t.Fatal("a presented secret was logged")
	}
	if !strings.Contains(e.logs.String(), "authentication failed") {
		t.Fatal("failed authentications were not logged")
	}
}

func TestNoAuthenticatorAllowsEverything(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if r := doAs(t, e.url, "", "GET", "/api/tokens", nil); r.Status != 200 {
		t.Fatalf("GET /api/tokens without an Authenticator: %v", r)
	}
}

func TestHostCheckWithAuthOff(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{AllowedHosts: []string{"rota.internal"}} })
	cases := []struct {
		host, path string
		want       int
	}{
		{"127.0.0.1:8080", "/api/stats", 200},
		{"localhost:8080", "/api/stats", 200},
		{"LOCALHOST.", "/api/stats", 200},
		{"app.localhost", "/api/stats", 200},
		{"[::1]:8080", "/api/stats", 200},
		{"rota.internal:8080", "/api/stats", 200},
		{"evil.example", "/api/stats", 403},
		{"evil.example:8080", "/api/tasks", 403},
		{"10.0.0.5:8080", "/api/stats", 403},
		{"evil.example", "/api/healthz", 200}, // probes carry the pod's address
	}
	for _, c := range cases {
		r := doAs(t, e.url, "", "GET", c.path, nil, "Host", c.host)
		if r.Status != c.want {
			t.Errorf("Host %s %s: status %d, want %d (%v)", c.host, c.path, r.Status, c.want, r)
		}
		if c.want == 403 && r.Code != 40300 {
			t.Errorf("Host %s: code %d, want 40300", c.host, r.Code)
		}
	}
	// An anonymous admin may do anything on a good host.
	if r := doAs(t, e.url, "", "POST", "/api/tasks", map[string]any{"kind": "k", "task": 1}); r.Status != 200 {
		t.Fatalf("submit with auth off: %v", r)
	}
}

func TestFailedLoginsAreRateLimited(t *testing.T) {
	t.Parallel()
	clk := newFakeNow()
	e := setup(t, func(o *setupOptions) { o.auth = &AuthConfig{BootstrapToken: "s3cret", Now: clk.Now} })
	for i := 0; i < DefaultMaxFailures; i++ {
		if r := doAs(t, e.url, "wrong-guess", "GET", "/api/tasks", nil); r.Status != 401 {
			t.Fatalf("failure %d: status %d, want 401", i+1, r.Status)
		}
	}
	r := doAs(t, e.url, "wrong-guess", "GET", "/api/tasks", nil)
	if r.Status != 429 || r.Code != rota.CodeRateLimited.Number() || r.Code != 42900 {
		t.Fatalf("failure %d: %v, want 429 rate_limited", DefaultMaxFailures+1, r)
	}
	if ra := r.Header.Get("Retry-After"); ra != "60" {
		t.Fatalf("Retry-After %q, want 60", ra)
	}
	// Even the right secret waits: nothing is checked while blocked.
	if r := doAs(t, e.url, "s3cret", "GET", "/api/tasks", nil); r.Status != 429 {
		t.Fatalf("right secret while blocked: %v", r)
	}
	clk.Add(30 * time.Second)
	if r := doAs(t, e.url, "s3cret", "GET", "/api/tasks", nil); r.Status != 429 || r.Header.Get("Retry-After") != "30" {
		t.Fatalf("half-way: %v Retry-After %q", r, r.Header.Get("Retry-After"))
	}
	clk.Add(30 * time.Second)
	if r := doAs(t, e.url, "s3cret", "GET", "/api/tasks", nil); r.Status != 200 {
		t.Fatalf("after the minute: %v", r)
	}
	if r := doAs(t, e.url, "", "GET", "/api/healthz", nil); r.Status != 200 {
		t.Fatalf("healthz: %v", r)
	}
}

func TestFailureLimiterIsBounded(t *testing.T) {
	t.Parallel()
	l := newFailureLimiter(2, time.Minute, 3)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 100; i++ {
		l.fail(fmt.Sprintf("10.0.0.%d", i), now)
	}
	if n := l.tracked(); n > 3 {
		t.Fatalf("tracks %d addresses, cap 3", n)
	}
	l.fail("a", now)
	l.fail("a", now)
	if _, blocked := l.blocked("a", now); !blocked {
		t.Fatal("2 failures with limit 2: not blocked")
	}
	if _, blocked := l.blocked("a", now.Add(time.Minute)); blocked {
		t.Fatal("still blocked after the window")
	}
}

func TestIsLoopbackListen(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true, "127.0.0.2:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.1.2.3:8080": false, "example.com:80": false,
	} {
		if got := IsLoopbackListen(addr); got != want {
			t.Errorf("IsLoopbackListen(%q) = %v, want %v", addr, got, want)
		}
	}
}
