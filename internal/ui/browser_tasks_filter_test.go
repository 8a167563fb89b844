package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// TestBrowserTasksMultiStatus: the tasks page filters by several statuses
// at once (kept in the URL), shows the count of every status for the other
// filters, and searches messages.
func TestBrowserTasksMultiStatus(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	startWorker(t, s, "w-filter", map[string]rotaworker.HandlerFunc{
		"ok": succeed(0),
		"bad": func(context.Context, *rotaworker.Task[json.RawMessage]) error {
			return rotaworker.NoRetry(errors.New("image too large"))
		},
	})
	var ids []string
	for range 3 {
		ids = append(ids, s.submit(t, rotaclient.TaskParams{Kind: "ok", Payload: map[string]any{}}))
	}
	for range 2 {
		ids = append(ids, s.submit(t, rotaclient.TaskParams{Kind: "bad", Payload: map[string]any{}}))
	}
	s.submit(t, rotaclient.TaskParams{Kind: "idle", Payload: map[string]any{}}) // no worker: stays SCHEDULED
	for _, id := range ids {
		s.waitTask(t, id, 15*time.Second, func(task *rota.Task) bool { return task.Status.Terminal() })
	}

	tb := newTab(t, s)
	tb.open("/tasks?status=success,failed", "#tasks-table")
	rows := `[...document.querySelectorAll('#tasks-table tbody tr .badge')].map(b => b.dataset.status).sort().join(',')`
	count := func(st string) string { return `document.querySelector('[data-count="` + st + `"]').textContent` }
	tb.wait("two statuses listed", rows+` === 'FAILED,FAILED,SUCCESS,SUCCESS,SUCCESS'`, 10*time.Second)
	tb.wait("counts", count("SUCCESS")+` === '3' && `+count("FAILED")+` === '2' && `+count("SCHEDULED")+` === '1' && `+
		count("RUNNING")+` === '0'`, 10*time.Second)
	if got := eval[string](tb, `[...document.querySelectorAll('#filter-status input:checked')].map(b => b.value).join(',')`); got != "SUCCESS,FAILED" {
		t.Errorf("checked statuses: %q, want SUCCESS,FAILED", got)
	}

	// A third status, by its chip: the URL and the list follow.
	tb.do("tick SCHEDULED", chromedp.Click(chromedp.CSS(`#filter-status input[value="SCHEDULED"]`)))
	tb.wait("three statuses in the URL", `new URLSearchParams(location.search).get('status') === 'SCHEDULED,SUCCESS,FAILED'`, 10*time.Second)
	tb.wait("three statuses listed", rows+` === 'FAILED,FAILED,SCHEDULED,SUCCESS,SUCCESS,SUCCESS'`, 10*time.Second)

	// Back restores the two-status filter from the URL.
	tb.do("back", chromedp.NavigateBack())
	tb.wait("back to two statuses", rows+` === 'FAILED,FAILED,SUCCESS,SUCCESS,SUCCESS'`, 10*time.Second)

	// Search by message: the counts follow the search, not the statuses.
	tb.open("/tasks?status=SUCCESS,FAILED&q=TOO+LARGE", "#tasks-table")
	tb.wait("search", rows+` === 'FAILED,FAILED'`, 10*time.Second)
	tb.wait("counts of the search", count("FAILED")+` === '2' && `+count("SUCCESS")+` === '0' && `+count("SCHEDULED")+` === '0'`, 10*time.Second)
	if v := eval[string](tb, `document.querySelector('#filter-q').value`); v != "TOO LARGE" {
		t.Errorf("search box shows %q", v)
	}
	tb.noConsoleErrors("tasks filters")
}
