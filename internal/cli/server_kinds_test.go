package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// --kinds-file and --strict-kinds reach the server: declared kinds get
// their settings, undeclared ones are refused naming kind.
func TestServerKindsFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "kinds.yaml")
	if err := os.WriteFile(file, []byte("kinds:\n  - name: email\n    max_running: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb syncBuffer
	args := []string{"server", "--listen", addr, "--data", t.TempDir(), "--durability", "relaxed", "--log-level", "error", "--memory-limit-mib", "0",
		"--kinds-file", file, "--strict-kinds"}
	go func() {
		done <- Run(ctx, args, Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	}()
	defer func() {
		cancel()
		if code := <-done; code != ExitOK {
			t.Errorf("server exit %d: %s", code, errb.String())
		}
	}()
	c, err := rotaclient.New(rotaclient.Config{BaseURL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var k *rota.Kind
	for k, err = c.GetKind(ctx, "email"); err != nil; k, err = c.GetKind(ctx, "email") {
		var re *rota.Error
		if errors.As(err, &re) || time.Now().After(deadline) {
			t.Fatalf("get kind: %v (%s)", err, errb.String())
		}
		time.Sleep(20 * time.Millisecond) // the server is starting
	}
	if k.MaxRunning != 3 {
		t.Errorf("email max_running = %d, want 3 from the file", k.MaxRunning)
	}
	if _, err := c.Submit(ctx, rotaclient.TaskParams{Kind: "email", Payload: 1}); err != nil {
		t.Errorf("declared kind: %v", err)
	}
	var re *rota.Error
	if _, err := c.Submit(ctx, rotaclient.TaskParams{Kind: "sms", Payload: 1}); !errors.As(err, &re) || re.Code != rota.CodeInvalid || re.Field != "kind" {
		t.Errorf("undeclared kind: %v, want invalid kind", err)
	}
}

// A bad kinds file stops the server from starting, naming the file and the
// entry.
func TestServerKindsFileBad(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "kinds.json")
	if err := os.WriteFile(file, []byte(`{"kinds": [{"name": "email", "rate": -1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb syncBuffer
	code := Run(context.Background(), []string{"server", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--kinds-file", file},
		Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if msg := errb.String(); code == ExitOK || !strings.Contains(msg, file) || !strings.Contains(msg, `kinds[0] "email"`) || !strings.Contains(msg, "rate") {
		t.Fatalf("exit %d, stderr %q", code, msg)
	}
}
