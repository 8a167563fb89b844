package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/mysqlstore/mysqltest"
	"github.com/rotahq/rota/internal/tcpproxy"
)

// TestMySQLLostAnswersUnavailableAndRecovers runs a server on MariaDB
// through a proxy, cuts the proxy while the server runs, and checks that
// submits and claims answer 503 unavailable (never a 500), that readyz is
// not 200 while the database is gone, and that once it is back (same
// address) the same server is ready and works again, with every
// acknowledged submit and report kept.
func TestMySQLLostAnswersUnavailableAndRecovers(t *testing.T) {
	t.Parallel()
	mc, err := mysqlstore.ParseURL(mysqltest.URL())
	if err != nil {
		t.Fatal(err)
	}
	db := mysqltest.NewDatabase(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:0", mc.Addr)
	addr := proxy.Addr()
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), NodeID: "lost",
		Store:  "mysql://" + mc.User + "@" + addr + "/" + db,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		s.Stop(sctx)
	})
	base := "http://" + s.Addr()
	c := &apiClient{t: t, base: base}
	for range 5 {
		c.mustSubmit()
	}
	done := c.claimAndSucceed() // an acknowledged report
	held := c.claim()           // a run whose report comes during the loss

	proxy.Cut()
	// Writes, claims and reports fail: 503 unavailable with Retry-After.
	for _, a := range []apiAnswer{
		callURL(t, "POST", base+"/api/tasks", `{"kind":"lost","task":{}}`),
		callURL(t, "POST", base+"/api/workers/claim", `{"worker_id":"w1","kinds":["lost"]}`),
		callURL(t, "POST", base+"/api/runs/"+held.RunID+"/succeed", `{"worker_id":"w1"}`),
	} {
		if a.status != http.StatusServiceUnavailable || a.code != 50300 || a.retryAfter == "" {
			t.Fatalf("with the database gone: %+v, want 503 code 50300 with Retry-After", a)
		}
	}
	if a := callURL(t, "GET", base+"/api/readyz", ""); a.status == http.StatusOK {
		t.Fatalf("readyz with the database gone: %+v, want not 200", a)
	}

	tcpproxy.Start(t, addr, mc.Addr) // the database is back, same address
	waitReady(t, base, 30*time.Second)
	c.succeed(held.RunID) // the refused report, sent again
	for range 5 {
		c.mustSubmit()
	}
	c.claimAndSucceed()
	for _, id := range c.acked {
		if a := callURL(t, "GET", base+"/api/tasks/"+id, ""); a.status != http.StatusOK {
			t.Fatalf("acknowledged task %s: %+v", id, a)
		}
	}
	var task struct {
		Status string `json:"status"`
	}
	if a := callURL(t, "GET", base+"/api/tasks/"+done, ""); a.status != http.StatusOK || json.Unmarshal(a.data, &task) != nil ||
		task.Status != "SUCCESS" {
		t.Fatalf("task %s, whose success was acknowledged before the loss: %+v %q", done, a, task.Status)
	}
}

// waitReady waits until GET /api/readyz answers 200.
func waitReady(t *testing.T, base string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		a := callURL(t, "GET", base+"/api/readyz", "")
		if a.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz %s after the database came back: %+v", within, a)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiClient submits, claims and reports tasks of kind "lost", keeping the
// ids of the acknowledged submits.
type apiClient struct {
	t     *testing.T
	base  string
	acked []string
}

func (c *apiClient) mustSubmit() {
	c.t.Helper()
	a := callURL(c.t, "POST", c.base+"/api/tasks", `{"kind":"lost","task":{}}`)
	var d struct {
		ID string `json:"task_id"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.data, &d) != nil || d.ID == "" {
		c.t.Fatalf("submit: %+v", a)
	}
	c.acked = append(c.acked, d.ID)
}

// claimedRun is a run a claim handed out.
type claimedRun struct {
	TaskID string `json:"task_id"`
	RunID  string `json:"run_id"`
}

// claim claims one task as worker w1.
func (c *apiClient) claim() claimedRun {
	c.t.Helper()
	a := callURL(c.t, "POST", c.base+"/api/workers/claim", `{"worker_id":"w1","kinds":["lost"]}`)
	var r struct {
		Tasks []claimedRun `json:"tasks"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.data, &r) != nil || len(r.Tasks) != 1 {
		c.t.Fatalf("claim: %+v", a)
	}
	return r.Tasks[0]
}

// succeed reports the success of run runID.
func (c *apiClient) succeed(runID string) {
	c.t.Helper()
	if a := callURL(c.t, "POST", c.base+"/api/runs/"+runID+"/succeed", `{"worker_id":"w1"}`); a.status != http.StatusOK {
		c.t.Fatalf("succeed: %+v", a)
	}
}

// claimAndSucceed claims one task and reports its success; it returns the
// task's id.
func (c *apiClient) claimAndSucceed() string {
	c.t.Helper()
	r := c.claim()
	c.succeed(r.RunID)
	return r.TaskID
}

// TestMySQLUnreachableAtStart checks the startup contract on MySQL: a
// store that refuses connections, or accepts them and never answers, fails
// New within 10 s with a message that names the URL without its password.
func TestMySQLUnreachableAtStart(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() }) // after the subtests
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close() // nothing listens there now
	for name, addr := range map[string]string{"refused": refusedAddr, "silent": silent.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := "mysql://rota:s3cret@" + addr + "/rota"
			start := time.Now()
			s, err := New(t.Context(), Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Store: url,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			took := time.Since(start)
			if err == nil {
				s.Stop(t.Context())
				t.Fatal("New succeeded")
			}
			if took > 10*time.Second {
				t.Errorf("New took %s, want under 10 s", took)
			}
			if msg := err.Error(); !strings.Contains(msg, addr+"/rota") || strings.Contains(msg, "s3cret") {
				t.Errorf("error %q: want the URL named, without its password", msg)
			}
			t.Logf("%s after %s: %v", name, took.Round(time.Millisecond), err)
		})
	}
}
