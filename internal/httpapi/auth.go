package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/rotahq/rota"
)

// AuthCookie is the cookie the web UI's login sets; it carries the same
// token as the Authorization header, so that the browser's EventSource
// (which cannot set headers) is authenticated too.
const AuthCookie = "rota_token"

// Authenticator checks the shared API token: a request must carry
// "Authorization: Bearer <token>" or the AuthCookie. Liveness and readiness
// probes are open, so that orchestrators need no secret.
type Authenticator struct {
	token []byte // immutable
}

// NewAuthenticator returns an Authenticator for token, or nil when token is
// empty (authentication off).
func NewAuthenticator(token string) *Authenticator {
	if token == "" {
		return nil
	}
	return &Authenticator{token: []byte(token)}
}

// Check reports whether s is the token, in constant time.
func (a *Authenticator) Check(s string) bool {
	return subtle.ConstantTimeCompare([]byte(s), a.token) == 1
}

// Authorized reports whether r carries the token.
func (a *Authenticator) Authorized(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && a.Check(strings.TrimSpace(tok))
	}
	if c, err := r.Cookie(AuthCookie); err == nil {
		return a.Check(c.Value)
	}
	return false
}

// open lists the paths served without a token.
var openPaths = map[string]bool{"/api/healthz": true, "/api/readyz": true}

// Require wraps next so that requests without the token get a 401 envelope
// (code unauthorized) and a WWW-Authenticate header. A nil Authenticator
// lets everything through.
func (a *Authenticator) Require(next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] || a.Authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="rota"`)
		WriteError(w, rota.Errorf(rota.CodeUnauthorized, "missing or wrong API token: send \"Authorization: Bearer <token>\""))
	})
}
