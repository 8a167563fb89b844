package httpapi

import (
	"context"
	"net/http"
	"reflect"
)

// bodyMode says what a route does with the request body.
type bodyMode int

const (
	// bodyNone: the body is not read (GET routes).
	bodyNone bodyMode = iota
	// bodyOptional: an empty body stands for {}; a non-empty one is
	// decoded strictly.
	bodyOptional
	// bodyRequired: the body must be one JSON object, decoded strictly.
	bodyRequired
)

// requestReader is implemented by requests that take values from the path,
// the query string or the connection. It runs before the body is decoded.
type requestReader interface {
	readRequest(r *http.Request) error
}

// validator is implemented by requests that check their values (and derive
// what execute needs from them) after decoding.
type validator interface {
	validate(a *API) error
}

// bodyLimiter is implemented by requests whose body may be larger than the
// API's default body limit.
type bodyLimiter interface {
	bodyLimit(a *API) int64
}

// mount registers a typed endpoint on mux at pattern (a Go 1.22 pattern,
// "METHOD /path/{var}"): for each request it makes a new Req, reads the
// path and query into it (requestReader), decodes the body into it as body
// says, validates it (validator), calls exec and encodes the Resp it
// returns in a success envelope. Any error, from any step, is answered by
// writeError.
//
// Request types carry their path and query values in unexported fields (or
// fields tagged json:"-"), so a body can never set them.
//
// Before anything else the request must pass the route's entry in the role
// table (authorize); after a successful change of an audited route, one
// audit record is appended (recordAudit).
func mount[Req, Resp any](a *API, mux *http.ServeMux, pattern string, body bodyMode, exec func(ctx context.Context, req *Req) (Resp, error)) {
	pol := a.policy(pattern)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := a.authorize(w, r, pattern, pol); err != nil {
			a.writeError(w, r, err)
			return
		}
		if pol.audit != "" {
			r = r.WithContext(context.WithValue(r.Context(), auditKey{}, &auditNote{}))
		}
		req := new(Req)
		release, err := a.decodeRequest(w, r, req, body)
		defer release()
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		resp, err := exec(r.Context(), req)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			a.health.observe(r.Context(), err)
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if pol.audit != "" {
			a.recordAudit(r, pol.audit)
		}
		a.writeData(w, r, resp)
	})
}

// decodeRequest fills req from r: path and query, body, then validation.
// The body's bytes count against the API's in-flight cap until the caller
// calls release (always non-nil), once the request is answered.
func (a *API) decodeRequest(w http.ResponseWriter, r *http.Request, req any, body bodyMode) (release func(), err error) {
	release = func() {}
	if rr, ok := req.(requestReader); ok {
		if err := rr.readRequest(r); err != nil {
			return release, err
		}
	}
	if body != bodyNone {
		limit := a.maxBody
		if bl, ok := req.(bodyLimiter); ok {
			limit = bl.bodyLimit(a)
		}
		// Reserve what the body may take: its announced length, else the
		// route's limit; keep only what it did take once read.
		want := limit
		if r.ContentLength >= 0 {
			want = min(r.ContentLength, limit)
		}
		held, err := a.inflight.acquire(r.Context(), want)
		if err != nil {
			w.Header().Set("Connection", "close") // the unread body is not waited for
			return release, err
		}
		release = func() { a.inflight.release(held) }
		data, err := readBody(w, r, limit, a.bodyTimeout)
		if err != nil {
			return release, err
		}
		if n := max(int64(len(data)), 1); n < held {
			a.inflight.release(held - n)
			held = n
		}
		switch fd, fast := req.(fastDecoder); {
		case fast && body == bodyRequired && fd.decodeFast(data):
			// Read in one pass: a plain body, checked as decodeKnown would.
		case body == bodyRequired || !isBlank(data):
			if err := decodeKnown(data, req, "", jsonFields(reflect.TypeOf(req))); err != nil {
				return release, err
			}
		}
	}
	if v, ok := req.(validator); ok {
		if err := v.validate(a); err != nil {
			return release, err
		}
	}
	return release, nil
}
