package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/rotaclient"
)

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func serveOn(t *testing.T, ip string, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// The server's executor goes out through the guard built from
// TargetAllow: an allowed target (127.0.0.2) is called, a redirect from it
// to a refused address (127.0.0.1) ends the run FAILED as refused with
// the refused server receiving nothing, and a target's header values show
// nowhere: not in the API, the run messages, the events or the logs.
func TestTargetsGoThroughTheGuard(t *testing.T) {
	t.Parallel()
	var victimHits atomic.Int32
	victim := serveOn(t, "127.0.0.1", func(http.ResponseWriter, *http.Request) { victimHits.Add(1) })
	allowed := serveOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, victim.URL+"/inside", http.StatusFound)
			return
		}
		http.Error(w, "wrong token "+r.Header.Get("Authorization"), http.StatusForbidden)
	})
	logs := &lockedBuffer{}
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Relaxed: true, NodeID: "n1",
		TargetAllow: []string{"127.0.0.2"}, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := s.hub.Subscribe(t.Context(), events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	c, err := rotaclient.New(rotaclient.Config{BaseURL: "http://" + s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "Bearer s3cret-value"
	msgs := map[string]string{}
	for _, tc := range []struct{ name, url string }{{"echo", allowed.URL + "/hook"}, {"redirect", allowed.URL + "/redirect"}} {
		if _, err := c.CreateSchedule(ctx, rotaclient.ScheduleParams{Name: tc.name, Kind: "hook-" + tc.name, CronExpr: "@yearly", Paused: true,
			Target: &rota.Target{URL: tc.url, Headers: map[string]string{"Authorization": secret}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TriggerSchedule(ctx, tc.name); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			page, err := c.ListScheduleRuns(ctx, tc.name, rotaclient.ScheduleRunsParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Runs) == 1 && page.Runs[0].Status.Terminal() {
				if page.Runs[0].Status != rota.StatusFailed {
					t.Fatalf("%s: run %s", tc.name, page.Runs[0].Status)
				}
				msgs[tc.name] = page.Runs[0].Message
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the run did not end: %+v", tc.name, page.Runs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if m := msgs["echo"]; m != "HTTP 403: wrong token ***\n" {
		t.Errorf("echo message %q", m)
	}
	if m := msgs["redirect"]; !strings.HasPrefix(m, "refused: address 127.0.0.1 is loopback") {
		t.Errorf("redirect message %q", m)
	}
	if n := victimHits.Load(); n != 0 {
		t.Fatalf("the refused server received %d requests", n)
	}
	resp, err := http.Get("http://" + s.Addr() + "/api/schedules")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"Authorization":"***"`) {
		t.Errorf("GET /api/schedules: %s", body)
	}
	var evs []string
	for drained := false; !drained; {
		select {
		case ev := <-sub.C():
			evs = append(evs, fmt.Sprintf("%+v", ev))
		default:
			drained = true
		}
	}
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	for where, text := range map[string]string{"API": string(body), "events": strings.Join(evs, "\n"), "logs": logs.String()} {
		if strings.Contains(text, "s3cret") {
			t.Errorf("%s show the header value:\n%s", where, text)
		}
	}
}
