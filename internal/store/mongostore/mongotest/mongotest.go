// Package mongotest gives tests a MongoDB URL: ROTA_TEST_MONGODB when set,
// else an embedded FerretDB v1 (SQLite backend) started on a free loopback
// port with a temporary directory, shared by the tests of one process.
// Each test takes its own database (DB), so tests never collide.
package mongotest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a running MongoDB-compatible server.
type Server struct {
	URI    string // mongodb://host:port/ without a database
	Ferret bool   // an embedded FerretDB (no change streams, no transactions)
	stop   func()
}

var (
	mu     sync.Mutex
	shared *Server
	seq    atomic.Int64
)

// Start returns the process's server, starting the embedded FerretDB on
// first use (its temporary directory lives until the process ends).
func Start() (*Server, error) {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		return shared, nil
	}
	if u := os.Getenv("ROTA_TEST_MONGODB"); u != "" {
		shared = &Server{URI: strings.TrimSuffix(u, "/") + "/"}
		return shared, nil
	}
	s, err := startFerret()
	if err != nil {
		return nil, err
	}
	shared = s
	return s, nil
}

func startFerret() (*Server, error) {
	dir, err := os.MkdirTemp("", "rota-ferretdb-")
	if err != nil {
		return nil, fmt.Errorf("ferretdb dir: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	s, err := Serve(addr, dir, os.Getenv("ROTA_TEST_FERRETDB_RAW") == "")
	if err != nil {
		return nil, err
	}
	stop := s.stop
	s.stop = func() {
		stop()
		_ = os.RemoveAll(dir)
	}
	return s, nil
}

// Serve starts an embedded FerretDB v1 (SQLite backend, files in dir,
// no fsync per commit) on addr; with idIndexes, it adds the _id indexes
// that FerretDB's reads by _id can use (see indexIDs). Stop it with
// Server.Close.
func Serve(addr, dir string, idIndexes bool) (*Server, error) {
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: addr},
		Handler:   "sqlite",
		SQLiteURL: "file:" + filepath.ToSlash(dir) + "/?_pragma=synchronous(normal)", // tests need no fsync per commit
		Logger:    ferretLogger(),
	})
	if err != nil {
		return nil, fmt.Errorf("ferretdb: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = f.Run(ctx)
	}()
	if err := waitPort(addr, 10*time.Second); err != nil {
		cancel()
		wg.Wait()
		return nil, err
	}
	if idIndexes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			indexIDs(ctx, dir, 100*time.Millisecond)
		}()
	}
	u, _ := url.Parse(f.MongoDBURI())
	u.Path = "/"
	return &Server{URI: u.String(), Ferret: true, stop: func() {
		cancel()
		wg.Wait()
	}}, nil
}

// Close stops a server Serve started.
func (s *Server) Close() {
	if s.stop != nil {
		s.stop()
	}
}

func waitPort(addr string, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(end) {
			return fmt.Errorf("ferretdb did not listen on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// DB returns the URL of a new database of its own for t: the server's URL
// with a database name unique in this process (and across processes by the
// pid).
func DB(t testing.TB) string {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	name := fmt.Sprintf("rota_%d_%d", os.Getpid(), seq.Add(1))
	u, err := url.Parse(s.URI)
	if err != nil {
		t.Fatalf("mongotest: url %q: %v", s.URI, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Stop stops the embedded server, if one runs (a TestMain's end, so that
// leak checks see its goroutines gone).
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil && shared.stop != nil {
		shared.stop()
	}
	shared = nil
}

// Ferret reports whether tests run on the embedded FerretDB.
func Ferret() bool {
	s, err := Start()
	return err == nil && s.Ferret
}

// ferretLogger logs FerretDB's errors to stderr when ROTA_TEST_FERRETDB_LOG
// is set, else nothing.
func ferretLogger() *slog.Logger {
	if os.Getenv("ROTA_TEST_FERRETDB_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
