package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota/internal/server"
	"github.com/rotahq/rota/rotaclient"
)

// bundle is a real in-process server and what the tests need around it.
type bundle struct {
	url    string
	client *rotaclient.Client
	ctx    context.Context
	env    map[string]string // the environment the commands see
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	srv, err := server.New(ctx, server.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Relaxed: true,
		RetryBackoff: 20 * time.Millisecond, ReapInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	url := "http://" + srv.Addr()
	c, err := rotaclient.New(rotaclient.Config{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	// Commands find the server through ROTA_SERVER.
	return &bundle{url: url, client: c, ctx: tctx, env: map[string]string{"ROTA_SERVER": url}}
}

// result is what one command run printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a worker.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run runs the rota command line in-process.
func (b *bundle) run(t *testing.T, args ...string) result {
	t.Helper()
	return b.runIn(t, "", args...)
}

// runIn runs the command line with stdin.
func (b *bundle) runIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb syncBuffer
	code := Run(b.ctx, args, Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin), Getenv: b.getenv})
	return result{out.String(), errb.String(), code}
}

func (b *bundle) getenv(k string) string { return b.env[k] }

// ok runs a command that must succeed and returns its standard output.
func (b *bundle) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := b.run(t, args...)
	if r.code != ExitOK {
		t.Fatalf("rota %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// wantExit runs a command that must fail with code and returns its stderr.
func (b *bundle) wantExit(t *testing.T, code int, args ...string) string {
	t.Helper()
	r := b.run(t, args...)
	if r.code != code {
		t.Fatalf("rota %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	return r.stderr
}

var (
	idRE   = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	timeRE = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b`)
	unixRE = regexp.MustCompile(`("(?:created_at|run_at|start_time|end_time|last_seen|first_seen|lease_expires_at)": )[1-9]\d*`)
)

// normalize replaces ids by ID0001… in order of appearance and times by a
// fixed instant, keeping their lengths so that tables stay aligned.
func normalize(s string) string {
	ids := map[string]string{}
	s = idRE.ReplaceAllStringFunc(s, func(id string) string {
		if n, ok := ids[id]; ok {
			return n
		}
		n := fmt.Sprintf("ID%030d", len(ids)+1)
		ids[id] = n
		return n
	})
	s = timeRE.ReplaceAllString(s, "2001-02-03T04:05:06Z")
	return unixRE.ReplaceAllString(s, "${1}1000000000")
}

// golden compares got, normalized, with testdata/name.golden; set
// ROTA_UPDATE_GOLDEN=1 to rewrite the files.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalize(got)
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv("ROTA_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with ROTA_UPDATE_GOLDEN=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
