package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"
)

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

// WriteHeader records the first status and passes it on.
func (s *statusWriter) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

// Write counts the bytes written (an implicit 200 included).
func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logRequests logs each request once it is answered: debug for successes,
// info for client errors, warn for server errors (whose details writeError
// or recoverPanics log at error level).
func (a *API) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		level := slog.LevelDebug
		switch {
		case status >= 500:
			level = slog.LevelWarn
		case status >= 400:
			level = slog.LevelInfo
		}
		a.log.LogAttrs(context.WithoutCancel(r.Context()), level, "http request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)),
			slog.Int64("bytes", sw.bytes),
			slog.String("remote", r.RemoteAddr),
		)
	})
}

// panicError is a panic recovered from a handler; it logs with its stack.
type panicError struct {
	value any
	stack []byte
}

// Error describes the panic value (never shown to clients).
func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// LogValue shows the panic value and the stack in logs.
func (p *panicError) LogValue() slog.Value {
	return slog.GroupValue(slog.String("panic", fmt.Sprint(p.value)), slog.String("stack", string(p.stack)))
}

// recoverPanics turns a panic of a handler into a 500 envelope (when
// nothing was written yet) and an error log with the stack.
// http.ErrAbortHandler is re-raised: it is how a handler aborts a response
// on purpose.
func (a *API) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			err := &panicError{value: v, stack: debug.Stack()}
			if sw.status != 0 {
				// Too late for an envelope: log and cut the response.
				a.log.LogAttrs(context.WithoutCancel(r.Context()), slog.LevelError, "httpapi: panic after the response started",
					slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
				panic(http.ErrAbortHandler)
			}
			a.writeError(sw, r, err)
		}()
		next.ServeHTTP(sw, r)
	})
}
