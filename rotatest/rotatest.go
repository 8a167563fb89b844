// Package rotatest runs a real Rota server inside a Go test or example, so
// that code using rotaclient and rotaworker is tested against the same
// server a deployment runs, with nothing to install.
//
// A Server keeps its state in an embedded SQLite store in a temporary
// directory and serves the API on a free loopback port:
//
//	func TestSend(t *testing.T) {
//		srv := rotatest.NewServer(t) // stopped when the test ends
//		res, err := srv.Client.Submit(ctx, rotaclient.TaskParams{Kind: "email"})
//		...
//		w := rotaworker.New(rotaworker.Config{Server: srv.URL})
//	}
//
// Outside a test (a runnable example, a demo), Start returns a Server that
// Close stops.
//
// Test servers favour speed over a power loss: their commits are not synced
// to disk (a crash of the process loses nothing, as in production), a
// failed task is retried after 20 ms instead of 1 s, and an expired lease is
// noticed within 50 ms. Their logs are discarded.
package rotatest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/server"
	"github.com/rotahq/rota/rotaclient"
)

// Defaults of a test server, shorter than a production server's so that
// tests of retries and lost leases run quickly.
const (
	// RetryBackoff is the base of the exponential retry backoff.
	RetryBackoff = 20 * time.Millisecond
	// ReapInterval bounds how late an expired lease is noticed.
	ReapInterval = 50 * time.Millisecond
	// StopTimeout bounds how long Close waits for in-flight requests
	// (a worker's long-poll claims end at once).
	StopTimeout = 10 * time.Second
)

// Server is a running in-process Rota server. Its fields are set by
// NewServer or Start and never change; it is safe for concurrent use.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:PORT": give it to
	// rotaclient.Config.BaseURL or rotaworker.Config.Server.
	URL string
	// Client is a ready client of the server.
	Client *rotaclient.Client

	srv      *server.Server
	dir      string // removed by Close when Start made it; "" otherwise
	once     sync.Once
	closeErr error
}

// NewServer starts a server whose store lives in tb.TempDir() and stops it
// when the test ends (tb.Cleanup). A failure to start fails the test at
// once.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s, err := start(context.Background(), tb.TempDir(), false)
	if err != nil {
		tb.Fatalf("rotatest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("rotatest: %v", err)
		}
	})
	return s
}

// Start starts a server whose store lives in a new temporary directory,
// for code that has no testing.TB (runnable examples, demos). ctx bounds
// the start only. Close stops the server and removes the directory.
func Start(ctx context.Context) (*Server, error) {
	dir, err := os.MkdirTemp("", "rotatest-")
	if err != nil {
		return nil, fmt.Errorf("rotatest: %w", err)
	}
	s, err := start(ctx, dir, true)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("rotatest: %w", err)
	}
	return s, nil
}

// start runs a server over an embedded store in dir on a free loopback
// port; Close removes dir when owned.
func start(ctx context.Context, dir string, owned bool) (*Server, error) {
	srv, err := server.New(ctx, server.Config{
		Listen:       "127.0.0.1:0",
		DataDir:      dir,
		Relaxed:      true,
		RetryBackoff: RetryBackoff,
		ReapInterval: ReapInterval,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("start server: %w", err), srv.Stop(ctx))
	}
	url := "http://" + srv.Addr()
	c, err := rotaclient.New(rotaclient.Config{BaseURL: url, UserAgent: "rotatest"})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("client: %w", err), srv.Stop(ctx))
	}
	s := &Server{URL: url, Client: c, srv: srv}
	if owned {
		s.dir = dir
	}
	return s, nil
}

// Close stops the server gracefully (waiting claims return empty,
// in-flight requests finish within StopTimeout), closes its store and, for
// a server from Start, removes its directory. Later calls return the
// first call's result.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		err := s.srv.Stop(ctx)
		if err != nil {
			err = fmt.Errorf("rotatest: stop server: %w", err)
		}
		if s.dir != "" {
			if rerr := os.RemoveAll(s.dir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("rotatest: remove %s: %w", s.dir, rerr))
			}
		}
		s.closeErr = err
	})
	return s.closeErr
}
