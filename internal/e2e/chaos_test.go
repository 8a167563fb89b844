package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startWorker starts `rota worker` for kind against server, running cmd per
// task.
func startWorker(t *testing.T, server, id, kind string, concurrency int, cmd ...string) *proc {
	t.Helper()
	args := append([]string{"worker", "--server", server, "--id", id, "--kind", kind,
		"--concurrency", fmt.Sprint(concurrency), "--log-level", "warn", "--"}, cmd...)
	return startRota(t, args...)
}

// startRota starts the rota binary with args in a process group of its
// own; the test's cleanup kills it.
func startRota(t *testing.T, args ...string) *proc {
	t.Helper()
	c := exec.Command(rotaBinary(t), args...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: c, done: make(chan struct{})}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

type taskView struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
	Runs   []struct {
		Status   string `json:"status"`
		WorkerID string `json:"worker_id"`
	} `json:"runs"`
}

// submitBatch submits n tasks of kind with the given options and returns
// their ids.
func submitBatch(t *testing.T, ctx context.Context, base, kind string, n int, opts map[string]any, payload func(i int) any) []string {
	t.Helper()
	var ids []string
	for start := 0; start < n; start += 500 {
		var items []map[string]any
		for i := start; i < min(n, start+500); i++ {
			item := map[string]any{"kind": kind, "task": payload(i)}
			for k, v := range opts {
				item[k] = v
			}
			items = append(items, item)
		}
		var out struct {
			Results []struct {
				TaskID string `json:"task_id"`
			} `json:"results"`
		}
		code, env, err := call(ctx, "POST", base+"/api/tasks/batch", map[string]any{"tasks": items}, &out)
		if err != nil || code != 200 {
			t.Fatalf("batch submit: %d %v %s", code, err, env.Message)
		}
		for _, r := range out.Results {
			ids = append(ids, r.TaskID)
		}
	}
	return ids
}

// waitTerminal polls until every task is terminal and returns them.
func waitTerminal(t *testing.T, ctx context.Context, base string, ids []string, within time.Duration) map[string]taskView {
	t.Helper()
	final := map[string]taskView{}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, id := range ids {
			if _, ok := final[id]; ok {
				continue
			}
			var tv taskView
			if code, env, err := call(ctx, "GET", base+"/api/tasks/"+id, nil, &tv); err != nil || code != 200 {
				t.Fatalf("get %s: %d %v %s", id, code, err, env.Message)
			}
			switch tv.Status {
			case "SUCCESS", "FAILED", "TIMEOUT", "CANCELED":
				final[id] = tv
			}
		}
		if len(final) == len(ids) {
			return final
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%d of %d tasks not terminal after %v", len(ids)-len(final), len(ids), within)
	return nil
}

// TestChaosKillWorkers runs 2,000 tasks on three `rota worker -- CMD`
// processes and kill -9s one of them every second or so. Every task must
// end SUCCESS, and every task that ran more than once must owe it to a run
// that ended TIMEOUT (its worker died and its lease lapsed).
func TestChaosKillWorkers(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	base := "http://" + addr
	startServer(t, addr, t.TempDir(), "--retry-backoff", "50ms")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const n = 2000
	ids := submitBatch(t, ctx, base, "chaos", n,
		map[string]any{"heartbeat_timeout_seconds": 2, "max_retries": 20},
		func(i int) any { return map[string]any{"i": i} })

	cmd := []string{"sh", "-c", "cat >/dev/null; sleep 0.02; echo ok"}
	var mu sync.Mutex
	workers := make([]*proc, 3)
	for i := range workers {
		workers[i] = startWorker(t, base, fmt.Sprintf("chaos-%d", i), "chaos", 8, cmd...)
	}
	stop := make(chan struct{})
	kills := 0
	var killer sync.WaitGroup
	killer.Add(1)
	go func() {
		defer killer.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			j := i % len(workers)
			mu.Lock()
			workers[j].kill() // SIGKILL: no graceful release, its runs must lapse
			kills++
			workers[j] = startWorker(t, base, fmt.Sprintf("chaos-%d-%d", j, i), "chaos", 8, cmd...)
			mu.Unlock()
		}
	}()
	final := waitTerminal(t, ctx, base, ids, 3*time.Minute)
	close(stop)
	killer.Wait()

	rerun, unexplained := 0, 0
	for id, tv := range final {
		if tv.Status != "SUCCESS" {
			t.Errorf("task %s ended %s, want SUCCESS (runs %+v)", id, tv.Status, tv.Runs)
			continue
		}
		if len(tv.Runs) > 1 {
			rerun++
			// Every run but the last must have lapsed (TIMEOUT), or been
			// released unfinished (CANCELED) by a worker.
			for _, r := range tv.Runs[:len(tv.Runs)-1] {
				if r.Status != "TIMEOUT" && r.Status != "CANCELED" {
					unexplained++
					t.Errorf("task %s ran again after a run that ended %s", id, r.Status)
				}
			}
		}
	}
	mu.Lock()
	t.Logf("%d tasks SUCCESS; %d workers killed; %d tasks ran more than once, each after a TIMEOUT run (%d unexplained)",
		len(final), kills, rerun, unexplained)
	mu.Unlock()
	if kills < 3 {
		t.Fatalf("only %d kills: the chaos did not happen", kills)
	}
}

// TestPoisonTaskFails runs a command that kills itself on one task: that
// task ends FAILED after its attempts, and the other tasks keep flowing.
func TestPoisonTaskFails(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	base := "http://" + addr
	startServer(t, addr, t.TempDir(), "--retry-backoff", "20ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	poison := submitBatch(t, ctx, base, "poison", 1, map[string]any{"max_retries": 2},
		func(int) any { return map[string]any{"poison": true} })[0]
	good := submitBatch(t, ctx, base, "poison", 50, map[string]any{"max_retries": 2},
		func(i int) any { return map[string]any{"i": i} })
	startWorker(t, base, "poison-w", "poison", 4, "sh", "-c", `if grep -q poison; then kill -9 $$; fi; echo fine`)

	final := waitTerminal(t, ctx, base, append([]string{poison}, good...), time.Minute)
	p := final[poison]
	if p.Status != "FAILED" || len(p.Runs) != 3 {
		t.Fatalf("poison task: %s after %d runs, want FAILED after 3 (max_retries 2)", p.Status, len(p.Runs))
	}
	for _, id := range good {
		if final[id].Status != "SUCCESS" {
			t.Fatalf("good task %s ended %s", id, final[id].Status)
		}
	}
}
