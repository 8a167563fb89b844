package rotaworker_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// workerStatus returns the status the server lists for worker id.
func (b *bundle) workerStatus(t *testing.T, id string) rota.WorkerStatus {
	t.Helper()
	ws, err := b.client.ListWorkers(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w.Status
		}
	}
	t.Fatalf("worker %s is not listed: %+v", id, ws)
	return ""
}

// TestGracefulStopDeregisters: a worker stopped gracefully (as on SIGTERM:
// its Run context ends) tells the server, which lists it as stopped, not
// lost; claiming again under the same id makes it active and gets work.
func TestGracefulStopDeregisters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-bye"))
	rotaworker.Handle(w, "job", func(context.Context, *rotaworker.Task[int]) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	id := b.submit(t, rotaclient.TaskParams{Kind: "job", Payload: 1})
	if task := b.waitTask(t, id); task.Status != rota.StatusSuccess {
		t.Fatalf("task %s", task.Status)
	}
	if got := b.workerStatus(t, "w-bye"); got != rota.WorkerActive {
		t.Fatalf("running worker: %s, want active", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if got := b.workerStatus(t, "w-bye"); got != rota.WorkerStopped {
		t.Fatalf("gracefully stopped worker: %s, want stopped", got)
	}

	again := rotaworker.New(b.config(t, "w-bye"))
	rotaworker.Handle(again, "job", func(context.Context, *rotaworker.Task[int]) error { return nil })
	run(t, again)
	id = b.submit(t, rotaclient.TaskParams{Kind: "job", Payload: 2})
	if task := b.waitTask(t, id); task.Status != rota.StatusSuccess {
		t.Fatalf("task after restart %s", task.Status)
	}
	if got := b.workerStatus(t, "w-bye"); got != rota.WorkerActive {
		t.Fatalf("worker back: %s, want active", got)
	}
}
