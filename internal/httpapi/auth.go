package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rotahq/rota"
)

// AuthCookie is the cookie the web UI's login sets; it carries the same
// token as the Authorization header, so that the browser's EventSource
// (which cannot set headers) is authenticated too.
const AuthCookie = "rota_token"

// TokenPrefix begins every token secret Rota makes, so that a leaked one
// is recognizable (secret scanners, logs).
const TokenPrefix = "rota_"

// Names of the principals that are not stored tokens.
const (
	// ActorAnonymous is every request's principal when authentication is
	// off: an admin.
	ActorAnonymous = "anonymous"
	// ActorBootstrap is the principal of the --auth-token secret: an
	// admin.
	ActorBootstrap = "bootstrap"
)

// Defaults of AuthConfig.
const (
	DefaultTokenCacheTTL   = 2 * time.Second
	DefaultMaxFailures     = 20
	DefaultFailureWindow   = time.Minute
	DefaultMaxTrackedAddrs = 10000
)

// maxCachedTokens bounds the token cache; when full it is emptied (its
// entries are cheap to load again).
const maxCachedTokens = 10000

// TokenStore is what the authenticator needs of the store.
type TokenStore interface {
	TokenGetByHash(ctx context.Context, hash string) (*rota.Token, error)
}

// Principal is who makes a request: a stored token, the bootstrap token or,
// with authentication off, the anonymous admin.
type Principal struct {
	TokenID string // "" unless a stored token
	Name    string
	Role    rota.Role
	// Kinds, when not empty, confines the principal to these task kinds.
	Kinds []string
}

// allowsKind reports whether p may act on tasks of kind.
func (p *Principal) allowsKind(kind string) bool {
	return len(p.Kinds) == 0 || slices.Contains(p.Kinds, kind)
}

// AuthConfig configures an Authenticator. Zero values mean the defaults.
type AuthConfig struct {
	// BootstrapToken is the admin secret given on the command line
	// (--auth-token). Empty: authentication is off, every request is the
	// anonymous admin and only the Host check below applies.
	BootstrapToken string
	// Tokens resolves stored tokens. Nil: only the bootstrap token.
	Tokens TokenStore
	// AllowedHosts are the Host names (without port) accepted, besides
	// loopback names and addresses, while authentication is off: the
	// advertised host. Other hosts get 403, so that a DNS-rebinding page
	// cannot drive an unauthenticated server through a browser.
	AllowedHosts []string
	// CacheTTL is how long a resolved token is trusted without asking the
	// store again (default DefaultTokenCacheTTL): a revocation is seen by
	// every node within it.
	CacheTTL time.Duration
	// MaxFailures failed authentications from one address within
	// FailureWindow block that address's authentications (429) until the
	// window ends (defaults DefaultMaxFailures, DefaultFailureWindow).
	MaxFailures   int
	FailureWindow time.Duration
	// MaxTrackedAddrs bounds the addresses whose failures are counted
	// (default DefaultMaxTrackedAddrs).
	MaxTrackedAddrs int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the failed authentications, at warn level (default
	// slog.Default()).
	Logger *slog.Logger
}

// Authenticator identifies the principal of each request: from an
// "Authorization: Bearer <token>" header or the AuthCookie. Stored tokens
// are looked up by the SHA-256 of the secret (a fast hash is enough for
// 256-bit random secrets: there is nothing to brute-force) and cached for
// CacheTTL. Create it with NewAuthenticator; it is safe for concurrent use.
type Authenticator struct {
	cfg       AuthConfig // immutable
	bootstrap []byte     // immutable
	limiter   *failureLimiter

	mu    sync.Mutex // guards cache
	cache map[string]cachedToken
}

// cachedToken is a resolved stored token.
type cachedToken struct {
	p       *Principal // nil when revoked
	expires time.Time
}

// NewAuthenticator returns an Authenticator for cfg.
func NewAuthenticator(cfg AuthConfig) *Authenticator {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultTokenCacheTTL
	}
	if cfg.MaxFailures <= 0 {
		cfg.MaxFailures = DefaultMaxFailures
	}
	if cfg.FailureWindow <= 0 {
		cfg.FailureWindow = DefaultFailureWindow
	}
	if cfg.MaxTrackedAddrs <= 0 {
		cfg.MaxTrackedAddrs = DefaultMaxTrackedAddrs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Authenticator{
		cfg:       cfg,
		bootstrap: []byte(cfg.BootstrapToken),
		limiter:   newFailureLimiter(cfg.MaxFailures, cfg.FailureWindow, cfg.MaxTrackedAddrs),
		cache:     make(map[string]cachedToken),
	}
}

// Enabled reports whether requests must authenticate.
func (a *Authenticator) Enabled() bool { return len(a.bootstrap) > 0 }

// NewTokenSecret returns a new random token secret (TokenPrefix and 32
// random bytes, base64url) and its hash as stored.
func NewTokenSecret() (secret, hash string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashToken(secret)
}

// HashToken is the stored form of a secret: SHA-256, lower-case hex.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// errBadToken is the answer to an unknown or revoked secret.
var errBadToken = rota.Errorf(rota.CodeUnauthorized, "unknown or revoked API token")

// Resolve returns the principal whose secret is secret: the bootstrap
// admin or a stored token that is not revoked. An unknown or revoked
// secret is rota.CodeUnauthorized; a store failure is returned as is.
func (a *Authenticator) Resolve(ctx context.Context, secret string) (*Principal, error) {
	if len(a.bootstrap) > 0 && subtle.ConstantTimeCompare([]byte(secret), a.bootstrap) == 1 {
		return &Principal{Name: ActorBootstrap, Role: rota.RoleAdmin}, nil
	}
	if a.cfg.Tokens == nil || !strings.HasPrefix(secret, TokenPrefix) {
		return nil, errBadToken
	}
	hash := HashToken(secret)
	now := a.cfg.Now()
	a.mu.Lock()
	c, ok := a.cache[hash]
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		if c.p == nil {
			return nil, errBadToken
		}
		return c.p, nil
	}
	t, err := a.cfg.Tokens.TokenGetByHash(ctx, hash)
	if errors.Is(err, rota.ErrNotFound) {
		return nil, errBadToken // not cached: a token made elsewhere works at once
	}
	if err != nil {
		return nil, err
	}
	var p *Principal
	if t.RevokedAt.IsZero() {
		p = &Principal{TokenID: t.ID, Name: t.Name, Role: t.Role, Kinds: t.Kinds}
	}
	a.mu.Lock()
	if len(a.cache) >= maxCachedTokens {
		clear(a.cache) // bounded; entries are cheap to load again
	}
	a.cache[hash] = cachedToken{p: p, expires: now.Add(a.cfg.CacheTTL)}
	a.mu.Unlock()
	if p == nil {
		return nil, errBadToken
	}
	return p, nil
}

// Forget drops the cached token of hash, so that its revocation is seen
// at once on this node (other nodes see it within CacheTTL).
func (a *Authenticator) Forget(hash string) {
	a.mu.Lock()
	delete(a.cache, hash)
	a.mu.Unlock()
}

// rateLimitedError is a rota.CodeRateLimited error with the time to wait.
type rateLimitedError struct {
	err   *rota.Error
	after time.Duration
}

func (e *rateLimitedError) Error() string { return e.err.Error() }

// RetryAfter is how long the client should wait.
func (e *rateLimitedError) RetryAfter() time.Duration { return e.after }

// Unwrap exposes the *rota.Error.
func (e *rateLimitedError) Unwrap() error { return e.err }

// Login checks secret, presented by the client of r: refused at once
// (rota.CodeRateLimited, with a RetryAfter method) while r's address has
// too many recent failures; a failure is logged (never the secret) and
// counted.
func (a *Authenticator) Login(r *http.Request, secret string) (*Principal, error) {
	addr := remoteIP(r)
	now := a.cfg.Now()
	if wait, blocked := a.limiter.blocked(addr, now); blocked {
		return nil, &rateLimitedError{
			err:   rota.Errorf(rota.CodeRateLimited, "too many failed authentications from %s: retry in %d s", addr, retrySeconds(wait)),
			after: wait,
		}
	}
	p, err := a.Resolve(r.Context(), secret)
	if err != nil {
		if rota.ErrorCode(err) == rota.CodeUnauthorized {
			a.limiter.fail(addr, now)
			a.cfg.Logger.LogAttrs(context.WithoutCancel(r.Context()), slog.LevelWarn, "authentication failed",
				slog.String("remote", r.RemoteAddr), slog.String("method", r.Method), slog.String("path", r.URL.Path))
		}
		return nil, err
	}
	return p, nil
}

// retrySeconds rounds d up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// authResult is what the authentication middleware learned of a request;
// the route's check (authorize) decides what to do with it.
type authResult struct {
	p   *Principal // nil: no (valid) credentials
	err error      // why p is nil, when credentials were refused
}

type authKey struct{}

// anonymousAuth is the authResult of every request with authentication
// off (read only: one for all, where each request allocated two).
var anonymousAuth = &authResult{p: &Principal{Name: ActorAnonymous, Role: rota.RoleAdmin}}

// PrincipalFrom returns the principal of a request's context, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	if res, ok := ctx.Value(authKey{}).(*authResult); ok {
		return res.p
	}
	return nil
}

// identify finds the principal of r. With authentication off it is the
// anonymous admin, unless r's Host is not one of ours (DNS rebinding).
func (a *Authenticator) identify(r *http.Request) *authResult {
	if !a.Enabled() {
		if !a.hostAllowed(r.Host) {
			return &authResult{err: rota.Errorf(rota.CodeForbidden,
				"host %q refused: with authentication off only loopback names and the advertised host are served", r.Host)}
		}
		return anonymousAuth
	}
	secret, ok := credentials(r)
	if !ok {
		return &authResult{err: rota.Errorf(rota.CodeUnauthorized, "missing API token: send \"Authorization: Bearer <token>\"")}
	}
	p, err := a.Login(r, secret)
	return &authResult{p: p, err: err}
}

// credentials returns the secret r presents: the Authorization header (a
// wrong scheme is an empty secret) or else the cookie.
func credentials(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", true
		}
		return strings.TrimSpace(tok), true
	}
	if c, err := r.Cookie(AuthCookie); err == nil {
		return c.Value, true
	}
	return "", false
}

// hostAllowed reports whether host (a Host header, with or without port)
// is a loopback name or address or one of AllowedHosts.
func (a *Authenticator) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, h := range a.cfg.AllowedHosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// IsLoopbackListen reports whether a listen address ("host:port") binds
// only loopback interfaces; ":8080" and "0.0.0.0:8080" do not.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// failureLimiter counts failed authentications per address in fixed
// windows. Memory is bounded: at most max addresses are tracked.
type failureLimiter struct {
	limit  int           // immutable
	window time.Duration // immutable
	cap    int           // immutable

	mu    sync.Mutex
	addrs map[string]*failures
}

type failures struct {
	start time.Time
	n     int
}

func newFailureLimiter(limit int, window time.Duration, capacity int) *failureLimiter {
	return &failureLimiter{limit: limit, window: window, cap: capacity, addrs: make(map[string]*failures)}
}

// blocked reports whether addr has reached the limit in its current
// window, and how long until the window ends.
func (l *failureLimiter) blocked(addr string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.addrs[addr]
	if f == nil || !now.Before(f.start.Add(l.window)) || f.n < l.limit {
		return 0, false
	}
	return f.start.Add(l.window).Sub(now), true
}

// fail counts one failure of addr.
func (l *failureLimiter) fail(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.addrs[addr]; f != nil && now.Before(f.start.Add(l.window)) {
		f.n++
		return
	}
	if len(l.addrs) >= l.cap {
		for k, f := range l.addrs {
			if !now.Before(f.start.Add(l.window)) {
				delete(l.addrs, k)
			}
		}
		for k := range l.addrs { // still full: forget an arbitrary one
			if len(l.addrs) < l.cap {
				break
			}
			delete(l.addrs, k)
		}
	}
	l.addrs[addr] = &failures{start: now, n: 1}
}

// tracked is how many addresses the limiter holds (tests).
func (l *failureLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}

// authenticate is the middleware that runs identify and keeps its result
// in the request's context for authorize. Without an Authenticator it
// does nothing (every route is allowed: tests and embedding).
func (a *API) authenticate(next http.Handler) http.Handler {
	if a.auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := a.auth.identify(r)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authKey{}, res)))
	})
}

// authorize checks that the request may use the route of policy pol: open
// routes need nothing; others need a principal whose role allows pol.perm
// (401 without one, 429 while the address is blocked, 403 when the role
// does not allow it). It sets WWW-Authenticate or Retry-After on w.
func (a *API) authorize(w http.ResponseWriter, r *http.Request, pattern string, pol policy) error {
	if pol.perm == permOpen || a.auth == nil {
		return nil
	}
	res, _ := r.Context().Value(authKey{}).(*authResult)
	if res == nil || res.p == nil {
		err := error(rota.Errorf(rota.CodeUnauthorized, "missing API token"))
		if res != nil && res.err != nil {
			err = res.err
		}
		var rl *rateLimitedError
		switch {
		case errors.As(err, &rl):
			w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(rl.after)))
		case rota.ErrorCode(err) == rota.CodeUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="rota"`)
		}
		return err
	}
	if !roleAllows(res.p.Role, pol.perm) {
		return rota.Errorf(rota.CodeForbidden, "token %q (role %s) may not use %s: it needs %s", res.p.Name, res.p.Role, pattern, pol.perm)
	}
	return nil
}

// principal is the principal of ctx for auditing and kind checks: the
// anonymous admin when the API has no Authenticator.
func principal(ctx context.Context) *Principal {
	if p := PrincipalFrom(ctx); p != nil {
		return p
	}
	return &Principal{Name: ActorAnonymous, Role: rota.RoleAdmin}
}

// checkKindAllowed refuses (403) a kind outside the principal's kinds;
// field names the input at fault.
func checkKindAllowed(ctx context.Context, field, kind string) error {
	p := principal(ctx)
	if p.allowsKind(kind) {
		return nil
	}
	return &rota.Error{Code: rota.CodeForbidden, Field: field,
		Message: "token " + strconv.Quote(p.Name) + " may not use kind " + strconv.Quote(kind) + " (it is confined to " + strings.Join(p.Kinds, ", ") + ")"}
}
