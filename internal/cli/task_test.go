package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

func TestTaskCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)

	email := strings.TrimSpace(b.ok(t, "task", "submit", "--kind", "email", "--priority", "high", "--payload", `{"to":"a"}`,
		"--key", "k1", "--timeout", "1m", "--heartbeat-timeout", "45", "--max-retries", "2", "--worker-id", "w1", "--worker-id", "w2"))
	if !rota.ValidID(email) {
		t.Fatalf("submit printed %q", email)
	}
	// The same key again: the existing task, with a note.
	r := b.run(t, "task", "submit", "--kind", "email", "--key", "k1")
	if r.code != 0 || strings.TrimSpace(r.stdout) != email || !strings.Contains(r.stderr, "nothing new was submitted") {
		t.Errorf("keyed resubmit: %+v", r)
	}
	report := strings.TrimSpace(b.runIn(t, "{\"n\": 1}\n", "task", "submit", "--kind", "report", "--payload-file", "-", "--delay", "1h", "--priority", "LOW").stdout)
	if !rota.ValidID(report) {
		t.Fatalf("submit from stdin printed %q", report)
	}

	golden(t, "task_list", b.ok(t, "task", "list"))
	golden(t, "task_get_scheduled", b.ok(t, "task", "get", email))

	// Run the email task to give it runs, then show it.
	cl, err := b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"email"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	if err := b.client.Fail(b.ctx, cl.Runs[0].RunID, rotaclient.FailParams{WorkerID: "w1", Message: "smtp\tdown\nretry later"}); err != nil {
		t.Fatal(err)
	}
	for {
		cl, err = b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"email"}, Max: 1, Wait: 2e9})
		if err != nil {
			t.Fatal(err)
		}
		if len(cl.Runs) == 1 {
			break
		}
	}
	if err := b.client.Succeed(b.ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1", Message: "sent", Result: map[string]int{"id": 7}}); err != nil {
		t.Fatal(err)
	}
	golden(t, "task_get_done", b.ok(t, "task", "get", email))

	// JSON output is the API's data.
	var got struct {
		TaskID string          `json:"task_id"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
		Runs   []struct {
			Status string `json:"status"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "task", "get", email, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.TaskID != email || got.Status != "SUCCESS" || compact(got.Result) != `{"id":7}` || len(got.Runs) != 2 || got.Runs[0].Status != "FAILED" {
		t.Errorf("task get -o json = %+v", got)
	}
	var page struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
			Kind   string `json:"kind"`
		} `json:"tasks"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "task", "list", "-o", "json", "--kind", "report")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) != 1 || page.Tasks[0].TaskID != report || page.NextCursor == nil {
		t.Errorf("task list -o json = %+v", page)
	}
	var sub struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "task", "submit", "--kind", "misc", "-o", "json")), &sub); err != nil || !rota.ValidID(sub.TaskID) {
		t.Errorf("task submit -o json: %+v %v", sub, err)
	}

	// Paging: one per page, the next page's command on stderr; --all gets all.
	r = b.run(t, "task", "list", "--limit", "1")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stderr, "more: rota task list --cursor ") {
		t.Errorf("paged list: %+v", r)
	}
	if out := b.ok(t, "task", "list", "--limit", "1", "--all"); strings.Count(out, "\n") != 4 {
		t.Errorf("list --all:\n%s", out)
	}
	if err := json.Unmarshal([]byte(b.ok(t, "task", "list", "--limit", "1", "--all", "-o", "json")), &page); err != nil || len(page.Tasks) != 3 || *page.NextCursor != "" {
		t.Errorf("list --all -o json: %+v %v", page, err)
	}

	// Stop: a waiting task is canceled; a finished one is a conflict (4).
	golden(t, "task_stop", b.ok(t, "task", "stop", report))
	if msg := b.wantExit(t, ExitConflict, "task", "stop", email); !strings.Contains(msg, "rota: ") {
		t.Errorf("stop finished: %q", msg)
	}
	again := strings.TrimSpace(b.ok(t, "task", "run-again", email))
	if !rota.ValidID(again) || again == email {
		t.Errorf("run-again printed %q", again)
	}
	if task, err := b.client.GetTask(b.ctx, again); err != nil || task.Status != rota.StatusScheduled || string(task.Payload) != `{"to":"a"}` {
		t.Errorf("re-run task = %+v, %v", task, err)
	}

	// Not found (3), usage (2).
	unknown := "0123456789abcdef0123456789abcdef"
	for _, args := range [][]string{{"task", "get", unknown}, {"task", "stop", unknown}, {"task", "run-again", unknown}, {"task", "get", unknown, "-o", "json"}} {
		if msg := b.wantExit(t, ExitNotFound, args...); !strings.Contains(msg, "not found") {
			t.Errorf("%v: %q", args, msg)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"task", "get"}, "want 1 argument(s): TASK_ID"},
		{[]string{"task", "submit"}, "--kind is required"},
		{[]string{"task", "submit", "--kind", "email", "--priority", "urgent"}, `field "priority"`},
		{[]string{"task", "submit", "--kind", "bad kind"}, `(flag --kind)`},
		{[]string{"task", "submit", "--kind", "email", "--max-retries", "-1"}, `(flag --max-retries)`},
		{[]string{"task", "submit", "--kind", "email", "--payload", "{bad"}, "--payload: not valid JSON"},
		{[]string{"task", "submit", "--kind", "email", "--payload", "1", "--payload-file", "x"}, "not both"},
		{[]string{"task", "submit", "--kind", "email", "--timeout", "soon"}, "--timeout"},
		{[]string{"task", "submit", "--kind", "email", "--run-at", "tomorrow"}, "--run-at"},
		{[]string{"task", "list", "--status", "DONE"}, `field "status"`},
		{[]string{"task", "list", "-o", "yaml"}, "want table or json"},
		{[]string{"task", "list", "--bogus"}, "unknown flag"},
		{[]string{"task", "frobnicate"}, "unknown command"},
		{[]string{"frobnicate"}, "unknown command"},
	} {
		if msg := b.wantExit(t, ExitUsage, tc.args...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, msg, tc.want)
		}
	}
}

func TestServerFromEnvAndFlag(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// ROTA_SERVER is honoured (every other test relies on it too).
	if out := b.ok(t, "kind", "list"); !strings.HasPrefix(out, "KIND") {
		t.Errorf("kind list: %q", out)
	}
	// --server wins over the environment.
	b.env["ROTA_SERVER"] = "http://127.0.0.1:1"
	b.ok(t, "kind", "list", "--server", b.url)
	// An unreachable server is an error (1) that says where it looked.
	if msg := b.wantExit(t, ExitError, "kind", "list"); !strings.Contains(msg, "cannot reach the Rota server at http://127.0.0.1:1") {
		t.Errorf("unreachable: %q", msg)
	}
	if msg := b.wantExit(t, ExitUsage, "stats", "--server", "localhost:8080"); !strings.Contains(msg, "--server") {
		t.Errorf("bad URL: %q", msg)
	}
	// Any flag reads ROTA_<NAME>.
	b.env["ROTA_SERVER"] = b.url
	b.env["ROTA_OUTPUT"] = "json"
	if out := b.ok(t, "kind", "list"); !strings.Contains(out, `"kinds": []`) {
		t.Errorf("ROTA_OUTPUT=json: %q", out)
	}
	b.env["ROTA_OUTPUT"] = "xml"
	b.wantExit(t, ExitUsage, "kind", "list")
}

func TestHelpAndCompletion(t *testing.T) {
	t.Parallel()
	b := &bundle{env: map[string]string{}}
	b.ctx = t.Context()
	root := b.ok(t, "--help")
	for _, want := range []string{"task", "kind", "worker", "stats", "server", "completion", "ROTA_SERVER", "Exit codes"} {
		if !strings.Contains(root, want) {
			t.Errorf("rota --help lacks %q", want)
		}
	}
	for _, path := range [][]string{
		{"task"}, {"task", "submit"}, {"task", "list"}, {"task", "get"}, {"task", "run-again"}, {"task", "stop"},
		{"kind"}, {"kind", "list"}, {"kind", "get"}, {"kind", "set"}, {"kind", "pause"}, {"kind", "resume"},
		{"worker"}, {"worker", "list"}, {"worker", "stop"}, {"stats"}, {"server"},
	} {
		out := b.ok(t, append(path, "--help")...)
		if !strings.Contains(out, "Usage:") || !strings.Contains(out, "rota "+strings.Join(path, " ")) {
			t.Errorf("rota %v --help:\n%s", path, out)
		}
		if len(path) > 1 || path[0] == "stats" {
			if !strings.Contains(out, "--server") || !strings.Contains(out, "(env ROTA_SERVER)") {
				t.Errorf("rota %v --help does not document --server and its variable", path)
			}
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := b.ok(t, "completion", sh); len(out) < 100 {
			t.Errorf("completion %s: %q", sh, out)
		}
	}
}

func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

func TestTaskSubmitRerunIfFinished(t *testing.T) {
	t.Parallel()
	b := setup(t)

	if msg := b.wantExit(t, ExitUsage, "task", "submit", "--kind", "sync", "--rerun-if-finished"); !strings.Contains(msg, "--rerun-if-finished needs --key") {
		t.Errorf("--rerun-if-finished without --key: %q", msg)
	}
	id := strings.TrimSpace(b.ok(t, "task", "submit", "--kind", "sync", "--key", "nightly"))
	// Unfinished: the flag does not disturb it.
	r := b.run(t, "task", "submit", "--kind", "sync", "--key", "nightly", "--rerun-if-finished")
	if r.code != ExitOK || strings.TrimSpace(r.stdout) != id || !strings.Contains(r.stderr, "nothing new was submitted") {
		t.Errorf("rerun of an unfinished task: %+v", r)
	}
	cl, err := b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"sync"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != id {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	if err := b.client.Succeed(b.ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1"}); err != nil {
		t.Fatal(err)
	}
	// Finished, without the flag: answered as it is.
	r = b.run(t, "task", "submit", "--kind", "sync", "--key", "nightly")
	if r.code != ExitOK || strings.TrimSpace(r.stdout) != id || !strings.Contains(r.stderr, "nothing new was submitted") {
		t.Errorf("keyed resubmit of a finished task: %+v", r)
	}
	// Finished, with the flag: runs again under its id.
	var res rotaclient.SubmitResult
	if err := json.Unmarshal([]byte(b.ok(t, "task", "submit", "--kind", "sync", "--key", "nightly", "--rerun-if-finished", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.TaskID != id || !res.Existing || !res.Rerun {
		t.Errorf("rerun -o json = %+v, want task %s existing and rerun", res, id)
	}
	task, err := b.client.GetTask(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status == rota.StatusSuccess {
		t.Errorf("after the rerun the task is still %s", task.Status)
	}
	cl, err = b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"sync"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != id {
		t.Fatalf("claim after rerun = %+v, %v", cl, err)
	}
	if err := b.client.Succeed(b.ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1"}); err != nil {
		t.Fatal(err)
	}
	// The text output notes the rerun.
	r = b.run(t, "task", "submit", "--kind", "sync", "--key", "nightly", "--rerun-if-finished")
	if r.code != ExitOK || strings.TrimSpace(r.stdout) != id || !strings.Contains(r.stderr, "runs again under its id") {
		t.Errorf("text rerun: %+v", r)
	}
}

func TestTaskListFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	high := strings.TrimSpace(b.ok(t, "task", "submit", "--kind", "f", "--priority", "high", "--key", "Nightly"))
	low := strings.TrimSpace(b.ok(t, "task", "submit", "--kind", "f", "--priority", "low"))
	cl, err := b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"f"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != high {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	ids := func(args ...string) string {
		t.Helper()
		var page struct {
			Tasks []struct {
				TaskID string `json:"task_id"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(b.ok(t, append([]string{"task", "list", "-o", "json"}, args...)...)), &page); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, task := range page.Tasks {
			out = append(out, task.TaskID)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "running,scheduled"}, low + " " + high},
		{[]string{"--status", "RUNNING"}, high},
		{[]string{"--priority", "LOW"}, low},
		{[]string{"--worker-id", "w1"}, high},
		{[]string{"--search", "nightly"}, high},
	} {
		if got := ids(tc.args...); got != tc.want {
			t.Errorf("task list %v = %q, want %q", tc.args, got, tc.want)
		}
	}
	if msg := b.wantExit(t, ExitUsage, "task", "list", "--priority", "urgent"); !strings.Contains(msg, "--priority") {
		t.Errorf("bad --priority: %q", msg)
	}
}
