package rotaworker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// calls records what a handler saw on each of its calls.
type calls struct {
	mu   sync.Mutex
	seen []string // "run attempt.localRetry"
	runs map[string]int
}

func (c *calls) add(task *rotaworker.Task[int]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[task.RunID]++
	c.seen = append(c.seen, fmt.Sprintf("%d.%d", task.Attempt, task.LocalRetry))
	return len(c.seen)
}

func (c *calls) get() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...), len(c.runs)
}

func TestLocalRetriesRecoverWithinOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-local-ok")
	cfg.MaxLocalRetries = 2
	w := rotaworker.New(cfg)
	var c calls
	rotaworker.Handle(w, "glitchy", func(ctx context.Context, task *rotaworker.Task[int]) error {
		switch c.add(task) {
		case 1:
			panic("first call panics")
		case 2:
			task.SetMessage("not kept: this call fails")
			return errors.New("second call fails")
		}
		task.SetMessage("third call works")
		return nil
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "glitchy", Payload: 1, MaxRetries: new(0)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusSuccess || len(task.Runs) != 1 || task.Message != "third call works" {
		t.Errorf("task = %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	seen, runs := c.get()
	if diff := cmp.Diff([]string{"1.0", "1.1", "1.2"}, seen); diff != "" || runs != 1 {
		t.Errorf("calls (attempt.local_retry) in %d runs (-want +got):\n%s", runs, diff)
	}
}

func TestLocalRetriesExhaustedReportOneFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-local-fail")
	cfg.MaxLocalRetries = 2
	w := rotaworker.New(cfg)
	var c calls
	rotaworker.Handle(w, "broken", func(ctx context.Context, task *rotaworker.Task[int]) error {
		n := c.add(task)
		return fmt.Errorf("call %d failed", n)
	})
	run(t, w)
	// One server retry: each run gets 1 + 2 local calls.
	id := b.submit(t, rotaclient.TaskParams{Kind: "broken", Payload: 1, MaxRetries: new(1)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusFailed || len(task.Runs) != 2 || task.Message != "after 2 local retries: call 6 failed" {
		t.Errorf("task = %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	if got := task.Runs[0].Message; got != "after 2 local retries: call 3 failed" && got != "after 2 local retries: call 6 failed" {
		t.Errorf("a run's message = %q", got)
	}
	seen, runs := c.get()
	if diff := cmp.Diff([]string{"1.0", "1.1", "1.2", "2.0", "2.1", "2.2"}, seen); diff != "" || runs != 2 {
		t.Errorf("calls (attempt.local_retry) in %d runs (-want +got):\n%s", runs, diff)
	}
}

func TestNoRetryIsNotRetriedLocally(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-local-noretry")
	cfg.MaxLocalRetries = 5
	w := rotaworker.New(cfg)
	var c calls
	rotaworker.Handle(w, "final", func(ctx context.Context, task *rotaworker.Task[int]) error {
		if c.add(task) == 1 {
			return errors.New("unexpected")
		}
		return rotaworker.NoRetry(errors.New("bad input"))
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "final", Payload: 1, MaxRetries: new(3)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusFailed || len(task.Runs) != 1 || task.Message != "after 1 local retry: bad input" {
		t.Errorf("task = %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	if seen, _ := c.get(); len(seen) != 2 {
		t.Errorf("calls = %v, want 2: the NoRetry error ends the run", seen)
	}
}

func TestStopIsNotRetriedLocally(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-local-stop")
	cfg.MaxLocalRetries = 5
	w := rotaworker.New(cfg)
	var c calls
	started := make(chan struct{}, 10)
	rotaworker.Handle(w, "stoppable", func(ctx context.Context, task *rotaworker.Task[int]) error {
		c.add(task)
		started <- struct{}{}
		<-ctx.Done()
		return errors.New("interrupted") // not ctx.Err(): only the context tells
	})
	run(t, w)
	id := b.submit(t, rotaclient.TaskParams{Kind: "stoppable", Payload: 1, HeartbeatTimeoutSeconds: 3})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler not started")
	}
	if _, err := b.client.StopTask(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	task := b.waitTask(t, id)
	if task.Status != rota.StatusCanceled || len(task.Runs) != 1 {
		t.Errorf("task = %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	if seen, _ := c.get(); len(seen) != 1 {
		t.Errorf("calls = %v, want 1: a stopped task is not retried", seen)
	}
}

func TestLocalRetriesShareTheRunsTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t, "w-local-timeout")
	cfg.MaxLocalRetries = 100
	w := rotaworker.New(cfg)
	var c calls
	rotaworker.Handle(w, "slowfail", func(ctx context.Context, task *rotaworker.Task[int]) error {
		c.add(task)
		select {
		case <-time.After(400 * time.Millisecond):
			return errors.New("failed after a while")
		case <-ctx.Done():
			return errors.New("interrupted")
		}
	})
	run(t, w)
	start := time.Now()
	id := b.submit(t, rotaclient.TaskParams{Kind: "slowfail", Payload: 1, TimeoutSeconds: 1, MaxRetries: new(0)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusTimeout || len(task.Runs) != 1 {
		t.Errorf("task = %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	seen, runs := c.get()
	if len(seen) < 2 || len(seen) > 4 || runs != 1 {
		t.Errorf("calls = %v in %d runs, want 2 to 4 in one run of 1 s", seen, runs)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timed out after %v, want about 1s", d)
	}
	if strings.Contains(task.Message, "local retries") {
		t.Errorf("message %q: a timeout is not reported by the worker", task.Message)
	}
}
