package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/rotahq/rota"
)

// Defaults of the server's resource bounds (docs/api.md, "Limits").
const (
	// DefaultMaxHeaderBytes is the default limit of a request's line and
	// headers together.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxInflightBytes is the default cap of the request bodies
	// being read and handled at once.
	DefaultMaxInflightBytes = 256 << 20
	// DefaultInflightWait is how long a body waits for room under the
	// in-flight cap before it is refused with 503.
	DefaultInflightWait = 2 * time.Second
	// RetryAfterSeconds is the Retry-After of every 503 answer.
	RetryAfterSeconds = "2"
)

// HardHeaderBytes is the http.Server MaxHeaderBytes to use with
// LimitHeaders(limit): ample room above limit (4×, at least 1 MiB), so
// that net/http, which answers an over-long header itself in plain text
// before any handler runs, leaves the refusal to LimitHeaders and its
// envelope for all but absurd headers. ReadHeaderTimeout bounds how long
// a connection may hold that much.
func HardHeaderBytes(limit int) int {
	if limit <= 0 {
		limit = DefaultMaxHeaderBytes
	}
	return max(4*limit, 1<<20)
}

// LimitHeaders refuses, with a 431 envelope (code too_large), a request
// whose request line and headers take more than limit bytes (counted as
// they were sent: "Name: value\r\n" per line). limit ≤ 0 means
// DefaultMaxHeaderBytes.
func LimitHeaders(next http.Handler, limit int) http.Handler {
	if limit <= 0 {
		limit = DefaultMaxHeaderBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := headerBytes(r); n > limit {
			w.Header().Set("Connection", "close")
			writeEnvelopeStatus(w, http.StatusRequestHeaderFieldsTooLarge, envelope{
				Code:    rota.CodeTooLarge.Number(),
				Message: fmt.Sprintf("the request line and headers take %d bytes, over the limit of %d", n, limit),
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerBytes is the size of r's request line and headers as sent.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" && r.Header.Get("Host") == "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for name, vs := range r.Header {
		for _, v := range vs {
			n += len(name) + 2 + len(v) + 2
		}
	}
	return n + 2
}

// writeEnvelopeStatus writes env with status, for answers given outside an
// API (no logger at hand).
func writeEnvelopeStatus(w http.ResponseWriter, status int, env envelope) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", RetryAfterSeconds)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(env)
}

// inflight caps the bytes of the request bodies held at once (read, decoded
// and handled). It is safe for concurrent use.
type inflight struct {
	// Immutable after newInflight.
	sem  *semaphore.Weighted
	max  int64
	wait time.Duration
}

func newInflight(max int64, wait time.Duration) *inflight {
	if max <= 0 {
		max = DefaultMaxInflightBytes
	}
	if wait <= 0 {
		wait = DefaultInflightWait
	}
	return &inflight{sem: semaphore.NewWeighted(max), max: max, wait: wait}
}

// errBusy is the refusal of a body that found no room in time.
var errBusy = rota.Errorf(rota.CodeUnavailable, "the server is busy reading other request bodies: retry later")

// acquire reserves n bytes (at most the whole cap), waiting up to the
// configured time. It returns how much it reserved.
func (in *inflight) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 1), in.max)
	if in.sem.TryAcquire(n) {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.wait)
	defer cancel()
	if err := in.sem.Acquire(ctx, n); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, errBusy
		}
		return 0, err
	}
	return n, nil
}

// release gives n reserved bytes back.
func (in *inflight) release(n int64) {
	if n > 0 {
		in.sem.Release(n)
	}
}
