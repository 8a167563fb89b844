package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// Limits of the token and audit inputs.
const (
	maxTokenNameLen   = 128 // name, in characters
	maxTokenKinds     = 100 // entries of kinds
	defaultAuditLimit = 100
)

// mountAccess registers the token, audit and identity routes.
func (a *API) mountAccess(mux *http.ServeMux) {
	mount(a, mux, "POST /api/tokens", bodyRequired, a.tokenCreate)
	mount(a, mux, "GET /api/tokens", bodyNone, a.tokenList)
	mount(a, mux, "DELETE /api/tokens/{token_id}", bodyOptional, a.tokenRevoke)
	mount(a, mux, "GET /api/audit", bodyNone, a.auditList)
	mount(a, mux, "GET /api/auth/me", bodyNone, a.authMe)
}

func toToken(t *rota.Token) *rotaapi.Token {
	return &rotaapi.Token{TokenID: t.ID, Name: t.Name, Role: t.Role, Kinds: nonNil(t.Kinds),
		CreatedAt: rotaapi.Unix(t.CreatedAt), RevokedAt: rotaapi.Unix(t.RevokedAt)}
}

// tokenCreateRequest is the body of POST /api/tokens.
type tokenCreateRequest struct {
	rotaapi.TokenCreateRequest
}

func (t *tokenCreateRequest) validate(*API) error {
	if err := checkName("name", t.Name, maxTokenNameLen); err != nil {
		return err
	}
	if !t.Role.Valid() {
		return rota.Invalid("role", "must be one of reader, submitter, worker, operator, admin, got %s", shortQuote(string(t.Role)))
	}
	if len(t.Kinds) > 0 && t.Role != rota.RoleSubmitter && t.Role != rota.RoleWorker {
		return rota.Invalid("kinds", "confines submitter and worker tokens only, not %s", t.Role)
	}
	if len(t.Kinds) > maxTokenKinds {
		return rota.Invalid("kinds", "has %d entries, at most %d", len(t.Kinds), maxTokenKinds)
	}
	if len(t.Kinds) == 0 {
		t.Kinds = nil
		return nil
	}
	kinds, err := checkKinds("kinds", t.Kinds)
	if err != nil {
		return err
	}
	t.Kinds = kinds
	return nil
}

// tokenCreate makes a token; its secret is in this answer only (the store
// keeps its hash).
//
// POST /api/tokens
func (a *API) tokenCreate(ctx context.Context, req *tokenCreateRequest) (*rotaapi.TokenCreateResponse, error) {
	secret, hash := NewTokenSecret()
	now := a.now()
	t := rota.Token{ID: a.ids.New(now), Name: req.Name, Role: req.Role, Kinds: req.Kinds, Hash: hash, CreatedAt: now}
	if err := a.store.TokenInsert(ctx, t); err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	noteAudit(ctx, t.ID, nil, toToken(&t))
	return &rotaapi.TokenCreateResponse{TokenID: t.ID, Name: t.Name, Role: t.Role, Kinds: nonNil(t.Kinds), Token: secret}, nil
}

// tokenList lists every token, revoked ones included, without secrets.
//
// GET /api/tokens
func (a *API) tokenList(ctx context.Context, _ *noRequest) (*rotaapi.TokenList, error) {
	ts, err := a.store.TokenList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := &rotaapi.TokenList{Tokens: make([]rotaapi.Token, 0, len(ts))}
	for i := range ts {
		out.Tokens = append(out.Tokens, *toToken(&ts[i]))
	}
	return out, nil
}

// tokenIDRequest names a token in the path.
type tokenIDRequest struct {
	id string
}

func (t *tokenIDRequest) readRequest(r *http.Request) error {
	t.id = r.PathValue("token_id")
	return checkID("token_id", t.id)
}

// tokenRevoke revokes a token: it answers 401 on this node at once and on
// every node within the token cache's time (2 s).
//
// DELETE /api/tokens/{token_id}
func (a *API) tokenRevoke(ctx context.Context, req *tokenIDRequest) (*rotaapi.Token, error) {
	t, err := a.store.TokenRevoke(ctx, store.TokenRevokeParams{ID: req.id, Now: a.now()})
	if err != nil {
		return nil, fmt.Errorf("revoke token: %w", err)
	}
	if a.auth != nil {
		a.auth.Forget(t.Hash)
	}
	out := toToken(t)
	noteAudit(ctx, t.ID, nil, out)
	return out, nil
}

// authMe tells who the caller is (the UI hides what its role may not do).
//
// GET /api/auth/me
func (a *API) authMe(ctx context.Context, _ *noRequest) (*rotaapi.Me, error) {
	p := principal(ctx)
	return &rotaapi.Me{Name: p.Name, Role: p.Role, Kinds: nonNil(p.Kinds), Auth: a.auth != nil && a.auth.Enabled()}, nil
}

// --- the audit log --------------------------------------------------------

// auditKey keys the *auditNote of an audited request's context.
type auditKey struct{}

// auditNote is what a handler tells the audit record of its change:
// target (default: the route's path value) and the object before and
// after, where they are cheap to have.
type auditNote struct {
	target        string
	before, after any
}

// noteAudit fills the audit note of ctx (a no-op on routes that are not
// audited); empty values keep what was noted.
func noteAudit(ctx context.Context, target string, before, after any) {
	n, _ := ctx.Value(auditKey{}).(*auditNote)
	if n == nil {
		return
	}
	if target != "" {
		n.target = target
	}
	if before != nil {
		n.before = before
	}
	if after != nil {
		n.after = after
	}
}

// rawJSON marshals v for the audit log; nil stays nil.
func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// recordAudit appends the audit record of r's successful change. The
// change is done: a failure to record it is logged at error level, not
// answered.
func (a *API) recordAudit(r *http.Request, action string) {
	ctx := r.Context()
	n, _ := ctx.Value(auditKey{}).(*auditNote)
	if n == nil {
		n = &auditNote{}
	}
	target := n.target
	for _, name := range []string{"id", "kind", "token_id"} {
		if target != "" {
			break
		}
		target = r.PathValue(name)
	}
	p := principal(ctx)
	now := a.now()
	rec := rota.AuditRecord{
		ID: a.ids.New(now), At: now, Actor: p.Name, Role: p.Role, Action: action, Target: target,
		RequestID: requestID(ctx), RemoteAddr: r.RemoteAddr, Before: rawJSON(n.before), After: rawJSON(n.after),
	}
	if err := a.store.AuditAppend(context.WithoutCancel(ctx), rec); err != nil {
		a.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "httpapi: append audit record",
			slog.String("action", action), slog.String("target", target), slog.String("actor", p.Name), slog.Any("err", err))
	}
}

// auditListRequest holds the query of GET /api/audit.
type auditListRequest struct {
	params store.AuditListParams
}

func (l *auditListRequest) readRequest(r *http.Request) error {
	q, err := singleValues(r)
	if err != nil {
		return err
	}
	l.params.Limit = defaultAuditLimit
	for name, v := range q {
		switch name {
		case "actor", "action", "target":
			if v != "" {
				if err := checkName(name, v, maxIDLen); err != nil {
					return err
				}
			}
			switch name {
			case "actor":
				l.params.Actor = v
			case "action":
				l.params.Action = v
			default:
				l.params.Target = v
			}
		case "since":
			if v == "" {
				break
			}
			sec, err := strconv.ParseInt(v, 10, 64)
			if err != nil || sec < 0 || sec > maxRunAt {
				return rota.Invalid(name, "must be unix seconds between 0 and %d, got %s", int64(maxRunAt), shortQuote(v))
			}
			l.params.Since = time.Unix(sec, 0).UTC()
		case "cursor":
			if v != "" {
				if err := checkID(name, v); err != nil {
					return rota.Invalid(name, "must be the next_cursor of a previous page (32 lowercase hex characters), got %s", shortQuote(v))
				}
			}
			l.params.Cursor = v
		case "limit":
			if l.params.Limit, err = parseLimit(name, v, l.params.Limit); err != nil {
				return err
			}
		default:
			return unknownParam(name, "actor, action, target, since, limit and cursor")
		}
	}
	return nil
}

// auditList lists the audit log newest first, one page at a time.
//
// GET /api/audit?actor=&action=&target=&since=&limit=&cursor=
func (a *API) auditList(ctx context.Context, req *auditListRequest) (*rotaapi.AuditList, error) {
	res, err := a.store.AuditList(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	out := &rotaapi.AuditList{Records: make([]rotaapi.AuditRecord, 0, len(res.Records)), Page: rotaapi.Page{NextCursor: res.NextCursor}}
	for _, r := range res.Records {
		out.Records = append(out.Records, rotaapi.AuditRecord{ID: r.ID, At: rotaapi.Unix(r.At), Actor: r.Actor, Role: r.Role,
			Action: r.Action, Target: r.Target, RequestID: r.RequestID, RemoteAddr: r.RemoteAddr, Before: r.Before, After: r.After})
	}
	return out, nil
}

// --- request ids ------------------------------------------------------------

type requestIDKey struct{}

// requestIDPattern is the form of a client's X-Request-ID that is kept.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// requestID is the id of ctx's request ("" outside one).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID gives each request an id: the client's X-Request-ID when
// it is a short token, else a new random one. It is echoed in the
// response's X-Request-ID, logged and kept in audit records.
func (a *API) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if !requestIDPattern.MatchString(id) {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}
