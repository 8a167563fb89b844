package httpapi

import (
	"context"
	"net/http"
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
		if err := a.decodeRequest(w, r, req, body); err != nil {
			a.writeError(w, r, err)
			return
		}
		resp, err := exec(r.Context(), req)
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
func (a *API) decodeRequest(w http.ResponseWriter, r *http.Request, req any, body bodyMode) error {
	if rr, ok := req.(requestReader); ok {
		if err := rr.readRequest(r); err != nil {
			return err
		}
	}
	if body != bodyNone {
		limit := a.maxBody
		if bl, ok := req.(bodyLimiter); ok {
			limit = bl.bodyLimit(a)
		}
		data, err := readBody(w, r, limit, a.bodyTimeout)
		if err != nil {
			return err
		}
		if body == bodyRequired || !isBlank(data) {
			if err := decodeStrict(data, req, ""); err != nil {
				return err
			}
		}
	}
	if v, ok := req.(validator); ok {
		if err := v.validate(a); err != nil {
			return err
		}
	}
	return nil
}
