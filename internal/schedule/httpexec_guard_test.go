package schedule_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rotahq/rota"
)

// countingServer serves h on ip and counts the requests it receives.
func countingServer(t *testing.T, ip string, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &hits
}

// A target on a refused address (loopback, not allowed), reached directly,
// by localhost or by a redirect from an allowed host, ends its run FAILED
// with a message saying it was refused and why; the refused server
// receives nothing.
func TestHTTPExecutorRefusedTarget(t *testing.T) {
	t.Parallel()
	victim, hits := countingServer(t, "127.0.0.1", nil)
	vu, _ := url.Parse(victim.URL)
	allowed, allowedHits := countingServer(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, victim.URL+"/inside", http.StatusFound)
	})
	for _, target := range []string{victim.URL + "/hook", "http://localhost:" + vu.Port() + "/hook", allowed.URL + "/redirect"} {
		e := setup(t)
		s, c := e.fireTarget(target, "", 10)
		if st := e.executorAllowing("127.0.0.2").Execute(e.ctx, c); st != rota.StatusFailed {
			t.Fatalf("%s: status %s, want FAILED", target, st)
		}
		runs := e.wantRuns(s.ID, "+5s:FAILED#1")
		msg := e.task(runs[0].TaskID).Message
		if !strings.HasPrefix(msg, "refused: address ") || !strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, "loopback") {
			t.Errorf("%s: message %q, want the refused address and why", target, msg)
		}
		// The schedule cannot go on: it is in the error state.
		if got := e.get(s.ID); got.State() != rota.StateError || !strings.Contains(got.ErrorMessage, "refused") {
			t.Errorf("%s: schedule state %q (%q), want error", target, got.State(), got.ErrorMessage)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the refused server received %d requests", n)
	}
	if n := allowedHits.Load(); n != 1 {
		t.Fatalf("the allowed server received %d requests, want 1 (the redirect)", n)
	}
}

// A target's header values never reach a run's message, even when the
// target echoes them back.
func TestHTTPExecutorRedactsHeaderValues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv, _ := countingServer(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad token "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	})
	s, c := e.fireTarget(srv.URL, "", 10)
	if st := e.executor().Execute(e.ctx, c); st != rota.StatusFailed {
		t.Fatalf("status %s", st)
	}
	runs := e.wantRuns(s.ID, "+5s:FAILED#1")
	if msg := e.task(runs[0].TaskID).Message; msg != "HTTP 401: bad token ***\n" {
		t.Fatalf("message %q", msg)
	}
}
