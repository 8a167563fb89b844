package rotaworker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// lateOffsets are how far into an idle worker's long-poll the tasks of the
// clock tests arrive: well past their 2 s timeout.
var lateOffsets = []time.Duration{4 * time.Second, 6 * time.Second, 8 * time.Second, 9 * time.Second}

// waitWorkerSeen waits until the server lists worker id (its first claim
// arrived) and returns when it saw it.
func waitWorkerSeen(t *testing.T, ctx context.Context, c *rotaclient.Client, id string) time.Time {
	t.Helper()
	for {
		ws, err := c.ListWorkers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.ID == id {
				return time.Now()
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("worker %s never claimed", id)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// submitLate submits one task of kind prefix+i at polled+lateOffsets[i]
// (timeout 2 s, no retry) and returns their ids.
func submitLate(t *testing.T, ctx context.Context, c *rotaclient.Client, prefix string, polled time.Time) []string {
	t.Helper()
	ids := make([]string, len(lateOffsets))
	var wg sync.WaitGroup
	for i, off := range lateOffsets {
		wg.Go(func() {
			time.Sleep(time.Until(polled.Add(off)))
			res, err := c.Submit(ctx, rotaclient.TaskParams{Kind: fmt.Sprintf("%s%d", prefix, i), Payload: i,
				TimeoutSeconds: 2, MaxRetries: new(0)})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.TaskID
		})
	}
	wg.Wait()
	return ids
}

// checkFirstAttemptSuccess wants every task SUCCESS with one run.
func checkFirstAttemptSuccess(t *testing.T, wait func(string) *rota.Task, ids []string) {
	t.Helper()
	for i, id := range ids {
		if id == "" {
			continue
		}
		task := wait(id)
		if task.Status != rota.StatusSuccess || task.Attempt != 1 || len(task.Runs) != 1 {
			t.Errorf("task submitted %v into the long-poll: %s after %d attempt(s): %q", lateOffsets[i], task.Status, task.Attempt, task.Message)
		}
	}
}

// TestClocksStartWhenTheTaskArrives is the regression test of issue 12: a
// task handed over late in a long-poll keeps its whole timeout (and lease).
func TestClocksStartWhenTheTaskArrives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-late")
	cfg.PollWait = 10 * time.Second
	w := rotaworker.New(cfg)
	for i := range lateOffsets {
		rotaworker.Handle(w, fmt.Sprintf("late%d", i), func(ctx context.Context, task *rotaworker.Task[int]) error {
			select {
			case <-time.After(time.Second):
				return nil
			case <-ctx.Done():
				return fmt.Errorf("cancelled after %v: %w", task.Timeout, context.Cause(ctx))
			}
		})
	}
	run(t, w)
	polled := waitWorkerSeen(t, b.ctx, b.client, "w-late")
	ids := submitLate(t, b.ctx, b.client, "late", polled)
	checkFirstAttemptSuccess(t, func(id string) *rota.Task { return b.waitTask(t, id) }, ids)
}

// TestStopReachesHandlerFast: with the default heartbeat timeout (30 s), a
// stop cancels the handler and the run ends CANCELED within 2 s.
func TestStopReachesHandlerFast(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := rotaworker.New(b.config(t, "w-stopfast"))
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	rotaworker.Handle(w, "parked", func(ctx context.Context, task *rotaworker.Task[int]) error {
		close(started)
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "parked", Payload: 1})
	within(t, "handler start", started, 10*time.Second)
	time.Sleep(200 * time.Millisecond) // the run's first heartbeat is under way
	stopAt := time.Now()
	if _, err := b.client.StopTask(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-cancelled:
		if !errors.Is(cause, rotaworker.ErrTaskStopped) {
			t.Errorf("cause %v", cause)
		}
		if d := time.Since(stopAt); d > time.Second {
			t.Errorf("handler cancelled %v after the stop, want within 1s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled within 5s of the stop")
	}
	task := b.waitTask(t, id)
	if d := time.Since(stopAt); d > 2*time.Second {
		t.Errorf("run ended %v after the stop, want within 2s", d)
	}
	if task.Status != rota.StatusCanceled || task.Runs[0].Status != rota.StatusCanceled {
		t.Errorf("task %s, run %s", task.Status, task.Runs[0].Status)
	}
}
