package rotaworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota/rotaworker"
)

// lateServer hands one run (heartbeat timeout 3 s) after holding the first
// claim for hold, stating it started as it answered; its heartbeats are
// acknowledged, or, with oldServer, refused 400 when they carry
// wait_seconds (a server that cannot hold them), and answer stop once stop
// is closed.
type lateServer struct {
	hold      time.Duration
	oldServer bool
	stop      chan struct{}

	mu      sync.Mutex
	claimed bool
	beats   []map[string]any
	reports []string
}

func (f *lateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ok := func(data string) { io.WriteString(w, `{"code":0,"message":"ok","data":`+data+`}`) }
	switch path := r.URL.Path; {
	case path == "/api/workers/claim":
		f.mu.Lock()
		first := !f.claimed
		f.claimed = true
		f.mu.Unlock()
		if !first {
			<-r.Context().Done()
			return
		}
		time.Sleep(f.hold)
		now := time.Now().UnixMilli()
		ok(fmt.Sprintf(`{"drain":false,"server_time_ms":%d,"tasks":[{"task_id":"t1","run_id":"r1","kind":"k","priority":"mid",
			"task":1,"attempt":1,"heartbeat_timeout_seconds":3,"timeout_seconds":0,"lease_expires_at":%d,
			"started_at":%d,"started_at_ms":%d}]}`, now, now/1000+3, now/1000, now))
	case strings.HasSuffix(path, "/heartbeat"):
		var in map[string]any
		json.Unmarshal(body, &in)
		f.mu.Lock()
		f.beats = append(f.beats, in)
		f.mu.Unlock()
		if _, held := in["wait_seconds"]; held && f.oldServer {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"code":40003,"message":"unknown field \"wait_seconds\"","data":{"field":"wait_seconds"}}`)
			return
		}
		select {
		case <-f.stop:
			ok(`{"stop":true,"drain":false,"heartbeat_timeout_seconds":3}`)
		default:
			ok(`{"stop":false,"drain":false,"heartbeat_timeout_seconds":3}`)
		}
	default:
		f.mu.Lock()
		f.reports = append(f.reports, path+" "+string(body))
		f.mu.Unlock()
		ok(`{"results":[{"run_id":"r1","task_id":"t1","status":"SUCCESS","run_status":"SUCCESS"}]}`)
	}
}

func (f *lateServer) start(t *testing.T, h func(ctx context.Context, task *rotaworker.Task[int]) error) {
	t.Helper()
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	w := rotaworker.New(rotaworker.Config{Server: hs.URL, ID: "w", PollWait: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	rotaworker.Handle(w, "k", h)
	run(t, w)
}

// TestLeaseCountsFromTheHandOver: a run with a 3 s lease handed over 4 s
// into the claim's long-poll is heartbeated, not given up as lost.
func TestLeaseCountsFromTheHandOver(t *testing.T) {
	t.Parallel()
	f := &lateServer{hold: 4 * time.Second, stop: make(chan struct{})}
	result := make(chan error, 1)
	f.start(t, func(ctx context.Context, task *rotaworker.Task[int]) error {
		select {
		case <-time.After(1500 * time.Millisecond):
			result <- nil
		case <-ctx.Done():
			result <- context.Cause(ctx)
		}
		return nil
	})
	select {
	case err := <-result:
		if err != nil {
			t.Errorf("handler cancelled: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("handler never ran")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.beats) == 0 {
		t.Error("no heartbeat")
	}
}

// TestOldServerHeartbeatsPlainly: a server that refuses wait_seconds gets
// plain heartbeats, and its stop still reaches the handler.
func TestOldServerHeartbeatsPlainly(t *testing.T) {
	t.Parallel()
	f := &lateServer{oldServer: true, stop: make(chan struct{})}
	cause := make(chan error, 1)
	f.start(t, func(ctx context.Context, task *rotaworker.Task[int]) error {
		time.Sleep(1500 * time.Millisecond)
		close(f.stop)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	select {
	case err := <-cause:
		if !errors.Is(err, rotaworker.ErrTaskStopped) {
			t.Errorf("cause %v, want ErrTaskStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not reach the handler")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	held := 0
	for _, b := range f.beats {
		if _, ok := b["wait_seconds"]; ok {
			held++
		}
	}
	if held != 1 || len(f.beats) < 2 {
		t.Errorf("heartbeats %v: want one refused held heartbeat, then plain ones", f.beats)
	}
}
