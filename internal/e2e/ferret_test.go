package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The MongoDB of the cluster tests: ROTA_TEST_MONGODB when set, else the
// embedded FerretDB of mongotest run as a process of its own, built
// without the race detector (in the test process, under -race, FerretDB
// ran several times slower and the three-node test did not end in time
// under CI's load). One server per test process; each test its own
// database.
var (
	ferretOnce = sync.OnceValues(startFerretProcess)
	ferretSeq  atomic.Int64
)

// mongoDB returns the URL of a new database of its own for t.
func mongoDB(t *testing.T) string {
	t.Helper()
	base := os.Getenv("ROTA_TEST_MONGODB")
	if base == "" {
		var err error
		if base, err = ferretOnce(); err != nil {
			t.Fatalf("ferretdb: %v", err)
		}
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/")
	if err != nil {
		t.Fatalf("mongodb url %q: %v", base, err)
	}
	u.Path = fmt.Sprintf("/rota_e2e_%d_%d", os.Getpid(), ferretSeq.Add(1))
	return u.String()
}

// startFerretProcess builds and starts ferretserve on a free loopback port
// and returns its mongodb:// URL. The process dies with the test process
// (Pdeathsig); its directory is a temporary one it removes itself.
func startFerretProcess() (string, error) {
	bin, err := goBuild("github.com/rotahq/rota/internal/store/mongostore/mongotest/ferretserve", "ferretserve")
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "-addr", addr)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start ferretserve: %w", err)
	}
	uri := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			uri <- sc.Text()
		}
		close(uri)
	}()
	select {
	case u, ok := <-uri:
		if !ok || !strings.HasPrefix(u, "mongodb://") {
			_ = cmd.Process.Kill()
			return "", fmt.Errorf("ferretserve printed %q, want its URL", u)
		}
		return u, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return "", fmt.Errorf("ferretserve did not start within 30 s")
	}
}
