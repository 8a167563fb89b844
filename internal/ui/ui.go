// Package ui serves Rota's web UI: an HTML shell, one small JavaScript
// module per page and a style sheet, all embedded in the binary (embed.FS),
// so that `go build` alone produces a server with its UI and no Node
// toolchain is ever needed.
//
// The pages (/, /tasks, /tasks/{id}, /submit, /schedules, /schedules/new,
// /schedules/{id}, /schedules/{id}/edit, /workers, /kinds, /audit) are one shell
// document; static/app.js routes between them with the History API, so
// every page has its own URL and back and forward work. Pages read the JSON
// API under /api/ and follow the event stream (GET /api/events) to update
// without reloading. Every piece of data is put into the page with DOM
// APIs (textContent, createElement), never as HTML, and a strict Content
// Security Policy allows only the UI's own scripts and styles.
//
// When the API requires a token, /login asks for it and stores it in an
// HttpOnly, SameSite=Strict cookie (Config.CookieName) that the API accepts
// in place of an Authorization header; that cookie is also what
// authenticates the browser's EventSource, which cannot send headers.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultCookieName is the name of the cookie that carries the API token
// after a login.
const DefaultCookieName = "rota_token"

// cookieMaxAge is how long a login lasts.
const cookieMaxAge = 30 * 24 * time.Hour

//go:embed static templates
var assets embed.FS

// Config configures the UI. Zero values mean the documented defaults.
type Config struct {
	// CheckToken checks a token presented to /login by the client of r:
	// nil when the API accepts it, else an error (one with a
	// RetryAfter() time.Duration method above zero is answered 429 with
	// Retry-After: too many failures). It logs and counts failures. When
	// nil, authentication is off: /login redirects to /. When set, the API
	// must accept the cookie CookieName as well as the Authorization
	// header.
	CheckToken func(r *http.Request, token string) error
	// CookieName is the cookie /login sets (default DefaultCookieName).
	CookieName string
	// SecureCookie sets the cookie's Secure attribute even on plain HTTP
	// requests (a TLS-terminating proxy in front). It is always set on TLS
	// requests.
	SecureCookie bool
	// Version is shown in the page footer.
	Version string
	// Logger receives the UI's errors (default slog.Default()).
	Logger *slog.Logger
}

// asset is one embedded static file, ready to serve.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

// UI is the web UI's handler. Create it with New; it is safe for
// concurrent use.
type UI struct {
	// All fields are immutable after New.
	cfg     Config
	assets  map[string]asset // by path under /static/
	shell   *template.Template
	login   *template.Template
	handler http.Handler
}

// New parses the templates, indexes the static files and returns the UI.
func New(cfg Config) (*UI, error) {
	if cfg.CookieName == "" {
		cfg.CookieName = DefaultCookieName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	u := &UI{cfg: cfg, assets: map[string]asset{}}
	var err error
	if u.shell, err = template.ParseFS(assets, "templates/shell.html"); err != nil {
		return nil, fmt.Errorf("ui: parse shell template: %w", err)
	}
	if u.login, err = template.ParseFS(assets, "templates/login.html"); err != nil {
		return nil, fmt.Errorf("ui: parse login template: %w", err)
	}
	err = fs.WalkDir(assets, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		u.assets[strings.TrimPrefix(p, "static/")] = asset{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ui: index static files: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /static/{path...}", u.serveAsset)
	mux.HandleFunc("GET /login", u.serveLogin)
	mux.HandleFunc("POST /login", u.postLogin)
	mux.HandleFunc("POST /logout", u.postLogout)
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/static/favicon.svg", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /", u.servePage)
	u.handler = securityHeaders(mux)
	return u, nil
}

// Handler serves the UI: the pages, /static/, /login and /logout. Mount
// it at "/" beside the API (more specific patterns such as /api/ and
// /metrics take precedence).
func (u *UI) Handler() http.Handler { return u.handler }

// CookieName is the name of the cookie that carries the API token.
func (u *UI) CookieName() string { return u.cfg.CookieName }

// contentSecurityPolicy allows the UI's own scripts, styles, images and
// API calls only: no inline script, no eval, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders sets the headers every UI response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// serveAsset serves an embedded static file with an ETag; browsers
// revalidate it on each use (no-cache), so a new binary's files are picked
// up at once while unchanged ones cost a 304.
func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := u.assets[r.PathValue("path")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.contentType)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// pagePattern matches the paths of the UI's pages.
var pagePattern = regexp.MustCompile(`^/(|tasks|tasks/[0-9a-f]{32}|submit|schedules|schedules/new|schedules/[^/]+|schedules/[^/]+/edit|workers|kinds|audit)$`)

// shellData is what the shell template shows.
type shellData struct {
	Version string
	Auth    bool
}

// servePage answers every page path with the shell document (the page's
// module renders it); any other path gets the shell with a 404 status,
// which shows the not-found page.
func (u *UI) servePage(w http.ResponseWriter, r *http.Request) {
	status := http.StatusOK
	if !pagePattern.MatchString(r.URL.Path) {
		status = http.StatusNotFound
	}
	u.render(w, u.shell, status, shellData{Version: u.cfg.Version, Auth: u.cfg.CheckToken != nil})
}

// render executes t into a buffer, then writes it with status.
func (u *UI) render(w http.ResponseWriter, t *template.Template, status int, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		u.cfg.Logger.Error("ui: render template", "template", t.Name(), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// loginData is what the login template shows.
type loginData struct {
	Next    string
	Error   string
	Version string
}

// safeNext returns next when it is a path of this site ("/..." but not
// "//host" or "/\host"), else "/": the login page never redirects away.
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, `/\`) ||
		strings.ContainsAny(next, "\r\n") || strings.HasPrefix(next, "/login") {
		return "/"
	}
	return next
}

// serveLogin shows the login form (GET /login).
func (u *UI) serveLogin(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if u.cfg.CheckToken == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	u.render(w, u.login, http.StatusOK, loginData{Next: next, Version: u.cfg.Version})
}

// maxLoginForm bounds the body of POST /login.
const maxLoginForm = 16 << 10

// postLogin checks the token of the login form and, when it is right,
// sets the cookie and redirects to the page the user came from (POST
// /login, form fields token and next). A wrong token shows the form again
// with 401.
func (u *UI) postLogin(w http.ResponseWriter, r *http.Request) {
	if u.cfg.CheckToken == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		status := http.StatusBadRequest
		if errors.As(err, &mbe) {
			status = http.StatusRequestEntityTooLarge
		}
		u.render(w, u.login, status, loginData{Next: "/", Error: "The form could not be read.", Version: u.cfg.Version})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	next := safeNext(r.PostForm.Get("next"))
	if token == "" {
		u.render(w, u.login, http.StatusUnauthorized, loginData{Next: next, Error: "Wrong token.", Version: u.cfg.Version})
		return
	}
	if err := u.cfg.CheckToken(r, token); err != nil {
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) && ra.RetryAfter() > 0 {
			secs := max(1, int((ra.RetryAfter()+time.Second-1)/time.Second))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			u.render(w, u.login, http.StatusTooManyRequests, loginData{Next: next,
				Error: fmt.Sprintf("Too many failed logins from your address: try again in %d s.", secs), Version: u.cfg.Version})
			return
		}
		u.render(w, u.login, http.StatusUnauthorized, loginData{Next: next, Error: "Wrong token.", Version: u.cfg.Version})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     u.cfg.CookieName,
		Value:    token,
		Path:     "/",
		MaxAge:   int(cookieMaxAge / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil || u.cfg.SecureCookie,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// postLogout clears the cookie and shows the login page (POST /logout).
func (u *UI) postLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: u.cfg.CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil || u.cfg.SecureCookie, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
