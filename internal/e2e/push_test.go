package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// pushWorkerView is a worker of GET /api/workers as the push test reads it.
type pushWorkerView struct {
	WorkerID string `json:"worker_id"`
	Address  string `json:"address"`
	Capacity int    `json:"capacity"`
	Status   string `json:"status"`
	Runs     []struct {
		TaskID string `json:"task_id"`
	} `json:"runs"`
}

// pushWorkers reads GET /api/workers by id.
func pushWorkers(t *testing.T, ctx context.Context, base string) map[string]pushWorkerView {
	t.Helper()
	var out struct {
		Workers []pushWorkerView `json:"workers"`
	}
	if code, env, err := call(ctx, "GET", base+"/api/workers", nil, &out); err != nil || code != 200 {
		t.Fatalf("list workers: %d %v %s", code, err, env.Message)
	}
	ws := map[string]pushWorkerView{}
	for _, w := range out.Workers {
		ws[w.WorkerID] = w
	}
	return ws
}

// pollUntil calls cond every 50 ms until it holds; it fails the test
// after within.
func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPushWorkerKilledTaskRedispatched is issue 16's push-dispatch test:
// three `rota worker --listen` processes serve a kind in push mode; one
// is killed with SIGKILL while it holds a task. The server's health checks
// notice, the task is re-dispatched to another worker at once (long before
// its 60 s lease could lapse), and every task ends SUCCESS, exactly once.
func TestPushWorkerKilledTaskRedispatched(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	base := "http://" + addr
	startServer(t, addr, t.TempDir(), "--target-allow", "127.0.0.1", "--push-health-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if code, env, err := call(ctx, "PUT", base+"/api/kinds/pushk", map[string]any{"dispatch": "push"}, nil); err != nil || code != 200 {
		t.Fatalf("PUT kind: %d %v %s", code, err, env.Message)
	}
	workers := map[string]*proc{}
	for i := range 3 {
		id := fmt.Sprintf("pw-%d", i)
		workers[id] = startRota(t, "worker", "--server", base, "--id", id, "--kind", "pushk", "--listen", "127.0.0.1:0",
			"--log-level", "warn", "--", "sh", "-c", "cat >/dev/null; sleep 1; echo ok")
	}
	pollUntil(t, 30*time.Second, "three push workers registered", func() bool {
		n := 0
		for _, w := range pushWorkers(t, ctx, base) {
			if w.Capacity == 1 && w.Status == "active" {
				n++
			}
		}
		return n == 3
	})

	const n = 30
	ids := submitBatch(t, ctx, base, "pushk", n, map[string]any{"heartbeat_timeout_seconds": 60},
		func(i int) any { return map[string]any{"i": i} })
	// pw-1 holds a task once the same run stays listed for 300 ms: its
	// delivery was answered (a kill during the delivery itself would only
	// hand the run back, released).
	var victimTask string
	var since time.Time
	pollUntil(t, 30*time.Second, "pw-1 holds a task", func() bool {
		runs := pushWorkers(t, ctx, base)["pw-1"].Runs
		switch {
		case len(runs) == 0:
			victimTask = ""
		case runs[0].TaskID != victimTask:
			victimTask, since = runs[0].TaskID, time.Now()
		}
		return victimTask != "" && time.Since(since) >= 300*time.Millisecond
	})
	killed := time.Now()
	workers["pw-1"].kill()

	// Re-dispatched: the killed worker's run ended and the task is
	// claimable again (it runs next once a worker's slot frees: the
	// queue holds older tasks).
	var redispatched time.Duration
	pollUntil(t, 30*time.Second, "the killed worker's task re-dispatched", func() bool {
		var tv taskView
		if code, env, err := call(ctx, "GET", base+"/api/tasks/"+victimTask, nil, &tv); err != nil || code != 200 {
			t.Fatalf("get %s: %d %v %s", victimTask, code, err, env.Message)
		}
		if len(tv.Runs) > 0 && tv.Runs[0].Status != "RUNNING" {
			redispatched = time.Since(killed)
			return true
		}
		return false
	})
	final := waitTerminal(t, ctx, base, ids, 2*time.Minute)
	checkPushOutcome(t, final, victimTask)
	if redispatched > 10*time.Second {
		t.Errorf("the killed worker's run ended %v after the kill: want a few health checks (200 ms), not its lease (60 s)", redispatched)
	}
	t.Logf("the killed worker's task was re-dispatched %v after the kill (lease: 60 s); %d tasks all SUCCESS",
		redispatched.Round(time.Millisecond), n)
}

// checkPushOutcome: every task SUCCESS with exactly one successful run;
// the victim's first run, by pw-1, FAILED, and another worker succeeded
// it; no run started on pw-1 after it was killed but that one.
func checkPushOutcome(t *testing.T, final map[string]taskView, victim string) {
	t.Helper()
	for id, tv := range final {
		successes := 0
		for _, r := range tv.Runs {
			if r.Status == "SUCCESS" {
				successes++
			}
		}
		if tv.Status != "SUCCESS" || successes != 1 {
			t.Errorf("task %s: %s with %d successful runs (%+v); want SUCCESS once", id, tv.Status, successes, tv.Runs)
		}
	}
	v := final[victim]
	if len(v.Runs) < 2 || v.Runs[0].WorkerID != "pw-1" || v.Runs[0].Status != "FAILED" {
		t.Fatalf("the killed worker's task: runs %+v; want a FAILED run by pw-1 first", v.Runs)
	}
	if last := v.Runs[len(v.Runs)-1]; last.WorkerID == "pw-1" || last.Status != "SUCCESS" {
		t.Fatalf("the killed worker's task: last run %+v; want SUCCESS by another worker", last)
	}
}

// TestPushSurvivesServerRestart: a push worker's registration and its
// kind's push mode are in the store: after the server is killed and
// started again on the same data, the tasks submitted are pushed to the
// worker, which registered once, before the restart.
func TestPushSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	addr, dir := freePort(t), t.TempDir()
	base := "http://" + addr
	flags := []string{"--target-allow", "127.0.0.1", "--push-health-interval", "200ms"}
	srv := startServer(t, addr, dir, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if code, env, err := call(ctx, "PUT", base+"/api/kinds/pushr", map[string]any{"dispatch": "push"}, nil); err != nil || code != 200 {
		t.Fatalf("PUT kind: %d %v %s", code, err, env.Message)
	}
	startRota(t, "worker", "--server", base, "--id", "pr-0", "--kind", "pushr", "--listen", "127.0.0.1:0",
		"--concurrency", "2", "--log-level", "warn", "--", "sh", "-c", "cat >/dev/null; echo ok")
	pollUntil(t, 30*time.Second, "the push worker registered", func() bool {
		return pushWorkers(t, ctx, base)["pr-0"].Capacity == 2
	})
	for round := range 2 {
		start := time.Now()
		ids := submitBatch(t, ctx, base, "pushr", 10, nil, func(i int) any { return i })
		for id, tv := range waitTerminal(t, ctx, base, ids, time.Minute) {
			if tv.Status != "SUCCESS" || len(tv.Runs) != 1 || tv.Runs[0].WorkerID != "pr-0" {
				t.Fatalf("round %d: task %s %s, runs %+v; want SUCCESS by pr-0", round, id, tv.Status, tv.Runs)
			}
		}
		t.Logf("round %d: 10 tasks pushed and done in %v", round, time.Since(start).Round(time.Millisecond))
		if round == 0 {
			srv.kill() // SIGKILL: nothing is saved on the way out
			start = time.Now()
			srv = startServer(t, addr, dir, flags...)
			t.Logf("server restarted in %v", time.Since(start).Round(time.Millisecond))
		}
	}
}
