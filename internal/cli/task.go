package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

func newTaskCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Submit, list, inspect, re-run and stop tasks",
		Long: `Submit, list, inspect, re-run and stop tasks on a Rota server (--server or ROTA_SERVER).

Exit codes: 0 ok, 1 error, 2 bad usage or input rejected by the server,
3 no such task, 4 the task's state forbids the operation (e.g. stopping a finished task).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTaskSubmitCmd(env), newTaskListCmd(env), newTaskGetCmd(env), newTaskRunAgainCmd(env), newTaskStopCmd(env))
	return cmd
}

func newTaskSubmitCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: map[string]string{
		"kind": "kind", "priority": "priority", "task": "payload", "key": "key", "run_at": "run-at",
		"delay_seconds": "delay", "max_retries": "max-retries", "timeout_seconds": "timeout",
		"heartbeat_timeout_seconds": "heartbeat-timeout", "workers": "workers", "worker_ids": "worker-id",
		"rerun_if_finished": "rerun-if-finished",
	}}
	s := &submitFlags{}
	cmd := &cobra.Command{
		Use:   "submit --kind KIND [--payload JSON | --payload-file FILE]",
		Short: "Submit a task",
		Long: `Submit a task and print its id.

The payload is any JSON value, handed to the worker as given: --payload '{"to":"a"}',
or --payload-file FILE (- reads standard input); {} when neither is given.
With --key, the task of the same kind and key — unfinished or finished, until retention
deletes it — is returned instead of a new one (its id is printed and a note goes to
standard error). With --key and --rerun-if-finished, a finished task holding the key
runs again under its id instead (a note goes to standard error); an unfinished one
is never disturbed.`,
		Example: `  rota task submit --kind email --priority high --payload '{"to":"a@example.com"}'
  echo '{"n":1}' | rota task submit --kind report --payload-file - --delay 10m
  rota task submit --kind sync --key nightly --timeout 5m --max-retries 0 -o json
  rota task submit --kind sync --key nightly --rerun-if-finished`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			p, err := s.params(cmd, env.Stdin)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			res, err := c.Submit(cmd.Context(), p)
			if err != nil {
				return o.fail(err)
			}
			return printSubmitted(env, o, p, res)
		},
	}
	s.register(cmd)
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

// submitFlags are the flags of rota task submit that make its TaskParams.
type submitFlags struct {
	p           rotaclient.TaskParams
	priority    string
	payload     string
	payloadFile string
	runAt       string
	delay       int
	maxRetries  int
}

// register defines the flags on cmd.
func (s *submitFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.p.Kind, "kind", "", "kind of the task (required): selects the workers that run it")
	f.StringVar(&s.priority, "priority", "mid", "priority: high, mid or low")
	f.StringVar(&s.payload, "payload", "", "the task's JSON payload")
	f.StringVar(&s.payloadFile, "payload-file", "", "read the JSON payload from this file (- for standard input)")
	f.StringVar(&s.p.Key, "key", "", "idempotency key: while a task of this kind has it (finished or not, until retention deletes it), submit returns that task")
	f.BoolVar(&s.p.RerunIfFinished, "rerun-if-finished", false, "with --key: a finished task holding the key runs again under its id instead of being returned")
	f.Var(secondsValue{&s.delay}, "delay", "run no sooner than this long from now (e.g. 90s, 10m)")
	f.StringVar(&s.runAt, "run-at", "", "run no sooner than this time: RFC 3339 (2025-01-02T15:04:05Z) or unix seconds")
	f.IntVar(&s.maxRetries, "max-retries", 3, "failed runs tolerated before the task fails")
	f.Var(secondsValue{&s.p.TimeoutSeconds}, "timeout", "time limit of each run (0: none)")
	f.Var(secondsValue{&s.p.HeartbeatTimeoutSeconds}, "heartbeat-timeout", "lease a worker's heartbeats must renew (server default 30s)")
	f.IntVar(&s.p.Workers, "workers", 0, "distinct workers that must each run it successfully (server default 1)")
	f.StringSliceVar(&s.p.WorkerIDs, "worker-id", nil, "only this worker may run it (repeatable, or comma-separated)")
}

// params checks the flags given to cmd and returns the task to submit; a
// usage error names the flag at fault.
func (s *submitFlags) params(cmd *cobra.Command, stdin io.Reader) (rotaclient.TaskParams, error) {
	p := s.p
	if p.Kind == "" {
		return p, usageError("--kind is required")
	}
	if p.RerunIfFinished && p.Key == "" {
		return p, usageError("--rerun-if-finished needs --key: it reruns the finished task holding the key")
	}
	p.Priority = rota.Priority(strings.ToLower(s.priority))
	raw, err := readPayload(stdin, s.payload, s.payloadFile, cmd.Flags().Changed("payload"))
	if err != nil {
		return p, err
	}
	p.Payload = raw
	if s.runAt != "" {
		if cmd.Flags().Changed("delay") {
			return p, usageError("give --run-at or --delay, not both")
		}
		if p.RunAt, err = parseTime(s.runAt); err != nil {
			return p, usageError("--run-at %q: %v", s.runAt, err)
		}
	}
	p.Delay = time.Duration(s.delay) * time.Second
	if cmd.Flags().Changed("max-retries") {
		maxRetries := s.maxRetries
		p.MaxRetries = &maxRetries
	}
	return p, nil
}

// printSubmitted prints the submitted task's id (or res as JSON with -o
// json), with a note on standard error when an existing task was returned.
func printSubmitted(env Env, o *apiOpts, p rotaclient.TaskParams, res rotaclient.SubmitResult) error {
	if o.json() {
		b, _ := json.Marshal(res)
		return writeJSON(env.Stdout, b)
	}
	switch {
	case res.Rerun:
		fmt.Fprintf(env.Stderr, "rota: the finished %s task with key %q runs again under its id\n", p.Kind, p.Key)
	case res.Existing:
		fmt.Fprintf(env.Stderr, "rota: a %s task with key %q exists: nothing new was submitted\n", p.Kind, p.Key)
	}
	_, err := fmt.Fprintln(env.Stdout, res.TaskID)
	return err
}

// readPayload returns the payload from --payload or --payload-file, {} when
// neither is given, checked to be JSON.
func readPayload(stdin io.Reader, payload, file string, payloadSet bool) (json.RawMessage, error) {
	var b []byte
	flag := "--payload"
	switch {
	case payloadSet && file != "":
		return nil, usageError("give --payload or --payload-file, not both")
	case file == "-":
		flag = "--payload-file -"
		var err error
		if b, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("read the payload from standard input: %w", err)
		}
	case file != "":
		flag = "--payload-file " + file
		var err error
		if b, err = os.ReadFile(file); err != nil {
			return nil, usageError("--payload-file: %v", err)
		}
	case payloadSet:
		b = []byte(payload)
	default:
		return json.RawMessage("{}"), nil
	}
	b = []byte(strings.TrimSpace(string(b)))
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		if len(b) == 0 {
			err = fmt.Errorf("empty")
		}
		return nil, usageError("%s: not valid JSON: %v", flag, err)
	}
	return b, nil
}

// parseTime reads RFC 3339 or unix seconds.
func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want RFC 3339 (2025-01-02T15:04:05Z) or unix seconds")
	}
	return t, nil
}

func newTaskListCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: map[string]string{"kind": "kind", "status": "status", "key": "key", "limit": "limit", "cursor": "cursor",
		"priority": "priority", "worker_id": "worker-id", "q": "search"}}
	var (
		p    rotaclient.ListParams
		st   string
		prio string
		all  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Long: `List tasks, newest first, one page at a time (--limit). When there are more,
the command to see the next page goes to standard error; --all lists every page.`,
		Example: `  rota task list --kind email --status FAILED
  rota task list --status FAILED,TIMEOUT --search smtp --worker-id w1
  rota task list --all -o json | jq -r '.tasks[].task_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			p.Status = rota.Status(strings.ToUpper(st))
			p.Priority = rota.Priority(strings.ToLower(prio))
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if o.json() {
				return o.listJSON(cmd, c, p, all)
			}
			return printListing(o, listing[rota.Task]{
				header: taskHeader(), row: taskRow, all: all, each: c.AllTasks(ctx, p),
				page: func() ([]rota.Task, string, error) {
					page, err := c.ListTasks(ctx, p)
					if err != nil {
						return nil, "", err
					}
					return page.Tasks, page.NextCursor, nil
				},
				more: cmd.CommandPath(),
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Kind, "kind", "", "only tasks of this kind")
	f.StringVar(&st, "status", "", "only tasks in this status, or these (comma-separated): "+statusNames())
	f.StringVar(&p.Key, "key", "", "only tasks with this key")
	f.StringVar(&prio, "priority", "", "only tasks of this priority: high, mid or low")
	f.StringVar(&p.WorkerID, "worker-id", "", "only tasks with a run by this worker")
	f.StringVar(&p.Search, "search", "", "only tasks whose id is this, or whose key or message contains it")
	f.IntVar(&p.Limit, "limit", 50, "tasks per page (1-1000)")
	f.StringVar(&p.Cursor, "cursor", "", "start after this cursor (printed after a page that has more)")
	f.BoolVar(&all, "all", false, "list every page")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

func statusNames() string {
	var names []string
	for _, s := range rota.Statuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// listJSON prints the data of GET /api/tasks; with all, the tasks of every
// page in one list.
func (o *apiOpts) listJSON(cmd *cobra.Command, c *rotaclient.Client, p rotaclient.ListParams, all bool) error {
	var tasks []json.RawMessage
	for {
		q := p
		var page struct {
			Tasks      []json.RawMessage `json:"tasks"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := c.Do(cmd.Context(), http.MethodGet, "/api/tasks"+q.Encode(), nil, &page); err != nil {
			return o.fail(err)
		}
		tasks = append(tasks, page.Tasks...)
		if !all || page.NextCursor == "" || page.NextCursor == p.Cursor {
			if tasks == nil {
				tasks = []json.RawMessage{}
			}
			next := page.NextCursor
			if all {
				next = ""
			}
			b, err := json.Marshal(map[string]any{"tasks": tasks, "next_cursor": next})
			if err != nil {
				return err
			}
			return writeJSON(o.env.Stdout, b)
		}
		p.Cursor = page.NextCursor
	}
}

// taskHeader is the header of the tasks table.
func taskHeader() []string {
	return []string{"ID", "KIND", "PRIORITY", "STATUS", "ATTEMPT", "CREATED", "MESSAGE"}
}

func taskRow(t *table, task *rota.Task) {
	t.row(task.ID, task.Kind, task.Priority, task.Status, task.Attempt, task.CreatedAt, short(task.Message, 60))
}

func newTaskGetCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[*rota.Task]{
		Use:    "get TASK_ID",
		Short:  "Show a task and its runs",
		Arg:    "TASK_ID",
		Method: http.MethodGet, Path: refPath("/api/tasks/", ""),
		Do:   (*rotaclient.Client).GetTask,
		Show: printTask,
	})
}

// printTask shows every field of a task, then its runs.
func printTask(w io.Writer, task *rota.Task) error {
	t := newTable(w)
	t.row("ID:", task.ID)
	t.row("Kind:", task.Kind)
	t.row("Priority:", task.Priority)
	t.row("Status:", task.Status)
	t.row("Attempt:", fmt.Sprintf("%d (max retries %d)", task.Attempt, task.MaxRetries))
	t.row("Key:", task.Key)
	t.row("Workers:", task.Workers)
	t.row("Worker IDs:", task.WorkerIDs)
	t.row("Timeout:", formatSeconds(task.TimeoutSeconds))
	t.row("Heartbeat timeout:", formatSeconds(task.HeartbeatTimeoutSeconds))
	t.row("Created:", task.CreatedAt)
	t.row("Run at:", task.RunAt)
	t.row("Started:", task.StartTime)
	t.row("Ended:", task.EndTime)
	t.row("Worker address:", task.WorkerAddress)
	t.row("Message:", short(task.Message, 200))
	t.row("Payload:", short(string(task.Payload), 200))
	t.row("Result:", short(string(task.Result), 200))
	if task.ScheduleID != "" {
		t.row("Schedule:", task.ScheduleID)
		t.row("Fire time:", task.FireTime)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(task.Runs) == 0 {
		_, err := fmt.Fprintln(w, "\nNo runs yet.")
		return err
	}
	fmt.Fprintln(w)
	r := newTable(w, "RUN", "ATTEMPT", "WORKER", "STATUS", "STARTED", "ENDED", "MESSAGE")
	for _, run := range task.Runs {
		r.row(run.ID, run.Attempt, run.WorkerID, run.Status, run.StartTime, run.EndTime, short(run.Message, 60))
	}
	return r.flush()
}

func newTaskRunAgainCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[string]{
		Use:   "run-again TASK_ID",
		Short: "Submit a copy of a task and print the new task's id",
		Long: `Submit a copy of a task (same kind, priority, payload and options, no key, due now)
and print the new task's id. The original is left as it is.`,
		Arg:    "TASK_ID",
		Method: http.MethodPost, Path: refPath("/api/tasks/run_again/", ""),
		Do:   (*rotaclient.Client).RunAgain,
		Show: printLine,
	})
}

func newTaskStopCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[*rota.Task]{
		Use:   "stop TASK_ID",
		Short: "Stop (cancel) a task",
		Long: `Stop a task: a waiting task is CANCELED at once; a running one is asked to stop
through its workers' next heartbeat and ends CANCELED when they give it up.
Stopping a finished task fails with exit code 4.`,
		Arg:    "TASK_ID",
		Method: http.MethodPost, Path: refPath("/api/tasks/stop/", ""),
		Do: (*rotaclient.Client).StopTask,
		Show: func(w io.Writer, task *rota.Task) error {
			t := newTable(w, taskHeader()...)
			taskRow(t, task)
			return t.flush()
		},
	})
}
