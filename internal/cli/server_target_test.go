package cli

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// --target-allow (repeatable) and ROTA_TARGET_ALLOW (comma-separated)
// reach the server: allowed targets are accepted, the rest refused.
func TestServerTargetAllow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag", []string{"--target-allow", "127.0.0.2", "--target-allow", "10.0.0.0/8"}, nil},
		{"env", nil, map[string]string{"ROTA_TARGET_ALLOW": "127.0.0.2, 10.0.0.0/8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			args := append([]string{"server", "--listen", addr, "--data", t.TempDir(), "--durability", "relaxed", "--log-level", "error", "--memory-limit-mib", "0"}, tc.args...)
			var out, errb syncBuffer
			go func() {
				done <- Run(ctx, args, Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return tc.env[k] }})
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
			create := func(url string) error {
				_, err := c.CreateSchedule(ctx, rotaclient.ScheduleParams{Name: strings.NewReplacer(":", "-", "/", "-", ".", "-").Replace(url),
					Kind: "k", CronExpr: "@daily", Payload: []byte(`1`), Target: &rota.Target{URL: url}})
				return err
			}
			deadline := time.Now().Add(30 * time.Second)
			for err := create("http://127.0.0.2:9/hook"); err != nil; err = create("http://127.0.0.2:9/hook") {
				var re *rota.Error
				if errors.As(err, &re) || time.Now().After(deadline) {
					t.Fatalf("allowed 127.0.0.2: %v (%s)", err, errb.String())
				}
				time.Sleep(20 * time.Millisecond) // the server is starting
			}
			if err := create("http://10.1.2.3/hook"); err != nil {
				t.Errorf("allowed 10.1.2.3: %v", err)
			}
			var re *rota.Error
			if err := create("http://127.0.0.1:9/hook"); !errors.As(err, &re) || re.Field != "target.url" {
				t.Errorf("127.0.0.1: %v, want invalid target.url", err)
			}
		})
	}
}

// A malformed entry stops the server from starting, naming it.
func TestServerTargetAllowMalformed(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	code := Run(context.Background(), []string{"server", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--target-allow", "10.0.0.0/99"},
		Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if code == ExitOK || !strings.Contains(errb.String(), "10.0.0.0/99") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
