package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildOnce builds the rota binary once per test process.
var buildOnce = sync.OnceValues(func() (string, error) { return goBuild("github.com/rotahq/rota/cmd/rota", "rota") })

// goBuild builds pkg (without the race detector, whatever the tests run
// with) into a new temporary directory and returns the binary's path.
func goBuild(pkg, name string) (string, error) {
	dir, err := os.MkdirTemp("", "rota-e2e-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return bin, nil
}

func rotaBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatalf("build rota: %v", err)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a rota process under test.
type proc struct {
	cmd  *exec.Cmd
	addr string
	log  *syncBuffer
	done chan struct{}
}

// syncBuffer is a bytes.Buffer the process writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logBytes returns a copy of what the process logged so far.
func (p *proc) logBytes() []byte {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	return bytes.Clone(p.log.buf.Bytes())
}

// startServer starts `rota server` on addr with data in dir and waits until
// it answers.
func startServer(t *testing.T, addr, dir string, extra ...string) *proc {
	t.Helper()
	p, err := tryStartServer(t, addr, dir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// errAddrInUse is tryStartServer's error when another process took addr
// between freePort and the server's bind.
var errAddrInUse = errors.New("address already in use")

// tryStartServer is startServer returning its failure; one to bind addr
// matches errAddrInUse.
func tryStartServer(t *testing.T, addr, dir string, extra ...string) (*proc, error) {
	t.Helper()
	args := append([]string{"server", "--listen", addr, "--data", dir, "--log-level", "warn"}, extra...)
	cmd := exec.Command(rotaBinary(t), args...)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, addr: addr, log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/api/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p, nil
			}
		}
		select {
		case <-p.done:
			if strings.Contains(log.String(), "address already in use") {
				return nil, fmt.Errorf("rota server on %s: %w", addr, errAddrInUse)
			}
			return nil, fmt.Errorf("rota server exited early: %s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("rota server did not answer on %s: %s", addr, log.String())
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// envelope is the API's response shape.
type envelope struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// call sends a JSON request and decodes the envelope's data into out.
func call(ctx context.Context, method, url string, body, out any) (int, envelope, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, envelope{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, envelope{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, envelope{}, err
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return resp.StatusCode, env, fmt.Errorf("decode %s %s: %w", method, url, err)
	}
	if out != nil && env.Code == 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return resp.StatusCode, env, err
		}
	}
	return resp.StatusCode, env, nil
}
