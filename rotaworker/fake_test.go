package rotaworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaworker"
)

// fakeServer hands out one run, then answers every heartbeat with 409
// lease_lost, and records the paths it is asked.
type fakeServer struct {
	mu      sync.Mutex
	claimed bool
	paths   []string
	beatAt  []time.Time
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path)
	first := !f.claimed
	f.mu.Unlock()
	switch {
	case r.URL.Path == "/api/workers/claim" && first:
		f.mu.Lock()
		f.claimed = true
		f.mu.Unlock()
		io.WriteString(w, `{"code":0,"message":"ok","data":{"drain":false,"tasks":[{"task_id":"t1","run_id":"r1","kind":"k",
			"priority":"mid","task":{"x":1},"attempt":1,"heartbeat_timeout_seconds":3,"timeout_seconds":0}]}}`)
	case r.URL.Path == "/api/workers/claim":
		select { // an empty long poll
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		io.WriteString(w, `{"code":0,"message":"ok","data":{"drain":false,"tasks":[]}}`)
	case strings.HasSuffix(r.URL.Path, "/heartbeat"):
		f.mu.Lock()
		f.beatAt = append(f.beatAt, time.Now())
		f.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"code":40901,"message":"run r1 is no longer held by this worker: its lease expired","data":null}`)
	default:
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"code":50000,"message":"unexpected","data":null}`)
	}
}

func TestLeaseLost409CancelsWithinOneInterval(t *testing.T) {
	t.Parallel()
	f := &fakeServer{}
	hs := httptest.NewServer(f)
	defer hs.Close()
	w := rotaworker.New(rotaworker.Config{Server: hs.URL, ID: "w", Logger: slog.New(slog.DiscardHandler)})
	type seen struct {
		cause error
		at    time.Time
	}
	out := make(chan seen, 1)
	rotaworker.Handle(w, "k", func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		<-ctx.Done()
		out <- seen{context.Cause(ctx), time.Now()}
		return ctx.Err()
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	var s seen
	select {
	case s = <-out:
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled")
	}
	var re *rota.Error
	if !errors.Is(s.cause, rota.ErrLeaseLost) || !errors.As(s.cause, &re) || !strings.Contains(re.Message, "lease expired") {
		t.Errorf("cause = %v", s.cause)
	}
	f.mu.Lock()
	first := f.beatAt[0]
	f.mu.Unlock()
	// The first heartbeat comes one interval (1 s) after the claim; its 409
	// cancels at once.
	if d := s.at.Sub(first); d < 0 || d > 300*time.Millisecond {
		t.Errorf("cancelled %v after the 409", d)
	}
	if err := w.StopAndCancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.paths {
		if strings.HasSuffix(p, "/succeed") || strings.HasSuffix(p, "/fail") {
			t.Errorf("a lost run was reported: %s", p)
		}
	}
}
