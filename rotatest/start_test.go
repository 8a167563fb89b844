package rotatest

import (
	"net/http"
	"os"
	"testing"
	"time"
)

func TestStartClose(t *testing.T) {
	t.Parallel()
	srv, err := Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.dir); err != nil {
		t.Fatalf("store directory: %v", err)
	}
	if err := srv.Client.Health(t.Context()); err != nil {
		t.Fatalf("health: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(srv.dir); !os.IsNotExist(err) {
		t.Errorf("store directory %s after Close: %v, want it removed", srv.dir, err)
	}
	c := &http.Client{Timeout: 2 * time.Second}
	if res, err := c.Get(srv.URL + "/api/healthz"); err == nil {
		res.Body.Close()
		t.Errorf("%s still answers after Close: %s", srv.URL, res.Status)
	}
}

func TestNewServerKeepsTempDir(t *testing.T) {
	t.Parallel()
	// NewServer's directory belongs to the test (tb.TempDir removes it).
	if srv := NewServer(t); srv.dir != "" {
		t.Errorf("dir = %q, want none owned", srv.dir)
	}
}
