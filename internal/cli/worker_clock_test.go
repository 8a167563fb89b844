package cli

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// waitWorkerSeen waits until the server lists worker id (its first claim
// arrived) and returns when it saw it.
func (b *bundle) waitWorkerSeen(t *testing.T, id string) time.Time {
	t.Helper()
	for {
		ws, err := b.client.ListWorkers(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.ID == id {
				return time.Now()
			}
		}
		select {
		case <-b.ctx.Done():
			t.Fatalf("worker %s never claimed", id)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestWorkerClocksStartWhenTheTaskArrives is issue 12's regression test for
// `rota worker`: tasks handed over 4–9 s into an idle worker's long-poll,
// timeout 2 s, a command of 1 s: all succeed on their first attempt.
func TestWorkerClocksStartWhenTheTaskArrives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	offsets := []time.Duration{4 * time.Second, 6 * time.Second, 8 * time.Second, 9 * time.Second}
	args := []string{"--id", "wk-late"}
	for i := range offsets {
		args = append(args, "--kind", fmt.Sprintf("late%d", i))
	}
	b.startWorker(t, append(args, "--", "sh", "-c", "sleep 1; echo ok")...)
	polled := b.waitWorkerSeen(t, "wk-late")
	ids := make([]string, len(offsets))
	var wg sync.WaitGroup
	for i, off := range offsets {
		wg.Go(func() {
			time.Sleep(time.Until(polled.Add(off)))
			res, err := b.client.Submit(b.ctx, rotaclient.TaskParams{Kind: fmt.Sprintf("late%d", i), TimeoutSeconds: 2, MaxRetries: new(0)})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.TaskID
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id == "" {
			continue
		}
		task := b.waitTask(t, id)
		if task.Status != rota.StatusSuccess || task.Attempt != 1 || len(task.Runs) != 1 || task.Message != "ok" {
			t.Errorf("task submitted %v into the long-poll: %s after %d attempt(s): %q", offsets[i], task.Status, task.Attempt, task.Message)
		}
	}
}

// TestWorkerStopKillsCommandFast: with the default heartbeat timeout (30 s),
// a stop kills the command's process group and the run ends CANCELED
// within 2 s.
func TestWorkerStopKillsCommandFast(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	script := fmt.Sprintf(`sleep 60 & echo $! > %s/$ROTA_TASK_ID.child; wait`, dir)
	b.startWorker(t, "--kind", "parked", "--", "sh", "-c", script)
	id := b.submit(t, rotaclient.TaskParams{Kind: "parked"})
	child := readPID(t, filepath.Join(dir, id+".child"))
	time.Sleep(200 * time.Millisecond) // the run's first heartbeat is under way
	stopAt := time.Now()
	if _, err := b.client.StopTask(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	waitGone(t, child, 1500*time.Millisecond)
	task := b.waitTask(t, id)
	if d := time.Since(stopAt); d > 2*time.Second {
		t.Errorf("run ended %v after the stop, want within 2s", d)
	}
	if task.Status != rota.StatusCanceled || task.Runs[0].Status != rota.StatusCanceled {
		t.Errorf("task %s, run %s: %q", task.Status, task.Runs[0].Status, task.Message)
	}
}
