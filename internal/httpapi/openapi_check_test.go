package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	oapvalidator "github.com/pb33f/libopenapi-validator"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"github.com/rotahq/rota/docs"
)

// The HTTP tests check every request they send and every response they get
// against the OpenAPI description (docs/openapi.json): setup wraps the API's
// handler in specCheck.wrap, so that a field renamed, added or removed in
// the code but not in the description, an undocumented status or error
// code, fails the test that met it.
//
// The validator is github.com/pb33f/libopenapi-validator, chosen over
// github.com/getkin/kin-openapi because the description is OpenAPI 3.1
// and leans on its JSON Schema 2020-12 dialect ("type": ["integer",
// "null"] for the fields where null means absent, "const", "not"):
// libopenapi-validator has validated 3.1 documents with a 2020-12 schema
// validator for years, while kin-openapi's model is built around 3.0 and
// its 3.1 support is recent (getkin/kin-openapi#230). It is maintained,
// validates a request and a response as net/http values, and checks the
// document itself against the 3.1 schema (TestOpenAPIDocumentValid).

// specCheck validates HTTP exchanges against the description.
type specCheck struct {
	mu sync.Mutex // the validator is not documented as safe for concurrent use
	v  oapvalidator.Validator
	// errorSchema is the envelope of every error, for the answers to
	// requests that no operation describes (unknown paths, other methods).
	errorSchema *base.Schema
	schemas     schema_validation.SchemaValidator
	// stubbed are the paths of the operations a server adds to the API
	// (x-rota-served-by: server): in these tests their handlers are stubs
	// (serverHandlers), so their answers are not checked here but by
	// internal/server's test, against the real handlers.
	stubbed []string
}

// theSpec parses the description once for the package's tests.
var theSpec = sync.OnceValues(func() (*specCheck, error) {
	doc, err := libopenapi.NewDocument(docs.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("parse docs/openapi.json: %w", err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the model of docs/openapi.json: %w", err)
	}
	v, errs := oapvalidator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("validator of docs/openapi.json: %w", errors.Join(errs...))
	}
	proxy := model.Model.Components.Schemas.GetOrZero("Error")
	if proxy == nil {
		return nil, errors.New("docs/openapi.json: no components.schemas.Error")
	}
	c := &specCheck{v: v, errorSchema: proxy.Schema(), schemas: schema_validation.NewSchemaValidator()}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for _, op := range item.GetOperations().FromOldest() {
			if node, ok := op.Extensions.Get("x-rota-served-by"); ok && node.Value == "server" && !slices.Contains(c.stubbed, path) {
				c.stubbed = append(c.stubbed, path)
			}
		}
	}
	if len(c.stubbed) == 0 {
		return nil, errors.New("docs/openapi.json: no operation marked x-rota-served-by: server")
	}
	return c, nil
})

// loadSpec returns the package's specCheck or fails t.
func loadSpec(t testing.TB) *specCheck {
	t.Helper()
	c, err := theSpec()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wrap returns next checked against the description: each request and its
// response are validated once answered, and a mismatch fails t.
func (c *specCheck) wrap(t testing.TB, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &teeBody{rc: r.Body}
		if r.Body == nil || r.Body == http.NoBody {
			body.eof = true
		} else {
			r.Body = body
		}
		rec := &teeWriter{ResponseWriter: w, header: w.Header()}
		next.ServeHTTP(rec, r)
		if slices.Contains(c.stubbed, r.URL.Path) {
			return
		}
		if problems := c.check(r, body, rec); len(problems) > 0 {
			t.Errorf("OpenAPI: %s %s answered %d %s\n\t%s", r.Method, r.URL.RequestURI(), rec.statusCode(),
				shorten(rec.buf.String()), strings.Join(problems, "\n\t"))
		}
	})
}

// check returns what is wrong with the exchange (request r whose body was
// read as body, answered as rec) according to the description.
func (c *specCheck) check(r *http.Request, body *teeBody, rec *teeWriter) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	status := rec.statusCode()
	method := r.Method
	if method == http.MethodHead {
		// A GET route answers HEAD too, with the headers only.
		method = http.MethodGet
	}
	req := r.Clone(r.Context())
	req.Method = method
	req.Body = io.NopCloser(bytes.NewReader(body.buf.Bytes()))
	// The API reads any body as JSON whatever its Content-Type says
	// (docs/api.md); the description declares application/json.
	if body.buf.Len() > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	var problems []string
	reqOK, reqErrs := c.v.ValidateHttpRequestSync(req)
	if unrouted(reqErrs) {
		// No operation: the API must refuse with 404 or 405 and an error
		// envelope.
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			problems = append(problems, fmt.Sprintf("no operation describes the request (%s), yet it was answered %d", describe(reqErrs), status))
		}
		if r.Method != http.MethodHead {
			if ok, errs := c.schemas.ValidateSchemaBytes(c.errorSchema, rec.buf.Bytes()); !ok {
				problems = append(problems, "the answer is not an Error envelope: "+describe(errs))
			}
		}
		return problems
	}
	// A request the description refuses must be refused by the API (the
	// description may not be stricter than the API); it may have been
	// refused before its body was read whole, which the description
	// cannot judge then.
	if !reqOK && body.eof && status < 400 {
		problems = append(problems, "the description refuses the request, yet the API accepted it: "+describe(reqErrs))
	}
	if r.Method == http.MethodHead {
		return problems
	}
	resp := &http.Response{
		StatusCode: status,
		Header:     rec.header.Clone(),
		Body:       io.NopCloser(bytes.NewReader(rec.buf.Bytes())),
		Request:    req,
	}
	if ok, errs := c.v.ValidateHttpResponse(req, resp); !ok {
		problems = append(problems, "the response does not match the description: "+describe(errs))
	}
	return problems
}

// unrouted reports whether errs say that no operation of the description
// matches the request's path and method.
func unrouted(errs []*liberrors.ValidationError) bool {
	for _, e := range errs {
		if e.ValidationType == helpers.PathValidation &&
			(e.ValidationSubType == helpers.ValidationMissing || e.ValidationSubType == helpers.ValidationMissingOperation) {
			return true
		}
	}
	return false
}

// describe lists validation errors with their schema failures.
func describe(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Message)
		if e.Reason != "" && e.Reason != e.Message {
			b.WriteString(": " + e.Reason)
		}
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, " [%s: %s]", f.FieldPath, f.Reason)
		}
	}
	return b.String()
}

// shorten cuts a body for a failure message.
func shorten(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// teeBody records what the handler reads of a request body.
type teeBody struct {
	rc  io.ReadCloser
	buf bytes.Buffer
	eof bool // the body was read to its end
}

// Read reads from the body and records what it returns.
func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.buf.Write(p[:n])
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close closes the body.
func (b *teeBody) Close() error { return b.rc.Close() }

// teeWriter passes a response on and records its status and body.
type teeWriter struct {
	http.ResponseWriter
	header http.Header
	status int
	buf    bytes.Buffer
}

// WriteHeader records the first status and passes it on.
func (w *teeWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write records b and passes it on.
func (w *teeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines of the body, flushes).
func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *teeWriter) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
