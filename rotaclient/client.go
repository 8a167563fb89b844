// Package rotaclient is the Go client of Rota's HTTP API: submitting and
// inspecting tasks, configuring kinds, watching workers and statistics, and
// the raw worker protocol (claim, heartbeat, succeed, fail) that package
// rotaworker builds on.
//
// Every method takes a context first and returns typed values: domain types
// of package rota ([rota.Task], [rota.Kind], [rota.Worker],
// [rota.ClaimedRun]) or small client types of this package. Every error the
// server reports (a response envelope whose code is not 0) is returned as a
// *[rota.Error] carrying the code, the server's message and, for invalid
// input, the field at fault, so callers test it with errors.Is:
//
//	t, err := c.GetTask(ctx, id)
//	if errors.Is(err, rota.ErrNotFound) { ... }
//
// Transport failures (server unreachable, ctx done) are returned wrapped, as
// net/http reports them.
//
// A Client is safe for concurrent use; create one per server and reuse it.
package rotaclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// Config configures a Client. Only BaseURL is required.
type Config struct {
	// BaseURL is the server's URL, e.g. "http://127.0.0.1:8080". A path is
	// kept as a prefix (a server behind a proxy at "https://host/rota"
	// serves "https://host/rota/api/tasks").
	BaseURL string
	// HTTPClient sends the requests. Nil means a client of its own with no
	// overall timeout (claims long-poll for up to 60 s): bound calls with
	// their context.
	HTTPClient *http.Client
	// Header is added to every request (for example an Authorization
	// header for a proxy in front of the server). It is not modified.
	Header http.Header
	// UserAgent is sent as the User-Agent header; default "rotaclient".
	UserAgent string
	// Token is the server's API token (rota server --auth-token), sent as
	// "Authorization: Bearer <token>"; empty sends none.
	Token string
}

// Client talks to one Rota server. Create it with New; it is safe for
// concurrent use.
type Client struct {
	base   *url.URL     // immutable
	hc     *http.Client // immutable
	header http.Header  // immutable
	ua     string       // immutable
}

// New returns a Client for cfg.BaseURL. It fails only when the URL is not
// an absolute http or https URL.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("rotaclient: BaseURL is required")
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("rotaclient: BaseURL %q: %w", cfg.BaseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("rotaclient: BaseURL %q: want http://host[:port] or https://host[:port]", cfg.BaseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// A worker heartbeats each run on its own (and reports each alone
		// from an older server): keep a connection per concurrent request, or every request beyond the
		// idle pool pays a TCP connect and close (measured: a third of
		// the CPU of a busy worker at the default of 2, much at 64).
		tr.MaxIdleConns = 1024
		tr.MaxIdleConnsPerHost = 1024
		hc = &http.Client{Transport: tr}
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "rotaclient"
	}
	header := cfg.Header.Clone()
	if cfg.Token != "" {
		if header == nil {
			header = http.Header{}
		}
		header.Set("Authorization", "Bearer "+cfg.Token)
	}
	return &Client{base: u, hc: hc, header: header, ua: ua}, nil
}

// BaseURL returns the server URL the client was created with (without a
// trailing slash).
func (c *Client) BaseURL() string { return c.base.String() }

// envelope is the shape of every API response, its data kept raw.
type envelope = rotaapi.Envelope[json.RawMessage]

// maxResponse bounds how much of a response body is read.
const maxResponse = 64 << 20

// Do sends one request and decodes the data of the response envelope into
// out. It is the escape hatch under every typed method: path is the API
// path with its query (e.g. "/api/tasks?kind=email"), in is encoded as the
// JSON body (nil sends no body; a json.RawMessage is sent as is), out may be
// nil (the data is discarded) or a *json.RawMessage (the data is kept
// verbatim). A non-zero envelope code is returned as a *rota.Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("rotaclient: %s %s: encode body: %w", method, path, err)
		}
		body = b
	}
	status, raw, err := c.send(ctx, method, path, in != nil, body)
	if err != nil {
		return err
	}
	return decodeResponse(method, path, status, raw, out)
}

// send sends one request with body (a JSON body when hasBody) and returns
// the response's status and body.
func (c *Client) send(ctx context.Context, method, path string, hasBody bool, body []byte) (int, []byte, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	u := c.base.String() + path
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("rotaclient: %s %s: %w", method, path, err)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("rotaclient: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := readAll(io.LimitReader(resp.Body, maxResponse), resp.ContentLength)
	if err != nil {
		return 0, nil, fmt.Errorf("rotaclient: %s %s: read response: %w", method, path, err)
	}
	return resp.StatusCode, raw, nil
}

// readAll reads r to its end, sized by the announced length n when known
// (io.ReadAll grows its buffer step by step from 512 bytes).
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n < 0 || n > maxResponse {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, n+1) // +1: the read that sees the end needs room
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// decodeResponse decodes the data of the envelope raw, answered with
// status, into out (see Do).
func decodeResponse(method, path string, status int, raw []byte, out any) error {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || (env.Code == 0 && env.Message == "" && env.Data == nil) {
		// Not an envelope: a proxy's error page, a server of another kind.
		return statusError(status, raw)
	}
	if env.Code != 0 {
		return envelopeError(env)
	}
	if status >= 300 {
		return statusError(status, raw)
	}
	if out == nil {
		return nil
	}
	if rm, ok := out.(*json.RawMessage); ok {
		*rm = append((*rm)[:0], env.Data...)
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("rotaclient: %s %s: decode data: %w", method, path, err)
	}
	return nil
}

// envelopeError turns a non-zero envelope into a *rota.Error.
func envelopeError(env envelope) *rota.Error {
	e := &rota.Error{Code: rota.CodeOfNumber(env.Code), Message: env.Message}
	var d rotaapi.FieldData
	if len(env.Data) > 0 && env.Data[0] == '{' && json.Unmarshal(env.Data, &d) == nil {
		e.Field = d.Field
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("server error %d (%s)", env.Code, e.Code)
	}
	return e
}

// statusError makes a *rota.Error from a response that is not an envelope.
func statusError(status int, body []byte) *rota.Error {
	code := rota.CodeInternal
	switch {
	case status == http.StatusNotFound:
		code = rota.CodeNotFound
	case status == http.StatusConflict:
		code = rota.CodeConflict
	case status == http.StatusRequestEntityTooLarge:
		code = rota.CodeTooLarge
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		code = rota.CodeUnauthorized
	case status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		code = rota.CodeUnavailable
	case status >= 400 && status < 500:
		code = rota.CodeInvalid
	}
	snippet := strings.TrimSpace(string(body))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	msg := fmt.Sprintf("unexpected response: HTTP %d", status)
	if snippet != "" {
		msg += ": " + snippet
	}
	return &rota.Error{Code: code, Message: msg}
}

// escape makes an id safe as one path segment.
func escape(s string) string { return url.PathEscape(s) }
