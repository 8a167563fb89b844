package e2e

import (
	"context"
	"path/filepath"

	"fmt"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type claimedTask struct {
	TaskID string `json:"task_id"`
	RunID  string `json:"run_id"`
}

// TestServerKill9MidLoad kills the server with SIGKILL while clients submit
// and workers run tasks, restarts it on the same data, and checks that every
// acknowledged task is still there and reaches SUCCESS.
func TestServerKill9MidLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freePort(t)
	base := "http://" + addr
	srv := startServer(t, addr, dir, "--retry-backoff", "50ms")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		mu    sync.Mutex
		acked = map[string]bool{}
	)
	stopSubmit := make(chan struct{})
	var submitters sync.WaitGroup
	var seq atomic.Int64
	for c := range 4 {
		submitters.Add(1)
		go func() {
			defer submitters.Done()
			for {
				select {
				case <-stopSubmit:
					return
				default:
				}
				n := seq.Add(1)
				var out struct {
					TaskID string `json:"task_id"`
				}
				code, env, err := call(ctx, "POST", base+"/api/tasks", map[string]any{
					"kind": "crash", "task": map[string]any{"n": n, "client": c},
					"heartbeat_timeout_seconds": 2, "max_retries": 10,
				}, &out)
				if err != nil || code != 200 || env.Code != 0 {
					time.Sleep(20 * time.Millisecond) // server down: not acknowledged
					continue
				}
				mu.Lock()
				acked[out.TaskID] = true
				mu.Unlock()
			}
		}()
	}
	stopWork := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 3 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			id := fmt.Sprintf("w%d", w)
			for {
				select {
				case <-stopWork:
					return
				default:
				}
				var out struct {
					Tasks []claimedTask `json:"tasks"`
				}
				code, _, err := call(ctx, "POST", base+"/api/workers/claim", map[string]any{
					"worker_id": id, "kinds": []string{"crash"}, "max": 10, "wait_seconds": 1,
				}, &out)
				if err != nil || code != 200 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				for _, ct := range out.Tasks {
					call(ctx, "POST", base+"/api/runs/"+ct.RunID+"/succeed", map[string]any{"worker_id": id, "message": "done"}, nil)
				}
			}
		}()
	}

	time.Sleep(1500 * time.Millisecond)
	srv.kill() // mid-load, no warning
	time.Sleep(300 * time.Millisecond)
	srv = startServer(t, addr, dir, "--retry-backoff", "50ms")
	time.Sleep(1500 * time.Millisecond)
	close(stopSubmit)
	submitters.Wait()

	mu.Lock()
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	mu.Unlock()
	if len(ids) < 50 {
		t.Fatalf("only %d tasks acknowledged: the load did not run", len(ids))
	}

	// Every acknowledged task must end SUCCESS (runs orphaned by the crash
	// lapse after their 2 s lease and are run again).
	deadline := time.Now().Add(60 * time.Second)
	pending := ids
	for len(pending) > 0 && time.Now().Before(deadline) {
		var still []string
		for _, id := range pending {
			var task struct {
				Status string `json:"status"`
			}
			code, env, err := call(ctx, "GET", base+"/api/tasks/"+id, nil, &task)
			if err != nil {
				t.Fatalf("get %s: %v", id, err)
			}
			if code == 404 {
				t.Fatalf("acknowledged task %s is lost after kill -9: %s", id, env.Message)
			}
			if task.Status != "SUCCESS" {
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	close(stopWork)
	workers.Wait()
	if len(pending) > 0 {
		t.Fatalf("%d of %d acknowledged tasks did not reach SUCCESS, e.g. %s", len(pending), len(ids), pending[0])
	}
	// Kill it once more, idle this time, and check the file's invariants.
	srv.kill()
	checkStore(t, dir)
	t.Logf("%d acknowledged tasks, all SUCCESS after kill -9 and restart", len(ids))
}

// checkStore opens the embedded store in dir and runs its invariant check.
func checkStore(t *testing.T, dir string) {
	t.Helper()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(dir, "rota.db")})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer st.Close()
	if err := st.Check(context.Background()); err != nil {
		t.Fatalf("store inconsistent after kill -9: %v", err)
	}
}
