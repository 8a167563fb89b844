package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// The fault suite's oracle is a ledger that Rota never writes: each
// execution of a task is a process (this test binary, re-run as
// TestChaosLedgerHelper by `rota worker -- CMD`) that appends a line to the
// ledger file with O_APPEND and fsyncs it when it starts, when it finishes
// and when it is told to stop (SIGTERM). The suite then compares the ledger
// with what Rota says: a task that Rota calls SUCCESS must have a finished
// execution of that very run in the ledger, and every extra execution must
// belong to a run that Rota recorded as lapsed (TIMEOUT) or handed back
// (CANCELED).

// The environment of a ledger helper process (set on `rota worker`, which
// passes its environment to its commands along with ROTA_TASK_ID,
// ROTA_RUN_ID and ROTA_ATTEMPT).
const (
	envLedger   = "CHAOS_LEDGER"       // path of the ledger file; unset: not a helper
	envWorker   = "CHAOS_WORKER"       // id of the worker running the helper
	envMaxSleep = "CHAOS_MAX_SLEEP_MS" // caps the payload's sleep_ms
)

// TestChaosLedgerHelper is not a test: it is the command the suite's
// workers run for each task (the os/exec TestHelperProcess pattern). In an
// ordinary test run it returns at once.
func TestChaosLedgerHelper(t *testing.T) {
	path := os.Getenv(envLedger)
	if path == "" {
		return
	}
	os.Exit(ledgerHelper(path))
}

// ledgerHelper executes one task: record "start", sleep the payload's
// sleep_ms, record "done" and print ok; on SIGTERM record "term" and exit
// 143. A ledger write that fails exits 1 (the worker reports a failure).
func ledgerHelper(path string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	var p struct {
		SleepMS int `json:"sleep_ms"`
	}
	data, _ := io.ReadAll(os.Stdin)
	_ = json.Unmarshal(data, &p)
	if m, err := strconv.Atoi(os.Getenv(envMaxSleep)); err == nil && p.SleepMS > m {
		p.SleepMS = m
	}
	rec := func(what string) bool {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return false
		}
		defer f.Close()
		line := fmt.Sprintf("%s %s %s %s %s %d %d\n", what, os.Getenv("ROTA_TASK_ID"), os.Getenv("ROTA_RUN_ID"),
			os.Getenv("ROTA_ATTEMPT"), os.Getenv(envWorker), os.Getpid(), time.Now().UnixNano())
		if _, err := f.WriteString(line); err != nil { // one write(2) with O_APPEND: lines never interleave
			fmt.Fprintln(os.Stderr, err)
			return false
		}
		if err := f.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return false
		}
		return true
	}
	if !rec("start") {
		return 1
	}
	select {
	case <-time.After(time.Duration(p.SleepMS) * time.Millisecond):
		if !rec("done") {
			return 1
		}
		fmt.Println("ok")
		return 0
	case <-term:
		rec("term")
		return 143
	}
}

// ledgerEntry is one line of the ledger.
type ledgerEntry struct {
	what    string // start, done or term
	task    string
	run     string
	attempt string
	worker  string
	at      time.Time
}

// ledger is the parsed ledger file.
type ledger struct {
	entries []ledgerEntry
	starts  map[string][]ledgerEntry // task id → its "start" entries, in order
	runs    map[string]map[string]bool
}

// has reports whether run has an entry of kind what.
func (l *ledger) has(run, what string) bool { return l.runs[run][what] }

// readLedger parses the ledger at path (a missing file is empty).
func readLedger(t *testing.T, path string) *ledger {
	t.Helper()
	l := &ledger{starts: map[string][]ledgerEntry{}, runs: map[string]map[string]bool{}}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return l
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 7 {
			t.Fatalf("ledger %s: bad line %q", path, sc.Text())
		}
		ns, err := strconv.ParseInt(fs[6], 10, 64)
		if err != nil {
			t.Fatalf("ledger %s: bad line %q", path, sc.Text())
		}
		e := ledgerEntry{what: fs[0], task: fs[1], run: fs[2], attempt: fs[3], worker: fs[4], at: time.Unix(0, ns)}
		l.entries = append(l.entries, e)
		if e.what == "start" {
			l.starts[e.task] = append(l.starts[e.task], e)
		}
		if l.runs[e.run] == nil {
			l.runs[e.run] = map[string]bool{}
		}
		l.runs[e.run][e.what] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return l
}

// ledgerCommand is the argv a worker runs for each task.
func ledgerCommand(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, "-test.run=^TestChaosLedgerHelper$"}
}

// startLedgerWorker starts `rota worker` for kind against server, running
// the ledger helper per task; env adds to its environment, extra to its
// flags.
func startLedgerWorker(t *testing.T, server, id, kind string, concurrency int, ledgerPath string, env []string, extra ...string) *proc {
	t.Helper()
	args := []string{"worker", "--server", server, "--id", id, "--kind", kind,
		"--concurrency", strconv.Itoa(concurrency), "--log-level", "warn"}
	args = append(append(args, extra...), "--")
	args = append(args, ledgerCommand(t)...)
	c := exec.Command(rotaBinary(t), args...)
	c.Env = append(append(os.Environ(), envLedger+"="+ledgerPath, envWorker+"="+id), env...)
	log := &syncBuffer{}
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: c, log: log, done: make(chan struct{})}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

// verdict is a scenario's row of the table.
type verdict struct {
	tasks      int // tasks the scenario checked (acknowledged, or fired)
	lost       int // tasks not SUCCESS, or SUCCESS without a finished execution of that run
	duplicates int // executions beyond one per task (and tasks beyond one per fire time)
	explained  int // duplicates owed to a run Rota recorded as lapsed or handed back
}

// add sums two verdicts.
func (v verdict) add(o verdict) verdict {
	return verdict{v.tasks + o.tasks, v.lost + o.lost, v.duplicates + o.duplicates, v.explained + o.explained}
}

// reporter reports each kind of violation a few times, then only counts.
type reporter struct {
	t *testing.T
	n map[string]int
}

func newReporter(t *testing.T) *reporter { return &reporter{t: t, n: map[string]int{}} }

func (r *reporter) errorf(what, format string, args ...any) {
	r.t.Helper()
	r.n[what]++
	if r.n[what] <= 5 {
		r.t.Errorf(what+": "+format, args...)
	}
}

// judge compares the tasks ids, as Rota holds them, with the ledger.
func judge(t *testing.T, ctx context.Context, c *rotaclient.Client, ids []string, l *ledger) verdict {
	t.Helper()
	rep := newReporter(t)
	v := verdict{tasks: len(ids)}
	for _, id := range ids {
		task, err := getTaskRetry(ctx, c, id)
		if err != nil {
			v.lost++
			rep.errorf("lost", "task %s: %v", id, err)
			continue
		}
		v = v.add(judgeTask(task, l, rep))
	}
	return v
}

// judgeTask judges one task (tasks is not counted).
func judgeTask(task *rota.Task, l *ledger, rep *reporter) verdict {
	var v verdict
	runs := map[string]rota.Run{}
	var success string
	for _, r := range task.Runs {
		runs[r.ID] = r
		if r.Status == rota.StatusSuccess {
			success = r.ID
		}
	}
	switch {
	case task.Status != rota.StatusSuccess:
		v.lost++
		rep.errorf("lost", "task %s ended %s, want SUCCESS (runs %+v)", task.ID, task.Status, task.Runs)
	case !l.has(success, "done"):
		v.lost++
		rep.errorf("lost", "task %s: Rota says run %s succeeded, the ledger has no finished execution of it", task.ID, success)
	}
	// The execution that counts is the successful run's; every other one
	// is an extra.
	counted := success
	if starts := l.starts[task.ID]; !l.has(success, "start") && len(starts) > 0 {
		counted = starts[0].run
	}
	seen := map[string]bool{}
	for _, e := range l.starts[task.ID] {
		if seen[e.run] {
			v.duplicates++
			rep.errorf("unexplained duplicate", "task %s: run %s executed twice", task.ID, e.run)
			continue
		}
		seen[e.run] = true
		if e.run == counted {
			continue
		}
		v.duplicates++
		if r, ok := runs[e.run]; ok && (r.Status == rota.StatusTimeout || r.Status == rota.StatusCanceled) {
			v.explained++
			continue
		}
		rep.errorf("unexplained duplicate", "task %s: extra execution of run %s (worker %s), which Rota records as %q",
			task.ID, e.run, e.worker, runs[e.run].Status)
	}
	return v
}

// getTaskRetry reads a task, retrying a few times over transport errors (a
// server that is restarting).
func getTaskRetry(ctx context.Context, c *rotaclient.Client, id string) (*rota.Task, error) {
	var err error
	for range 20 {
		var task *rota.Task
		task, err = c.GetTask(ctx, id)
		if err == nil {
			return task, nil
		}
		var re *rota.Error
		if errors.As(err, &re) && re.Code == rota.CodeNotFound {
			return nil, err
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil, err
}

// waitKindIdle waits until no task of kind is SCHEDULED or RUNNING.
func waitKindIdle(t *testing.T, ctx context.Context, c *rotaclient.Client, kind string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		// One read of both open statuses: two reads, one a status each,
		// missed a task that went from RUNNING back to SCHEDULED (a lapsed
		// lease retried at once) between them, and called the kind idle.
		open := 1 // unreachable for a moment: try again
		page, err := c.ListTasks(ctx, rotaclient.ListParams{Kind: kind,
			Statuses: []rota.Status{rota.StatusScheduled, rota.StatusRunning}, Limit: 1})
		if err == nil {
			open = len(page.Tasks)
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks of kind %s still open after %v", kind, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// newClient returns a client of the server at addr.
func newClient(t *testing.T, addr string) *rotaclient.Client {
	t.Helper()
	c, err := rotaclient.New(rotaclient.Config{BaseURL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ledgerPath is a fresh ledger file in a test's temporary directory.
func ledgerPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "ledger")
}
