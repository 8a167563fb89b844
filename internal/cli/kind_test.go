package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/rotahq/rota/rotaclient"
)

func TestKindCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	golden(t, "kind_set", b.ok(t, "kind", "set", "email", "--priority-factor", "3", "--max-running", "5", "--rate", "2.5", "--retention", "168h"))
	b.ok(t, "kind", "set", "reports")
	golden(t, "kind_pause", b.ok(t, "kind", "pause", "reports"))
	golden(t, "kind_list", b.ok(t, "kind", "list"))
	// Only the flags given change.
	out := b.ok(t, "kind", "set", "email", "--max-running", "0")
	if !strings.Contains(out, "email  3                no      none         2.5/s  168h") {
		t.Errorf("partial set:\n%s", out)
	}
	golden(t, "kind_resume", b.ok(t, "kind", "resume", "reports", "-o", "json"))
	var k struct {
		Kind           string `json:"kind"`
		PriorityFactor int    `json:"priority_factor"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "kind", "get", "email", "-o", "json")), &k); err != nil || k.Kind != "email" || k.PriorityFactor != 3 {
		t.Errorf("kind get -o json: %+v %v", k, err)
	}
	b.wantExit(t, ExitNotFound, "kind", "get", "nope")
	if msg := b.wantExit(t, ExitUsage, "kind", "set", "email", "--priority-factor", "0"); !strings.Contains(msg, "(flag --priority-factor)") {
		t.Errorf("bad factor: %q", msg)
	}
	b.wantExit(t, ExitUsage, "kind", "pause")
	// Push dispatch: set, kept by other changes, refused when unknown.
	b.ok(t, "kind", "set", "hooks", "--dispatch", "push")
	b.ok(t, "kind", "set", "hooks", "--max-running", "2")
	var d struct {
		Dispatch string `json:"dispatch"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "kind", "get", "hooks", "-o", "json")), &d); err != nil || d.Dispatch != "push" {
		t.Errorf("kind set --dispatch push: %+v %v", d, err)
	}
	if msg := b.wantExit(t, ExitUsage, "kind", "set", "hooks", "--dispatch", "shove"); !strings.Contains(msg, "(flag --dispatch)") {
		t.Errorf("bad dispatch: %q", msg)
	}
}

func TestStatsAndWorkerListCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	golden(t, "stats_empty", b.ok(t, "stats"))
	for _, p := range []rotaclient.TaskParams{
		{Kind: "email"}, {Kind: "email"}, {Kind: "email"}, {Kind: "report", Delay: 3600e9},
	} {
		if _, err := b.client.Submit(b.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"email"}, Max: 2, Address: "10.1.2.3"})
	if err != nil || len(cl.Runs) != 2 {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	if err := b.client.Succeed(b.ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w2", Kinds: []string{"report"}, Max: 1}); err != nil {
		t.Fatal(err)
	}
	// OLDEST_WAITING, the last column, depends on the machine's speed.
	golden(t, "stats", regexp.MustCompile(`(?m)\b[0-9.]+(ms|s)$`).ReplaceAllString(b.ok(t, "stats"), "0s"))
	var st struct {
		Totals map[string]int `json:"totals"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "stats", "-o", "json")), &st); err != nil || st.Totals["SCHEDULED"] != 2 || st.Totals["RUNNING"] != 1 || st.Totals["SUCCESS"] != 1 {
		t.Errorf("stats -o json: %+v %v", st, err)
	}

	golden(t, "worker_list", b.ok(t, "worker", "list"))
	golden(t, "worker_stop", b.ok(t, "worker", "stop", "w1"))
	var ws struct {
		Workers []struct {
			WorkerID      string `json:"worker_id"`
			StopRequested bool   `json:"stop_requested"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "worker", "list", "-o", "json")), &ws); err != nil || len(ws.Workers) != 2 || !ws.Workers[0].StopRequested {
		t.Errorf("worker list -o json: %+v %v", ws, err)
	}
	if msg := b.wantExit(t, ExitNotFound, "worker", "stop", "nobody"); !strings.Contains(msg, "nobody") {
		t.Errorf("stop unknown worker: %q", msg)
	}
	b.wantExit(t, ExitUsage, "worker", "stop")
	b.wantExit(t, ExitUsage, "worker", "list", "extra")
}
