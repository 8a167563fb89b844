package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// DefaultNoRetryCode is the exit code with which a command run by `rota
// worker` says that its task must not be retried: 65, EX_DATAERR of
// sysexits(3) ("the input data was incorrect"), which shell tools rarely
// use by accident.
const DefaultNoRetryCode = 65

// stderrTail is how much of the end of a failed command's standard error
// goes into its failure message.
const stderrTail = 4 << 10

// workerFlags are the flags of `rota worker`.
type workerFlags struct {
	server    string
	token     string
	kinds     []string
	r         commandRunner
	cfg       rotaworker.Config
	logLevel  string
	logFormat string
}

const workerLong = `Run COMMAND once for each task of the given kinds, up to --concurrency at once per kind.

Each run gets its own process group, with
  standard input   the task's JSON payload
  environment      ROTA_TASK_ID, ROTA_RUN_ID, ROTA_ATTEMPT, ROTA_KIND, ROTA_LOCAL_RETRY
                   (and the worker's own); for a task fired by a schedule also
                   ROTA_SCHEDULE_ID and ROTA_FIRE_TIME (the nominal fire time, unix seconds)
and its exit code decides the outcome:
  0                success; standard output (up to --max-output bytes) is the task's message
  65               failure that must not be retried (EX_DATAERR; see --no-retry-code)
  anything else    failure, retried while the task has retries left
With --local-retries N, a command that fails with any other code (or cannot start, or
is killed by a signal it did not get from the worker) is first run again at once for the
same run, up to N times, before the failure is reported: ROTA_ATTEMPT stays, and
ROTA_LOCAL_RETRY counts the runs of the command before (0 for the first). The runs share
the task's lease and timeout; a stopped, timed-out or lost task is never run again locally.
Standard error is logged (up to --max-output bytes) and its last 4 KiB end the failure
message. When the task is stopped, times out, its lease is lost or the worker stops after
its grace period, the process group gets SIGTERM, then SIGKILL after --kill-grace; any
process left in the group when the command ends is killed. A failing or crashing command
never stops the worker. A task's timeout and lease count from when the server handed it
over, and a stop reaches the command at once.

SIGINT or SIGTERM stop the worker gracefully: it claims nothing more, lets running commands
finish for up to --grace, then kills the rest and hands their tasks back to be retried at
once by other workers. 'rota worker stop ID' does the same remotely.

Note: ROTA_KIND is also the variable of the --kind flag of rota's commands; a command that
runs 'rota task submit' or 'rota task list' should pass --kind explicitly.

Subcommands 'rota worker list' and 'rota worker stop ID' inspect and stop workers; to run a
program called list or stop, put it after --.`

func newWorkerCmd(env Env) *cobra.Command {
	var wf workerFlags
	cmd := &cobra.Command{
		Use:   "worker --kind KIND [flags] -- COMMAND [ARG...]",
		Short: "Run a command for each task of some kinds (any language); list and stop workers",
		Long:  workerLong,
		Example: `  rota worker --kind email --concurrency 4 -- ./send.sh --from noreply@example.com
  rota worker --kind resize --kind thumbnail -- python3 resize.py
  rota worker --kind report -- sh -c 'jq -r .name | ./report.sh'`,
		Args: workerArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bindEnv(cmd.Flags(), env.Getenv); err != nil {
				return err
			}
			w, err := wf.newWorker(env, args)
			if err != nil {
				return err
			}
			return w.Run(cmd.Context())
		},
	}
	wf.define(cmd)
	annotateEnv(cmd)
	cmd.AddCommand(newWorkerListCmd(env), newWorkerStopCmd(env))
	return cmd
}

// workerArgs wants a command after --, or a subcommand.
func workerArgs(cmd *cobra.Command, args []string) error {
	switch dash := cmd.ArgsLenAtDash(); {
	case len(args) == 0:
		return usageError("give the command to run after --, e.g. rota worker --kind email -- ./send.sh; or a subcommand: list, stop")
	case dash != 0:
		return usageError("unknown subcommand %q: to run a command, put it after -- (rota worker --kind KIND -- COMMAND)", args[0])
	}
	return nil
}

// define declares the flags on cmd.
func (wf *workerFlags) define(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&wf.server, "server", defaultServer, "URL of the Rota server")
	f.StringVar(&wf.token, "token", "", "API token of the server, if it requires one")
	f.StringSliceVar(&wf.kinds, "kind", nil, "kind of tasks to run (required; repeatable, or comma-separated)")
	f.StringVar(&wf.cfg.ID, "id", "", "worker id, unique among running workers (default host-pid-random)")
	f.IntVar(&wf.cfg.Concurrency, "concurrency", 1, "commands run at once, per kind")
	f.DurationVar(&wf.cfg.Grace, "grace", 30*time.Second, "on SIGINT/SIGTERM or a remote stop, how long running commands may finish")
	f.DurationVar(&wf.r.killGrace, "kill-grace", 5*time.Second, "after SIGTERM, how long a cancelled command has before SIGKILL")
	f.IntVar(&wf.r.maxOutput, "max-output", 64<<10, "bytes of standard output kept as the message (and of standard error logged)")
	f.IntVar(&wf.r.noRetryCode, "no-retry-code", DefaultNoRetryCode, "exit code that fails the task without retry")
	f.IntVar(&wf.cfg.MaxLocalRetries, "local-retries", 0, "times a failing command is run again at once, for the same run, before the failure is reported")
	f.StringVar(&wf.cfg.Listen, "listen", "", "push mode: serve on this address (e.g. 127.0.0.1:0), register it with the server and run the tasks it posts (kinds in push mode) instead of claiming")
	f.StringVar(&wf.cfg.PushAddress, "push-address", "", "push mode: the URL to register (default http://{--listen}/, which must then name a host)")
	f.StringVar(&wf.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&wf.logFormat, "log-format", "text", "log format: text or json")
}

// validKinds checks --kind and drops duplicates.
func (wf *workerFlags) validKinds() ([]string, error) {
	if len(wf.kinds) == 0 {
		return nil, usageError("--kind is required (repeat it for several kinds)")
	}
	var ks []string
	for _, k := range wf.kinds {
		if !rota.ValidKind(k) {
			return nil, usageError("--kind %q: want letters, digits and _.:- (1 to 128 characters)", k)
		}
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return ks, nil
}

// checkLimits checks the numeric flags.
func (wf *workerFlags) checkLimits() error {
	switch {
	case wf.cfg.Concurrency < 1:
		return usageError("--concurrency %d: want at least 1", wf.cfg.Concurrency)
	case wf.r.maxOutput < 1:
		return usageError("--max-output %d: want at least 1 byte", wf.r.maxOutput)
	case wf.r.noRetryCode < 1 || wf.r.noRetryCode > 255:
		return usageError("--no-retry-code %d: want 1 to 255", wf.r.noRetryCode)
	case wf.cfg.MaxLocalRetries < 0:
		return usageError("--local-retries %d: want 0 or more", wf.cfg.MaxLocalRetries)
	}
	return nil
}

// newWorker validates the flags and returns the worker that runs argv for
// every kind.
func (wf *workerFlags) newWorker(env Env, argv []string) (*rotaworker.Worker, error) {
	ks, err := wf.validKinds()
	if err != nil {
		return nil, err
	}
	if err := wf.checkLimits(); err != nil {
		return nil, err
	}
	logger, err := newLogger(env.Stderr, wf.logLevel, wf.logFormat)
	if err != nil {
		return nil, err
	}
	c, err := rotaclient.New(rotaclient.Config{BaseURL: wf.server, UserAgent: "rota-worker", Token: wf.token})
	if err != nil {
		return nil, usageError("--server %q: want a URL such as %s", wf.server, defaultServer)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, usageError("command %q: %v", argv[0], err)
	}
	r := wf.r
	r.argv = argv
	r.log = logger
	cfg := wf.cfg
	cfg.Client = c
	cfg.Logger = logger
	cfg.CancelWait = r.killGrace + 2*time.Second
	w := rotaworker.New(cfg)
	for _, k := range ks {
		w.Register(k, &r)
	}
	return w, nil
}

// commandRunner runs one process per task. Immutable once the worker runs.
type commandRunner struct {
	argv        []string
	killGrace   time.Duration
	maxOutput   int
	noRetryCode int
	log         *slog.Logger
}

var _ rotaworker.Handler = (*commandRunner)(nil)

// Work runs the command for one task; see the help of rota worker.
func (r *commandRunner) Work(ctx context.Context, t *rotaworker.Task[json.RawMessage]) error {
	log := r.log.With("kind", t.Kind, "task_id", t.ID, "run_id", t.RunID)
	p, err := r.start(t)
	if err != nil {
		return err
	}
	log.Debug("rota worker: command started", "pid", p.pgid)
	p.feed(t.Raw)
	stdout := &headBuffer{max: r.maxOutput}
	stderr := &stderrLog{max: r.maxOutput, log: log}
	copied := p.collect(stdout, stderr)
	waitErr := r.wait(ctx, p, log)
	p.cleanup(copied)
	stderr.flush()
	return r.outcome(ctx, t, p.cmd.ProcessState, waitErr, stdout, stderr, log)
}

// commandProc is one running command and our ends of its pipes.
type commandProc struct {
	cmd             *exec.Cmd
	pgid            int // its process group: its pid
	inW, outR, errR *os.File
	waited          chan error // yields cmd.Wait's result
}

// start starts the command for t in a process group of its own, with the
// task in its environment; the payload is yet to be fed.
func (r *commandRunner) start(t *rotaworker.Task[json.RawMessage]) (*commandProc, error) {
	var files [6]*os.File // inR, inW, outR, outW, errR, errW
	closeAll := func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}
	for i, what := range []string{"stdin", "stdout", "stderr"} {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s pipe: %w", what, err)
		}
		files[2*i], files[2*i+1] = pr, pw
	}
	inR, inW, outR, outW, errR, errW := files[0], files[1], files[2], files[3], files[4], files[5]
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.Env = append(os.Environ(),
		"ROTA_TASK_ID="+t.ID, "ROTA_RUN_ID="+t.RunID, "ROTA_ATTEMPT="+strconv.Itoa(t.Attempt), "ROTA_KIND="+t.Kind,
		"ROTA_LOCAL_RETRY="+strconv.Itoa(t.LocalRetry))
	if t.ScheduleID != "" {
		// Why the task runs: its schedule and nominal fire time (unix s).
		cmd.Env = append(cmd.Env, "ROTA_SCHEDULE_ID="+t.ScheduleID, "ROTA_FIRE_TIME="+strconv.FormatInt(t.FireTime.Unix(), 10))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	startErr := cmd.Start()
	// The child has its copies; ours would keep the pipes open.
	inR.Close()
	outW.Close()
	errW.Close()
	if startErr != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", r.argv[0], startErr)
	}
	p := &commandProc{cmd: cmd, pgid: cmd.Process.Pid, inW: inW, outR: outR, errR: errR, waited: make(chan error, 1)}
	go func() { p.waited <- cmd.Wait() }()
	return p, nil
}

// feed writes the payload to the command's standard input, then closes it.
func (p *commandProc) feed(payload []byte) {
	go func() {
		// A command that does not read its input gets EPIPE here once it
		// is gone (or the pipe is closed by cleanup).
		_, _ = p.inW.Write(payload)
		p.inW.Close()
	}()
}

// collect copies the command's output into stdout and stderr; the
// returned channel yields once per stream copied to its end.
func (p *commandProc) collect(stdout, stderr io.Writer) <-chan struct{} {
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(stdout, p.outR); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(stderr, p.errR); copied <- struct{}{} }()
	return copied
}

// wait waits for the command to end. When ctx ends first, its group gets
// SIGTERM, then SIGKILL after killGrace.
func (r *commandRunner) wait(ctx context.Context, p *commandProc, log *slog.Logger) error {
	select {
	case err := <-p.waited:
		return err
	case <-ctx.Done():
	}
	log.Info("rota worker: stopping the command", "cause", context.Cause(ctx))
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	t := time.NewTimer(r.killGrace)
	defer t.Stop()
	select {
	case err := <-p.waited:
		return err
	case <-t.C:
		log.Warn("rota worker: the command ignored SIGTERM: killing it", "grace", r.killGrace)
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		return <-p.waited
	}
}

// cleanup kills whatever is left of the command's group and closes our
// pipes once their output is copied (or after a second: a process that
// left the group may hold them).
func (p *commandProc) cleanup(copied <-chan struct{}) {
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	drain := time.NewTimer(time.Second)
	for range 2 {
		select {
		case <-copied:
		case <-drain.C:
			p.outR.Close()
			p.errR.Close()
		}
	}
	drain.Stop()
	p.outR.Close()
	p.errR.Close()
	p.inW.Close()
}

// outcome turns how the command ended into the handler's result.
func (r *commandRunner) outcome(ctx context.Context, t *rotaworker.Task[json.RawMessage], st *os.ProcessState, waitErr error,
	stdout *headBuffer, stderr *stderrLog, log *slog.Logger) error {
	if waitErr == nil {
		t.SetMessage(strings.TrimRight(stdout.String(), "\r\n"))
		log.Debug("rota worker: command succeeded")
		return nil
	}
	msg := describeExit(st, waitErr)
	if cause := context.Cause(ctx); cause != nil {
		msg += " (" + cause.Error() + ")"
	}
	if tail := stderr.tail(); tail != "" {
		msg += "\nstderr:\n" + tail
	}
	err := errors.New(msg)
	if st != nil && st.ExitCode() == r.noRetryCode {
		return rotaworker.NoRetry(err)
	}
	return err
}

// describeExit says how a command ended.
func describeExit(st *os.ProcessState, err error) string {
	if st == nil {
		return err.Error()
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return "exit code " + strconv.Itoa(st.ExitCode())
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	max       int
	buf       []byte
	truncated bool
}

func (h *headBuffer) Write(p []byte) (int, error) {
	keep := p
	if room := h.max - len(h.buf); len(keep) > room {
		keep = keep[:max(room, 0)]
		h.truncated = true
	}
	h.buf = append(h.buf, keep...)
	return len(p), nil
}

func (h *headBuffer) String() string {
	if h.truncated {
		return string(h.buf) + "\n…(output truncated)"
	}
	return string(h.buf)
}

// stderrLog logs a command's standard error line by line, up to max
// bytes, and keeps its last stderrTail bytes.
type stderrLog struct {
	max     int
	log     *slog.Logger
	logged  int
	partial []byte
	end     []byte
}

func (s *stderrLog) Write(p []byte) (int, error) {
	s.end = append(s.end, p...)
	if len(s.end) > 2*stderrTail {
		s.end = append(s.end[:0], s.end[len(s.end)-stderrTail:]...)
	}
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
	if len(s.partial) > 4<<10 { // a very long line: log it in pieces
		s.line(string(s.partial))
		s.partial = s.partial[:0]
	}
	return len(p), nil
}

func (s *stderrLog) line(l string) {
	if s.logged >= s.max {
		return
	}
	s.logged += len(l) + 1
	if s.logged >= s.max {
		s.log.Info("rota worker: command stderr", "line", l+" …(stderr log truncated)")
		return
	}
	s.log.Info("rota worker: command stderr", "line", l)
}

func (s *stderrLog) flush() {
	if len(s.partial) > 0 {
		s.line(string(s.partial))
		s.partial = nil
	}
}

// tail is the end of the standard error, at most stderrTail bytes.
func (s *stderrLog) tail() string {
	b := s.end
	if len(b) > stderrTail {
		b = b[len(b)-stderrTail:]
	}
	return strings.TrimRight(string(b), "\r\n")
}

func workerHeader() []string {
	return []string{"ID", "STATUS", "KINDS", "RUNNING", "ADDRESS", "LAST_SEEN", "STOP_REQUESTED"}
}

func workerRow(t *table, w *rota.Worker) {
	t.row(w.ID, w.Status, w.Kinds, w.Running, w.Address, w.LastSeen, w.StopRequested)
}

func newWorkerListCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env}
	var filter rotaclient.WorkerFilter
	var status string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workers the server has seen",
		Long: `List the workers the server has seen: active (seen recently), lost (silent for
longer than their liveness window) or stopped (asked to stop, or stopped gracefully,
and holding no runs). With --json it prints the first page (--limit, --cursor).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			filter.Status = rota.WorkerStatus(status)
			if o.json() {
				q := url.Values{}
				for name, v := range map[string]string{"status": status, "kind": filter.Kind} {
					if v != "" {
						q.Set(name, v)
					}
				}
				return o.call(cmd.Context(), c, http.MethodGet, "/api/workers?"+q.Encode(), nil)
			}
			ws, err := c.ListWorkersWhere(cmd.Context(), filter)
			if err != nil {
				return o.fail(err)
			}
			t := newTable(env.Stdout, workerHeader()...)
			for i := range ws {
				workerRow(t, &ws[i])
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only workers of this status: active, lost or stopped")
	cmd.Flags().StringVar(&filter.Kind, "kind", "", "only workers that claim this kind")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

func newWorkerStopCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[*rota.Worker]{
		Use:   "stop WORKER_ID",
		Short: "Ask a worker to stop (drain)",
		Long: `Ask a worker to stop: it gets no more work, learns it at its next claim or
heartbeat, lets its running tasks finish within its grace period, hands the rest back
and exits. Exit code 3 if the server never saw that worker.`,
		Arg:    "WORKER_ID",
		Method: http.MethodPost, Path: refPath("/api/workers/", "/stop"),
		Do: (*rotaclient.Client).StopWorker,
		Show: func(w io.Writer, wk *rota.Worker) error {
			t := newTable(w, workerHeader()...)
			workerRow(t, wk)
			return t.flush()
		},
	})
}
