package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rotahq/rota"
)

func TestAuthenticatorRequire(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := NewAuthenticator("s3cret").Require(ok)
	cases := []struct {
		name   string
		path   string
		header string
		cookie string
		want   int
	}{
		{"no token", "/api/tasks", "", "", 401},
		{"bearer", "/api/tasks", "Bearer s3cret", "", http.StatusTeapot},
		{"bearer lower-case scheme", "/api/tasks", "bearer s3cret", "", http.StatusTeapot},
		{"wrong bearer", "/api/tasks", "Bearer nope", "", 401},
		{"basic scheme", "/api/tasks", "Basic s3cret", "", 401},
		{"wrong header beats right cookie", "/api/tasks", "Bearer nope", "s3cret", 401},
		{"cookie", "/api/events", "", "s3cret", http.StatusTeapot},
		{"wrong cookie", "/metrics", "", "nope", 401},
		{"healthz is open", "/api/healthz", "", "", http.StatusTeapot},
		{"readyz is open", "/api/readyz", "", "", http.StatusTeapot},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", c.path, nil)
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			if c.cookie != "" {
				r.AddCookie(&http.Cookie{Name: AuthCookie, Value: c.cookie})
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d", w.Code, c.want)
			}
			if c.want == 401 {
				var env envelope
				if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
					t.Fatalf("401 body is not an envelope: %q", w.Body.String())
				}
				if env.Code != rota.CodeUnauthorized.Number() || w.Header().Get("WWW-Authenticate") == "" {
					t.Fatalf("401 envelope %+v, WWW-Authenticate %q", env, w.Header().Get("WWW-Authenticate"))
				}
			}
		})
	}
}

func TestAuthenticatorOff(t *testing.T) {
	t.Parallel()
	var a *Authenticator = NewAuthenticator("")
	if a != nil {
		t.Fatal("empty token must turn authentication off")
	}
	h := a.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/api/tasks", nil))
	if w.Code != 204 {
		t.Fatalf("status %d with auth off", w.Code)
	}
}
