package ui_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// TestBrowserDependencyChain: a chain a → b → c submitted as one batch is
// shown on the middle task's page (its parent and its child, with their
// statuses), follows a's success live (b leaves WAITING), and a's child
// list links to the tasks list filtered by depends_on.
func TestBrowserDependencyChain(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	res, err := s.client.SubmitBatch(ctx, []rotaclient.TaskParams{
		{Kind: "extract", Payload: 1, Ref: "a"},
		{Kind: "transform", Payload: 2, Ref: "b", DependsOn: []string{rotaclient.DependsOnRef("a")}},
		{Kind: "load", Payload: 3, DependsOn: []string{rotaclient.DependsOnRef("b")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := res[0].TaskID, res[1].TaskID, res[2].TaskID

	tb := newTab(t, s)
	dir := screenshotDir(t)
	tb.open("/tasks/"+b, "#task-deps")
	if got := tb.text("#task-status .badge"); got != "WAITING" {
		t.Errorf("b's status badge %q, want WAITING", got)
	}
	tb.wait("parent and child listed", `document.querySelector('#task-parents li[data-task="`+a+`"] .badge')?.textContent === 'SCHEDULED'
		&& document.querySelector('#task-children li[data-task="`+c+`"] .badge')?.textContent === 'WAITING'`, 10*time.Second)
	tb.screenshot(dir, "task-deps-waiting")

	cl, err := s.client.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"extract"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != a {
		t.Fatalf("claim of a: %+v, %v", cl, err)
	}
	if err := s.client.Succeed(ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1"}); err != nil {
		t.Fatal(err)
	}
	s.waitTask(t, b, 10*time.Second, func(task *rota.Task) bool { return task.Status == rota.StatusScheduled })
	tb.wait("b released live", `document.querySelector('#task-status .badge')?.textContent === 'SCHEDULED'
		&& document.querySelector('#task-parents li[data-task="`+a+`"] .badge')?.textContent === 'SUCCESS'`, 10*time.Second)
	tb.screenshot(dir, "task-deps-released")

	tb.open("/tasks?depends_on="+b, "#tasks-table")
	if n := eval[int](tb, `document.querySelectorAll('#tasks-table tbody tr').length`); n != 1 {
		t.Errorf("%d tasks listed as depending on b, want 1", n)
	}
	if got := eval[string](tb, `document.querySelector('#tasks-table tbody tr')?.dataset.task || ''`); got != c {
		t.Errorf("task listed as depending on b: %q, want %s", got, c)
	}
	tb.noConsoleErrors("dependency chain pages")
}
