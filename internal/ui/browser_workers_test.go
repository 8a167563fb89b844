package ui_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// TestBrowserWorkerRuns: the workers page lists the runs a worker holds
// (task, kind, since) and, once the worker drained and exited, shows it
// stopped with none.
func TestBrowserWorkerRuns(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	release := make(chan struct{})
	w := startWorker(t, s, "holder", map[string]rotaworker.HandlerFunc{
		"video": func(ctx context.Context, _ *rotaworker.Task[json.RawMessage]) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		},
	})
	id := s.submit(t, rotaclient.TaskParams{Kind: "video", Payload: map[string]any{"file": "a.mp4"}, HeartbeatTimeoutSeconds: 60})
	tb := newTab(t, s)
	tb.open("/workers", `tr[data-worker="holder"]`)
	tb.wait("the held run", `(() => {
		const li = document.querySelector('tr[data-worker="holder"] .worker-runs li');
		return li && li.querySelector('a').getAttribute('href') === '/tasks/`+id+`' &&
			li.textContent.includes('video') && li.textContent.includes('since');
	})()`, 15*time.Second)

	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("worker Stop: %v", err)
	}
	tb.wait("stopped, no runs", `(() => {
		const tr = document.querySelector('tr[data-worker="holder"]');
		return tr && tr.querySelector('.badge').textContent === 'stopped' && !tr.querySelector('.worker-runs');
	})()`, 15*time.Second)
	tb.noConsoleErrors("workers")
}
