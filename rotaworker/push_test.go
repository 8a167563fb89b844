package rotaworker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/server"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// setupPush is a server that may post to loopback push workers, checking
// their health every 100 ms, with kind "hooks" in push mode.
func setupPush(t *testing.T) *bundle {
	t.Helper()
	b := setupWith(t, func(c *server.Config) {
		c.TargetAllow = []string{"127.0.0.1"}
		c.PushHealthInterval = 100 * time.Millisecond
	})
	if _, err := b.client.SetKind(b.ctx, "hooks", rotaclient.KindSettings{Dispatch: new(rota.DispatchPush)}); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPushModeRunsDeliveredTasks: a worker with Listen registers, the
// server posts the tasks of its push kind to it, and the worker runs and
// reports them as claimed ones; it is listed with its address and
// capacity, and deregisters when it stops.
func TestPushModeRunsDeliveredTasks(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	cfg := b.config(t, "pusher")
	cfg.Listen = "127.0.0.1:0"
	cfg.Concurrency = 2
	w := rotaworker.New(cfg)
	var mu sync.Mutex
	seen := map[string]int{}
	rotaworker.Handle(w, "hooks", func(ctx context.Context, task *rotaworker.Task[map[string]int]) error {
		mu.Lock()
		seen[task.ID]++
		mu.Unlock()
		return task.SetResult(map[string]int{"double": 2 * task.Payload["n"]})
	})
	done := run(t, w)
	var ids []string
	for n := range 6 {
		ids = append(ids, b.submit(t, rotaclient.TaskParams{Kind: "hooks", Payload: map[string]int{"n": n}}))
	}
	for n, id := range ids {
		task := b.waitTask(t, id)
		var res map[string]int
		if task.Status != rota.StatusSuccess || json.Unmarshal(task.Result, &res) != nil || res["double"] != 2*n {
			t.Fatalf("task %d: %s, result %s", n, task.Status, task.Result)
		}
		if len(task.Runs) != 1 || task.Runs[0].WorkerID != "pusher" {
			t.Fatalf("task %d runs: %+v", n, task.Runs)
		}
	}
	workers, err := b.client.ListWorkers(b.ctx)
	if err != nil || len(workers) != 1 {
		t.Fatalf("workers: %+v, %v", workers, err)
	}
	if pw := workers[0]; pw.Capacity != 2 || !strings.HasPrefix(pw.Address, "http://127.0.0.1:") || pw.Status != rota.WorkerActive {
		t.Fatalf("listed push worker: %+v", pw)
	}
	if err := w.Stop(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("task %s ran %d times", id, seen[id])
		}
	}
	workers, err = b.client.ListWorkers(b.ctx)
	if err != nil || workers[0].Status != rota.WorkerStopped {
		t.Fatalf("after stop: %+v, %v", workers, err)
	}
}

// TestPushModeBadListen: a worker that cannot serve push fails Run.
func TestPushModeBadListen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, listen := range []string{"127.0.0.1:-1", "0.0.0.0:0"} {
		cfg := b.config(t, "bad")
		cfg.Listen = listen
		w := rotaworker.New(cfg)
		rotaworker.Handle(w, "hooks", func(context.Context, *rotaworker.Task[any]) error { return nil })
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		err := w.Run(ctx)
		cancel()
		if err == nil {
			t.Fatalf("Listen %q: Run returned nil", listen)
		}
	}
}
