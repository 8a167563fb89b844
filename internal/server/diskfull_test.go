package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it at the end of the test (we run as root, here and in CI).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("mount a tmpfs (this test needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return path
		}
	}
}

// apiAnswer is a response's status, Retry-After and envelope.
type apiAnswer struct {
	status     int
	retryAfter string
	code       int
	data       json.RawMessage
}

func callURL(t *testing.T, method, url, body string) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Code int             `json:"code"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: %d, not an envelope: %q", method, url, resp.StatusCode, raw)
	}
	return apiAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), code: env.Code, data: env.Data}
}

// TestDiskFullAnswersUnavailableAndRecovers runs a SQLite-backed server on
// a small tmpfs, fills it, and checks that writes answer 503 unavailable
// with Retry-After (never 500), that readyz turns 503, and that once space
// returns the same server is ready and writes again, with every
// acknowledged task present (also after a restart).
func TestDiskFullAnswersUnavailableAndRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := mountTmpfs(t, 2<<20)
	cfg := Config{Listen: "127.0.0.1:0", DataDir: dir, NodeID: "disk",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() { // before the unmount
		if !stopped {
			s.Stop(ctx)
		}
	})
	base := "http://" + s.Addr()
	var acked []string
	payload := fmt.Sprintf(`{"kind":"disk","task":{"pad":%q}}`, strings.Repeat("x", 2000))
	submit := func() apiAnswer {
		a := callURL(t, "POST", base+"/api/tasks", payload)
		if a.status == http.StatusOK {
			var d struct {
				ID string `json:"task_id"`
			}
			if err := json.Unmarshal(a.data, &d); err != nil || d.ID == "" {
				t.Fatalf("submit answered %s without an id", a.data)
			}
			acked = append(acked, d.ID)
		}
		return a
	}
	for range 5 {
		if a := submit(); a.status != http.StatusOK {
			t.Fatalf("submit before the disk is full: %+v", a)
		}
	}
	filler := fillDisk(t, dir)

	// Writes fail: 503 unavailable with Retry-After, never anything else.
	var refused apiAnswer
	for i := 0; i < 2000 && refused.status == 0; i++ {
		switch a := submit(); a.status {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			refused = a
		default:
			t.Fatalf("submit on a full disk: %d %+v, want 200 or 503", a.status, a)
		}
	}
	if refused.status != http.StatusServiceUnavailable || refused.code != 50300 || refused.retryAfter == "" {
		t.Fatalf("submit on a full disk: %+v, want 503 code 50300 with Retry-After", refused)
	}
	if a := callURL(t, "GET", base+"/api/readyz", ""); a.status != http.StatusServiceUnavailable || a.code != 50300 {
		t.Fatalf("readyz on a full disk: %+v, want 503 unavailable", a)
	}
	// Reads still work.
	if a := callURL(t, "GET", base+"/api/tasks/"+acked[0], ""); a.status != http.StatusOK {
		t.Fatalf("read on a full disk: %+v", a)
	}

	// Space returns: the same server is ready again and takes writes.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if a := callURL(t, "GET", base+"/api/readyz", ""); a.status != http.StatusOK {
		t.Fatalf("readyz once space returned: %+v, want 200", a)
	}
	for range 5 {
		if a := submit(); a.status != http.StatusOK {
			t.Fatalf("submit once space returned: %+v", a)
		}
	}
	check := func(base string) {
		t.Helper()
		for _, id := range acked {
			if a := callURL(t, "GET", base+"/api/tasks/"+id, ""); a.status != http.StatusOK {
				t.Fatalf("acknowledged task %s: %+v", id, a)
			}
		}
	}
	check(base)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stopped = true
	if err := s.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	// And after a restart on the same files.
	s2, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Stop(ctx) })
	check("http://" + s2.Addr())
}
