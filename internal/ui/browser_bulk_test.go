package ui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// submitMany submits n tasks of kind (no worker serves them: they stay
// SCHEDULED) in batches of up to 1000, each made by mod when not nil.
func submitMany(t *testing.T, s *stack, kind string, n int, mod func(i int, p *rotaclient.TaskParams)) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		var ps []rotaclient.TaskParams
		for i := start; i < min(n, start+1000); i++ {
			p := rotaclient.TaskParams{Kind: kind, Payload: map[string]int{"i": i}}
			if mod != nil {
				mod(i, &p)
			}
			ps = append(ps, p)
		}
		if _, err := s.client.SubmitBatch(context.Background(), ps); err != nil {
			t.Fatalf("submit batch: %v", err)
		}
	}
}

// counts reads the stored tasks of kind by status.
func counts(t *testing.T, s *stack, kind string) map[rota.Status]int {
	t.Helper()
	c, err := s.store.TaskCountByStatus(context.Background(), store.TaskListParams{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBrowserBulkStopThousandByFilter (issue 16, must show): the tasks
// page selects every task matching its filter (1,000, over 20 pages),
// asks to confirm with the count, stops them on the server in batches and
// shows the job's progress to the end: all 1,000 end CANCELED, the tasks
// outside the filter are untouched. Then a bulk run-again of two ticked
// tasks.
func TestBrowserBulkStopThousandByFilter(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	submitMany(t, s, "flood", 1000, nil)
	submitMany(t, s, "calm", 3, nil)

	tb := newTab(t, s)
	tb.open("/tasks?kind=flood&status=SCHEDULED", "#tasks-table")
	tb.wait("count of the filter", `document.querySelector('[data-count="SCHEDULED"]').textContent === '1000'`, 15*time.Second)
	if n := eval[int](tb, `document.querySelectorAll('#tasks-table tbody tr').length`); n != 50 {
		t.Fatalf("first page shows %d tasks, want 50", n)
	}
	tb.do("select all matching", chromedp.Click(chromedp.CSS(`#select-all-matching`)))
	tb.wait("selection of 1000", `document.querySelector('#bulk-selection').textContent.includes('All 1000 tasks matching')`, 5*time.Second)
	tb.do("stop", chromedp.Click(chromedp.CSS(`#bulk-bar button[data-action="stop"]`)))
	tb.wait("confirmation", `document.querySelector('#bulk-confirm').open`, 5*time.Second)
	if got := tb.text("#bulk-confirm-text"); got != "Stop 1000 tasks matching the filter?" {
		t.Fatalf("confirmation says %q", got)
	}
	// Record every value the progress bar shows.
	eval[bool](tb, `(() => { window.seen = []; new MutationObserver(() => {
		const p = document.querySelector('#bulk-progress-bar'); if (p) window.seen.push(p.value + '/' + p.max);
	}).observe(document.querySelector('#bulk-progress'), {childList: true, subtree: true}); return true; })()`)
	tb.do("confirm", chromedp.Click(chromedp.CSS(`#bulk-ok`)))
	tb.wait("job done", `(document.querySelector('#bulk-progress-text') || {}).dataset?.status === 'done'`, 60*time.Second)
	if got := tb.text("#bulk-progress-text"); got != "Stopped 1000 of 1000" {
		t.Errorf("progress says %q", got)
	}
	if got := eval[string](tb, `document.querySelector('#bulk-progress-bar').value + '/' + document.querySelector('#bulk-progress-bar').max`); got != "1000/1000" {
		t.Errorf("progress bar at %s", got)
	}
	t.Logf("progress bar values seen: %v", eval[[]string](tb, `window.seen`))
	if c := counts(t, s, "flood"); c[rota.StatusCanceled] != 1000 || len(c) != 1 {
		t.Fatalf("flood after the bulk stop: %v, want 1000 CANCELED", c)
	}
	if c := counts(t, s, "calm"); c[rota.StatusScheduled] != 3 || len(c) != 1 {
		t.Fatalf("calm after the bulk stop: %v, want untouched", c)
	}
	tb.wait("list follows", `document.querySelector('[data-count="CANCELED"]').textContent === '1000'`, 10*time.Second)

	// Two ticked tasks, run again.
	tb.open("/tasks?kind=calm", "#tasks-table")
	tb.do("tick two", chromedp.Click(chromedp.CSS(`#tasks-table tbody tr:nth-child(1) input[name=task]`)),
		chromedp.Click(chromedp.CSS(`#tasks-table tbody tr:nth-child(2) input[name=task]`)))
	tb.wait("two selected", `document.querySelector('#bulk-selection').textContent === '2 selected on this page.'`, 5*time.Second)
	tb.do("run again", chromedp.Click(chromedp.CSS(`#bulk-bar button[data-action="run_again"]`)))
	tb.wait("confirmation", `document.querySelector('#bulk-confirm').open`, 5*time.Second)
	if got := tb.text("#bulk-confirm-text"); got != "Run again 2 tasks?" {
		t.Fatalf("confirmation says %q", got)
	}
	tb.do("confirm", chromedp.Click(chromedp.CSS(`#bulk-ok`)))
	tb.wait("job done", `(document.querySelector('#bulk-progress-text') || {}).textContent === 'Submitted again 2 of 2'`, 30*time.Second)
	if c := counts(t, s, "calm"); c[rota.StatusScheduled] != 5 {
		t.Fatalf("calm after run again: %v, want 5 SCHEDULED", c)
	}
	tb.noConsoleErrors("bulk")
}

// TestBrowserTasksSortRangesAndMore: sorting by run at from the column
// header (both ways), the sort and the filters kept by "More", and a
// created range set in the form and kept in the URL.
func TestBrowserTasksSortRangesAndMore(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	now := time.Now()
	// 60 tasks whose run_at goes backwards as they are created.
	submitMany(t, s, "later", 60, func(i int, p *rotaclient.TaskParams) { p.RunAt = now.Add(time.Duration(120-i) * time.Minute) })
	submitMany(t, s, "other", 2, nil)

	tb := newTab(t, s)
	tb.open("/tasks?kind=later", "#tasks-table")
	runAts := `[...document.querySelectorAll('#tasks-table tbody tr td:nth-child(8) time')].map(e => e.getAttribute('datetime'))`
	sorted := func(dir string) string {
		return `(() => { const v = ` + runAts + `; return v.length > 1 && v.every((x, i) => i === 0 || (v[i-1] ` + dir + ` x)); })()`
	}
	tb.do("sort by run at", chromedp.Click(chromedp.CSS(`button.sort[data-sort="run_at"]`)))
	tb.wait("sort in the URL", `new URLSearchParams(location.search).get('sort') === 'run_at'`, 10*time.Second)
	tb.wait("ascending", sorted("<="), 10*time.Second)
	if got := eval[string](tb, `document.querySelector('th[aria-sort="ascending"] button').dataset.sort`); got != "run_at" {
		t.Errorf("aria-sort on %q", got)
	}
	firstPageLast := eval[string](tb, runAts+`.at(-1)`)
	tb.do("more", chromedp.Click(chromedp.CSS(`#next-page`)))
	tb.wait("second page", `new URLSearchParams(location.search).get('cursor') !== null`, 10*time.Second)
	q := eval[string](tb, `location.search`)
	if !strings.Contains(q, "kind=later") || !strings.Contains(q, "sort=run_at") {
		t.Errorf("More lost the filter or the sort: %s", q)
	}
	tb.wait("10 more, later ones", fmt.Sprintf(`(() => { const v = %s; return v.length === 10 && v[0] > %q; })()`, runAts, firstPageLast), 10*time.Second)

	tb.open("/tasks?kind=later&sort=run_at", "#tasks-table")
	tb.do("sort descending", chromedp.Click(chromedp.CSS(`button.sort[data-sort="run_at"]`)))
	tb.wait("descending", `new URLSearchParams(location.search).get('sort') === '-run_at'`, 10*time.Second)
	tb.wait("descending rows", sorted(">="), 10*time.Second)

	// A created range: everything was created after 2000, nothing before.
	tb.open("/tasks", "#tasks-table")
	tb.do("open ranges", chromedp.Click(chromedp.CSS(`#filter-ranges summary`)))
	eval[bool](tb, `(document.querySelector('#filter-created-after').value = '2000-01-01T00:00', true)`)
	tb.do("apply", chromedp.Click(chromedp.CSS(`#filter-apply`)))
	tb.wait("range in the URL", `(new URLSearchParams(location.search).get('created_after') || '').startsWith('20')`, 10*time.Second)
	tb.wait("all tasks", `document.querySelector('#filter-total').textContent.startsWith('(62 ')`, 10*time.Second)
	tb.wait("input kept", `document.querySelector('#filter-created-after').value !== ''`, 5*time.Second)
	eval[bool](tb, `(document.querySelector('#filter-created-before').value = '2000-01-02T00:00', true)`)
	tb.do("apply", chromedp.Click(chromedp.CSS(`#filter-apply`)))
	tb.wait("nothing in the range", `document.querySelector('#task-list .empty') !== null && document.querySelector('#filter-total').textContent.startsWith('(0 ')`, 10*time.Second)
	tb.noConsoleErrors("sort and ranges")
}

// TestBrowserTaskPageRunDetails: a task's page lists its attempts with
// their times and worker, the run's events (a stream of that task only,
// beginning with the kept ones) and its result.
func TestBrowserTaskPageRunDetails(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	startWorker(t, s, "w-details", map[string]rotaworker.HandlerFunc{"detail": succeed(50 * time.Millisecond)})
	id := s.submit(t, rotaclient.TaskParams{Kind: "detail", Payload: map[string]any{"n": 7}})
	s.waitTask(t, id, 15*time.Second, func(task *rota.Task) bool { return task.Status == rota.StatusSuccess })
	s.submit(t, rotaclient.TaskParams{Kind: "detail", Payload: map[string]any{"n": 8}}) // another task's events

	tb := newTab(t, s)
	tb.open("/tasks/"+id, "#runs-table")
	row := `document.querySelector('#runs-table tbody tr')`
	if got := eval[string](tb, row+`.children[1].textContent`); got != "w-details" {
		t.Errorf("attempt's worker %q", got)
	}
	if took := eval[string](tb, row+`.children[6].textContent`); !strings.HasSuffix(took, "s") {
		t.Errorf("attempt's duration %q", took)
	}
	tb.wait("the run's events", `['task.running', 'run.running', 'run.succeeded', 'task.succeeded'].every(n =>
		document.querySelector('#task-events li[data-event="' + n + '"]'))`, 15*time.Second)
	other := eval[int](tb, `[...document.querySelectorAll('#task-events li')].filter(li => li.textContent.includes('"n":8')).length`)
	if other != 0 {
		t.Errorf("another task's events shown: %d", other)
	}
	if got := tb.text("#task-result"); !strings.Contains(got, `"n": 7`) {
		t.Errorf("result %q", got)
	}
	tb.noConsoleErrors("task page")
}

// TestBrowserHistoryCharts: the overview charts the last 24 h of finished
// tasks, failures and latency from the stored tasks.
func TestBrowserHistoryCharts(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	startWorker(t, s, "w-history", map[string]rotaworker.HandlerFunc{"hist": succeed(0)})
	var ids []string
	for range 3 {
		ids = append(ids, s.submit(t, rotaclient.TaskParams{Kind: "hist", Payload: map[string]any{}}))
	}
	for _, id := range ids {
		s.waitTask(t, id, 15*time.Second, func(task *rota.Task) bool { return task.Status == rota.StatusSuccess })
	}
	tb := newTab(t, s)
	tb.open("/", "#history")
	tb.wait("totals", `document.querySelector('#history-totals').textContent.startsWith('3 succeeded · 0 failed')`, 10*time.Second)
	for _, sel := range []string{`#history-throughput polyline[data-series="succeeded"]`, `#history-throughput polyline[data-series="failed"]`,
		`#history-latency polyline[data-series="wait_avg_ms"]`, `#history-latency polyline[data-series="duration_avg_ms"]`} {
		if !eval[bool](tb, fmt.Sprintf(`document.querySelector(%q) !== null`, sel)) {
			t.Errorf("no %s", sel)
		}
	}
	if n := eval[int](tb, `document.querySelector('#history-throughput polyline[data-series="succeeded"]').getAttribute('points').split(' ').length`); n != 96 {
		t.Errorf("succeeded line has %d points, want 96 (15 min buckets)", n)
	}
	tb.noConsoleErrors("history")
}

// TestBrowserPhoneNavigation: at 375 px every navigation link is on the
// screen (none cut off or scrolled away) and works.
func TestBrowserPhoneNavigation(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	tb := newTab(t, s)
	tb.viewport(375, 700, true)
	tb.open("/", "#overview")
	out := eval[[]string](tb, `[...document.querySelectorAll('.nav a')].filter(a => getComputedStyle(a).display !== 'none').filter(a => {
		const r = a.getBoundingClientRect();
		return r.left < 0 || r.right > window.innerWidth || r.width === 0 || r.height === 0;
	}).map(a => a.textContent)`)
	if len(out) != 0 {
		t.Errorf("links cut off at 375 px: %v", out)
	}
	if over := eval[int](tb, `document.documentElement.scrollWidth - window.innerWidth`); over > 1 {
		t.Errorf("the page is %d px wider than the screen", over)
	}
	for _, p := range []struct{ nav, ready string }{{"kinds", "[data-page=kinds]"}, {"workers", "[data-page=workers]"}, {"tasks", "#tasks-table, #task-list .empty"}} {
		tb.do("tap "+p.nav, chromedp.Click(chromedp.CSS(`.nav a[data-nav="`+p.nav+`"]`)), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		if got := eval[string](tb, `location.pathname`); got != "/"+p.nav {
			t.Errorf("tapped %s, at %s", p.nav, got)
		}
	}
	tb.wait("bulk bar fits", `document.querySelector('#bulk-bar').getBoundingClientRect().right <= window.innerWidth`, 5*time.Second)
	tb.noConsoleErrors("phone")
}
