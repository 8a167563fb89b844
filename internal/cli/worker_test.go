package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// worker runs `rota worker` in-process until the test ends (or stop is
// called); its logs are in the returned buffer.
type workerProc struct {
	stop func() int // cancels the context (as SIGTERM does) and returns the exit code
	log  *syncBuffer
	done chan int
}

func (b *bundle) startWorker(t *testing.T, args ...string) *workerProc {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	w := &workerProc{log: &syncBuffer{}, done: make(chan int, 1)}
	full := append([]string{"worker", "--kill-grace", "300ms", "--grace", "5s", "--log-level", "debug"}, args...)
	go func() {
		w.done <- Run(ctx, full, Env{Stdout: w.log, Stderr: w.log, Getenv: b.getenv})
	}()
	var code int
	stopped := false
	w.stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			code = <-w.done
		}
		return code
	}
	t.Cleanup(func() {
		w.stop()
		if t.Failed() {
			t.Logf("worker log:\n%s", w.log.String())
		}
	})
	return w
}

func (b *bundle) submit(t *testing.T, p rotaclient.TaskParams) string {
	t.Helper()
	res, err := b.client.Submit(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return res.TaskID
}

func (b *bundle) waitTask(t *testing.T, id string) *rota.Task {
	t.Helper()
	for {
		task, err := b.client.GetTask(b.ctx, id)
		if err != nil {
			t.Fatalf("get task %s: %v", id, err)
		}
		if task.Status.Terminal() {
			return task
		}
		select {
		case <-b.ctx.Done():
			t.Fatalf("task %s still %s: %+v", id, task.Status, task)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestWorkerCommandSucceeds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	script := `cat > "$DIR/$ROTA_TASK_ID.stdin"; echo "task=$ROTA_TASK_ID run=$ROTA_RUN_ID attempt=$ROTA_ATTEMPT kind=$ROTA_KIND"; echo "to the log" >&2`
	w := b.startWorker(t, "--kind", "email", "--id", "wk-ok", "--", "sh", "-c", strings.ReplaceAll(script, "$DIR", dir))
	payload := `{"to":"a@b","body":"hi"}`
	id := b.submit(t, rotaclient.TaskParams{Kind: "email", Payload: json.RawMessage(payload)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusSuccess {
		t.Fatalf("task %s: %s", task.Status, task.Message)
	}
	want := fmt.Sprintf("task=%s run=%s attempt=1 kind=email", id, task.Runs[0].ID)
	if task.Message != want {
		t.Errorf("message %q, want %q", task.Message, want)
	}
	if got, err := os.ReadFile(filepath.Join(dir, id+".stdin")); err != nil || string(got) != payload {
		t.Errorf("stdin %q, %v; want the payload %q", got, err, payload)
	}
	if task.Runs[0].WorkerID != "wk-ok" {
		t.Errorf("run by %q", task.Runs[0].WorkerID)
	}
	if code := w.stop(); code != ExitOK {
		t.Errorf("worker exit %d", code)
	}
	if log := w.log.String(); !strings.Contains(log, "line=\"to the log\"") {
		t.Errorf("stderr not logged:\n%s", log)
	}
}

func TestWorkerCommandFailureIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, "--kind", "flaky", "--", "sh", "-c", `echo "some output"; echo "boom on attempt $ROTA_ATTEMPT" >&2; exit 3`)
	id := b.submit(t, rotaclient.TaskParams{Kind: "flaky", MaxRetries: new(1)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusFailed || len(task.Runs) != 2 {
		t.Fatalf("task %s after %d runs", task.Status, len(task.Runs))
	}
	if want := "exit code 3\nstderr:\nboom on attempt 2"; task.Message != want {
		t.Errorf("message %q, want %q", task.Message, want)
	}
}

func TestWorkerNoRetryExitCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, "--kind", "strict", "--", "sh", "-c", `echo "bad input" >&2; exit 65`)
	id := b.submit(t, rotaclient.TaskParams{Kind: "strict", MaxRetries: new(3)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusFailed || len(task.Runs) != 1 || !strings.HasPrefix(task.Message, "exit code 65") {
		t.Errorf("task %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	// Another code can be chosen.
	b.startWorker(t, "--kind", "strict2", "--no-retry-code", "9", "--", "sh", "-c", `exit 9`)
	id = b.submit(t, rotaclient.TaskParams{Kind: "strict2", MaxRetries: new(3)})
	if task := b.waitTask(t, id); task.Status != rota.StatusFailed || len(task.Runs) != 1 {
		t.Errorf("--no-retry-code 9: task %s after %d runs", task.Status, len(task.Runs))
	}
}

func TestWorkerLocalRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	// Each run of the command appends "attempt.local_retry" to a file of
	// its task, then fails with exit 3 until its third local run.
	script := fmt.Sprintf(`echo "$ROTA_ATTEMPT.$ROTA_LOCAL_RETRY" >> %s/$ROTA_TASK_ID; `+
		`case "$(cat)" in *ok*) [ "$ROTA_LOCAL_RETRY" = 2 ] && { echo fine; exit 0; };; *final*) exit 65;; esac; `+
		`echo "boom $ROTA_LOCAL_RETRY" >&2; exit 3`, dir)
	b.startWorker(t, "--kind", "glitchy", "--local-retries", "2", "--", "sh", "-c", script)
	calls := func(id string) string {
		got, err := os.ReadFile(filepath.Join(dir, id))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(got)), " ")
	}

	// Two unexpected failures, then a success: one run, no retry spent.
	id := b.submit(t, rotaclient.TaskParams{Kind: "glitchy", Payload: "ok", MaxRetries: new(0)})
	task := b.waitTask(t, id)
	if task.Status != rota.StatusSuccess || len(task.Runs) != 1 || task.Message != "fine" {
		t.Errorf("ok: task %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	if got := calls(id); got != "1.0 1.1 1.2" {
		t.Errorf("ok: commands run %q, want 1.0 1.1 1.2", got)
	}

	// Always failing: 1 + 2 local runs per server attempt, then reported.
	id = b.submit(t, rotaclient.TaskParams{Kind: "glitchy", Payload: "bad", MaxRetries: new(1)})
	task = b.waitTask(t, id)
	if want := "after 2 local retries: exit code 3\nstderr:\nboom 2"; task.Status != rota.StatusFailed ||
		len(task.Runs) != 2 || task.Message != want {
		t.Errorf("bad: task %s after %d runs: %q, want %q", task.Status, len(task.Runs), task.Message, want)
	}
	if got := calls(id); got != "1.0 1.1 1.2 2.0 2.1 2.2" {
		t.Errorf("bad: commands run %q, want 1.0 1.1 1.2 2.0 2.1 2.2", got)
	}

	// Exit 65 is final: never run again.
	id = b.submit(t, rotaclient.TaskParams{Kind: "glitchy", Payload: "final", MaxRetries: new(3)})
	task = b.waitTask(t, id)
	if task.Status != rota.StatusFailed || len(task.Runs) != 1 || !strings.HasPrefix(task.Message, "exit code 65") {
		t.Errorf("final: task %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	if got := calls(id); got != "1.0" {
		t.Errorf("final: commands run %q, want 1.0", got)
	}
}

func TestWorkerStoppedCommandIsNotRetriedLocally(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	script := fmt.Sprintf(`echo $$ >> %s/$ROTA_TASK_ID; exec sleep 60`, dir)
	b.startWorker(t, "--kind", "stopme", "--local-retries", "5", "--", "sh", "-c", script)
	id := b.submit(t, rotaclient.TaskParams{Kind: "stopme", HeartbeatTimeoutSeconds: 3})
	readPID(t, filepath.Join(dir, id))
	if _, err := b.client.StopTask(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	task := b.waitTask(t, id)
	if task.Status != rota.StatusCanceled || len(task.Runs) != 1 {
		t.Errorf("task %s after %d runs: %q", task.Status, len(task.Runs), task.Message)
	}
	time.Sleep(200 * time.Millisecond) // a wrong local retry would start now
	if got, _ := os.ReadFile(filepath.Join(dir, id)); len(strings.Fields(string(got))) != 1 {
		t.Errorf("the command ran %d times, want 1: %q", len(strings.Fields(string(got))), got)
	}
}

// gone reports whether process pid no longer runs (a zombie waiting for
// its reaper counts as gone).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || os.IsNotExist(err)
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkerKillsProcessGroupOnTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	// The command starts a child and waits for it: both must die at the timeout.
	script := fmt.Sprintf(`sleep 60 & echo $! > %s/$ROTA_TASK_ID.child; wait`, dir)
	b.startWorker(t, "--kind", "slow", "--", "sh", "-c", script)
	id := b.submit(t, rotaclient.TaskParams{Kind: "slow", TimeoutSeconds: 1, MaxRetries: new(0)})
	child := readPID(t, filepath.Join(dir, id+".child"))
	task := b.waitTask(t, id)
	if task.Status != rota.StatusTimeout {
		t.Errorf("task %s: %s", task.Status, task.Message)
	}
	waitGone(t, child, 2*time.Second)
}

func TestWorkerKillsStoppedCommandIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	// SIGTERM is ignored by the shell and its child: SIGKILL must follow.
	script := fmt.Sprintf(`trap '' TERM; sleep 60 & echo $! > %s/$ROTA_TASK_ID.child; wait; wait`, dir)
	w := b.startWorker(t, "--kind", "stubborn", "--", "sh", "-c", script)
	id := b.submit(t, rotaclient.TaskParams{Kind: "stubborn", HeartbeatTimeoutSeconds: 3})
	child := readPID(t, filepath.Join(dir, id+".child"))
	if _, err := b.client.StopTask(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	task := b.waitTask(t, id)
	if task.Status != rota.StatusCanceled || task.Runs[0].Status != rota.StatusCanceled {
		t.Errorf("task %s, run %s", task.Status, task.Runs[0].Status)
	}
	waitGone(t, child, 2*time.Second)
	if !strings.Contains(w.log.String(), "ignored SIGTERM") {
		t.Errorf("no SIGKILL in the log:\n%s", w.log.String())
	}
}

func TestWorkerSurvivesCrashingCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, "--kind", "crashy", "--", "sh", "-c", `case "$(cat)" in *crash*) kill -SEGV $$;; esac; echo fine`)
	crash := b.submit(t, rotaclient.TaskParams{Kind: "crashy", Payload: "crash", MaxRetries: new(0)})
	task := b.waitTask(t, crash)
	if task.Status != rota.StatusFailed || !strings.HasPrefix(task.Message, "killed by signal segmentation fault") {
		t.Errorf("crash: task %s: %q", task.Status, task.Message)
	}
	ok := b.submit(t, rotaclient.TaskParams{Kind: "crashy", Payload: "ok"})
	if task := b.waitTask(t, ok); task.Status != rota.StatusSuccess || task.Message != "fine" {
		t.Errorf("after a crash: task %s: %q", task.Status, task.Message)
	}
}

func TestWorkerOutputIsCapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, "--kind", "chatty", "--max-output", "10", "--", "sh", "-c", `i=0; while [ $i -lt 100 ]; do printf x; i=$((i+1)); done`)
	id := b.submit(t, rotaclient.TaskParams{Kind: "chatty"})
	if task := b.waitTask(t, id); task.Message != "xxxxxxxxxx\n…(output truncated)" {
		t.Errorf("message %q", task.Message)
	}
}

func TestWorkerSignalIsGracefulStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	w := b.startWorker(t, "--kind", "job", "--", "sh", "-c", fmt.Sprintf(`touch %s/started; sleep 0.5; echo done`, dir))
	id := b.submit(t, rotaclient.TaskParams{Kind: "job"})
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// main cancels cli.Run's context on SIGINT/SIGTERM.
	if code := w.stop(); code != ExitOK {
		t.Errorf("exit %d", code)
	}
	task, err := b.client.GetTask(b.ctx, id)
	if err != nil || task.Status != rota.StatusSuccess || task.Message != "done" {
		t.Errorf("task %+v, %v", task, err)
	}
}

func TestWorkerUsage(t *testing.T) {
	t.Parallel()
	b := &bundle{env: map[string]string{}}
	b.ctx = t.Context()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "give the command to run after --"},
		{[]string{"worker", "lsit"}, `unknown subcommand "lsit"`},
		{[]string{"worker", "--kind", "a", "./x"}, "put it after --"},
		{[]string{"worker", "--", "true"}, "--kind is required"},
		{[]string{"worker", "--kind", "bad kind", "--", "true"}, `--kind "bad kind"`},
		{[]string{"worker", "--kind", "a", "--concurrency", "0", "--", "true"}, "--concurrency"},
		{[]string{"worker", "--kind", "a", "--local-retries", "-1", "--", "true"}, "--local-retries -1"},
		{[]string{"worker", "--kind", "a", "--", "/no/such/command"}, "/no/such/command"},
		{[]string{"worker", "--kind", "a", "--server", "nope", "--", "true"}, "--server"},
	} {
		if msg := b.wantExit(t, ExitUsage, tc.args...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, msg, tc.want)
		}
	}
}

// A task fired by a schedule runs with ROTA_SCHEDULE_ID and ROTA_FIRE_TIME
// (the nominal fire time) in its environment.
func TestWorkerCommandSeesFireContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sid, err := b.client.CreateSchedule(b.ctx, rotaclient.ScheduleParams{Name: "ctx", Kind: "ctxjob", CronExpr: "0 0 0 1 1 *"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := b.client.TriggerSchedule(b.ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	w := b.startWorker(t, "--kind", "ctxjob", "--", "sh", "-c", `echo "schedule=$ROTA_SCHEDULE_ID fire=$ROTA_FIRE_TIME"`)
	task := b.waitTask(t, tr.TaskID)
	if want := fmt.Sprintf("schedule=%s fire=%d", sid, tr.FireTime.Unix()); task.Status != rota.StatusSuccess || task.Message != want {
		t.Errorf("task %s %q, want SUCCESS %q", task.Status, task.Message, want)
	}
	w.stop()
}
