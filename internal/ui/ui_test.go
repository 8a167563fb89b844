package ui_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rotahq/rota/internal/ui"
)

func newUI(t *testing.T, cfg ui.Config) http.Handler {
	t.Helper()
	u, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return u.Handler()
}

func get(t *testing.T, h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestPagesAndAssets(t *testing.T) {
	t.Parallel()
	h := newUI(t, ui.Config{Version: "9.9.9"})
	for _, tc := range []struct {
		path, ctype string
		status      int
	}{
		{"/", "text/html", 200},
		{"/tasks", "text/html", 200},
		{"/tasks/0123456789abcdef0123456789abcdef", "text/html", 200},
		{"/submit", "text/html", 200},
		{"/schedules", "text/html", 200},
		{"/schedules/new", "text/html", 200},
		{"/schedules/abc/edit", "text/html", 200},
		{"/workers", "text/html", 200},
		{"/kinds", "text/html", 200},
		{"/nope", "text/html", 404},
		{"/tasks/not-an-id", "text/html", 404},
		{"/static/app.js", "text/javascript", 200},
		{"/static/pages/overview.js", "text/javascript", 200},
		{"/static/app.css", "text/css", 200},
		{"/static/favicon.svg", "image/svg+xml", 200},
		{"/static/missing.js", "text/plain", 404},
	} {
		rec := get(t, h, tc.path)
		if rec.Code != tc.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.ctype) {
			t.Errorf("GET %s = %d %s, want %d %s", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.status, tc.ctype)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP = %q", tc.path, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tc.path)
		}
	}
	body := get(t, h, "/").Body.String()
	if !strings.Contains(body, "Rota 9.9.9") || !strings.Contains(body, `<script type="module" src="/static/app.js">`) {
		t.Errorf("shell = %s", body)
	}
	if strings.Contains(body, "logout") {
		t.Error("the shell offers a logout without authentication")
	}
}

func TestAssetsRevalidate(t *testing.T) {
	t.Parallel()
	h := newUI(t, ui.Config{})
	rec := get(t, h, "/static/app.js")
	etag := rec.Header().Get("ETag")
	if etag == "" || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("headers = %v", rec.Header())
	}
	if rec := get(t, h, "/static/app.js", "If-None-Match", etag); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("revalidation = %d with %d bytes, want 304", rec.Code, rec.Body.Len())
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	h := newUI(t, ui.Config{CheckToken: func(_ *http.Request, s string) error {
		if s != "right" {
			return errors.New("wrong")
		}
		return nil
	}})
	post := func(form url.Values) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	page := get(t, h, "/login?next=/tasks%3Fkind%3Da")
	if page.Code != 200 || !strings.Contains(page.Body.String(), `value="/tasks?kind=a"`) {
		t.Fatalf("login page = %d %s", page.Code, page.Body)
	}
	if !strings.Contains(get(t, h, "/").Body.String(), "logout") {
		t.Error("the shell has no logout with authentication on")
	}

	rec := post(url.Values{"token": {"wrong"}, "next": {"/kinds"}})
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Wrong token") || rec.Header().Get("Set-Cookie") != "" {
		t.Errorf("wrong token = %d %v", rec.Code, rec.Header())
	}

	rec = post(url.Values{"token": {"right"}, "next": {"/kinds"}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/kinds" {
		t.Fatalf("right token = %d %v", rec.Code, rec.Header())
	}
	c := rec.Result().Cookies()
	if len(c) != 1 || c[0].Name != ui.DefaultCookieName || c[0].Value != "right" || !c[0].HttpOnly ||
		c[0].SameSite != http.SameSiteStrictMode || c[0].Path != "/" || c[0].MaxAge <= 0 {
		t.Errorf("cookie = %+v", c)
	}

	// The next page is always a path of this site.
	for _, next := range []string{"https://evil.example/", "//evil.example", `/\evil.example`, "javascript:alert(1)", "/login"} {
		rec := post(url.Values{"token": {"right"}, "next": {next}})
		if loc := rec.Header().Get("Location"); loc != "/" {
			t.Errorf("next %q: redirected to %q", next, loc)
		}
	}

	req := httptest.NewRequest(http.MethodPost, "/logout", nil)
	out := httptest.NewRecorder()
	h.ServeHTTP(out, req)
	if c := out.Result().Cookies(); out.Code != http.StatusSeeOther || len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("logout = %d %+v", out.Code, c)
	}

	big := post(url.Values{"token": {strings.Repeat("x", 20<<10)}})
	if big.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized login form = %d", big.Code)
	}
}

func TestLoginWithoutAuthRedirects(t *testing.T) {
	t.Parallel()
	h := newUI(t, ui.Config{})
	if rec := get(t, h, "/login?next=/kinds"); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/kinds" {
		t.Errorf("GET /login without auth = %d %v", rec.Code, rec.Header())
	}
}

// TestNoHTMLFromDataInScripts guards the rule that the UI never parses data
// as HTML: no page module uses innerHTML, outerHTML, insertAdjacentHTML,
// document.write or eval.
func TestNoHTMLFromDataInScripts(t *testing.T) {
	t.Parallel()
	h := newUI(t, ui.Config{})
	for _, p := range []string{"app.js", "lib/dom.js", "lib/api.js", "lib/live.js", "lib/chart.js", "lib/sched.js",
		"pages/overview.js", "pages/tasks.js", "pages/task.js", "pages/submit.js", "pages/schedules.js",
		"pages/schedule.js", "pages/schedule-form.js", "pages/workers.js", "pages/kinds.js"} {
		rec := get(t, h, "/static/"+p)
		if rec.Code != 200 {
			t.Errorf("%s: %d", p, rec.Code)
			continue
		}
		src, _ := io.ReadAll(rec.Body)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(string(src), bad) {
				t.Errorf("%s uses %s", p, bad)
			}
		}
	}
}
