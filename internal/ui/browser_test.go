package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// startWorker runs an in-process worker with handlers by kind; the test's
// cleanup stops it.
func startWorker(t *testing.T, s *stack, id string, handlers map[string]rotaworker.HandlerFunc) *rotaworker.Worker {
	t.Helper()
	w := rotaworker.New(rotaworker.Config{
		Client: s.client, ID: id, PollWait: 2 * time.Second, CancelWait: time.Second, Grace: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	for kind, h := range handlers {
		w.Register(kind, h, rotaworker.HandlerOptions{Concurrency: 4})
	}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		_ = w.Run(context.Background())
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.StopAndCancel(ctx)
		<-returned
	})
	return w
}

// succeed is a handler that takes d and returns the payload as result.
func succeed(d time.Duration) rotaworker.HandlerFunc {
	return func(ctx context.Context, t *rotaworker.Task[json.RawMessage]) error {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		t.SetMessage("done by the test worker")
		return t.SetResult(map[string]any{"echo": t.Raw})
	}
}

// xssPayload would run script if it were ever rendered as HTML.
const xssPayload = `{"html":"<script>window.__xss='script'</script><img src=x onerror=\"window.__xss='img'\">","note":"<b>not bold</b>"}`

// seed fills a stack with a bit of everything: finished, failed, waiting
// and running tasks of a few kinds, a paused kind and two workers.
func seed(t *testing.T, s *stack) (doneID, xssID string) {
	t.Helper()
	ctx := context.Background()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	startWorker(t, s, "worker-a", map[string]rotaworker.HandlerFunc{
		"email":  succeed(10 * time.Millisecond),
		"report": succeed(20 * time.Millisecond),
		"resize": func(ctx context.Context, t *rotaworker.Task[json.RawMessage]) error {
			return rotaworker.NoRetry(errors.New("image too large"))
		},
		"video": func(ctx context.Context, t *rotaworker.Task[json.RawMessage]) error {
			select { // runs until the test ends
			case <-release:
			case <-ctx.Done():
			}
			return nil
		},
	})
	var ids []string
	for i := range 8 {
		ids = append(ids, s.submit(t, rotaclient.TaskParams{Kind: "email", Priority: rota.PriorityHigh, Payload: map[string]any{"to": fmt.Sprintf("user%d@example.com", i)}}))
	}
	for i := range 3 {
		ids = append(ids, s.submit(t, rotaclient.TaskParams{Kind: "report", Payload: map[string]any{"day": fmt.Sprintf("2026-01-0%d", i+1)}}))
	}
	ids = append(ids, s.submit(t, rotaclient.TaskParams{Kind: "resize", Priority: rota.PriorityLow, Payload: map[string]any{"w": 8000}}))
	xssID = s.submit(t, rotaclient.TaskParams{Kind: "email", Payload: json.RawMessage(xssPayload)})
	ids = append(ids, xssID)
	s.submit(t, rotaclient.TaskParams{Kind: "video", Payload: map[string]any{"file": "a.mp4"}, HeartbeatTimeoutSeconds: 60})
	if _, err := s.client.PauseKind(ctx, "thumbnail"); err != nil {
		t.Fatal(err)
	}
	s.submit(t, rotaclient.TaskParams{Kind: "thumbnail", Payload: map[string]any{"img": 1}})
	for _, id := range ids {
		s.waitTask(t, id, 10*time.Second, func(task *rota.Task) bool { return task.Status.Terminal() })
	}
	// A second worker that only claims (a worker id is any text).
	if _, err := s.client.Claim(ctx, rotaclient.ClaimParams{WorkerID: "<img src=x onerror=alert(1)>", Kinds: []string{"nothing"}}); err != nil {
		t.Fatal(err)
	}
	return ids[0], xssID
}

// pages are the UI's pages with what shows that each has loaded.
func pages(taskID string) []struct{ name, path, ready string } {
	return []struct{ name, path, ready string }{
		{"overview", "/", "#overview .stats"},
		{"tasks", "/tasks", "#tasks-table"},
		{"tasks-filtered", "/tasks?kind=email&status=SUCCESS", "#tasks-table"},
		{"task", "/tasks/" + taskID, "#runs-table"},
		{"submit", "/submit", "#submit-form"},
		{"workers", "/workers", "#workers-table"},
		{"kinds", "/kinds", "#kinds-table"},
		{"audit", "/audit", "#audit-table, #audit-list p.empty"},
		{"not-found", "/no/such/page", "[data-page=not-found] h1"},
	}
}

// TestBrowserEveryPageLoadsWithoutErrors opens each page at desktop width
// in the light theme, at phone width and in the dark theme; no page logs a
// console error, none is wider than a phone's screen, and the dark theme
// follows the system setting. Screenshots of each go to the folder logged.
func TestBrowserEveryPageLoadsWithoutErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	doneID, _ := seed(t, s)
	tb := newTab(t, s)
	tb.allow("/no/such/page") // the not-found page is served with status 404
	dir := screenshotDir(t)
	t.Logf("screenshots: %s", dir)

	for _, p := range pages(doneID) {
		tb.open(p.path, p.ready)
		tb.wait(p.name+": live", `document.querySelector('#live').dataset.state === 'live'`, 10*time.Second)
		tb.noConsoleErrors(p.name)
		tb.screenshot(dir, p.name)
	}
	if os.Getenv("ROTA_UPDATE_SCREENSHOT") == "1" {
		tb.open("/", "#overview .stats")
		tb.wait("chart", `document.querySelector('#throughput svg polyline') !== null`, 10*time.Second)
		path := filepath.Join("..", "..", "docs", "screenshot-overview.png")
		tb.screenshot(filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), ".png"))
		t.Logf("updated %s", path)
	}

	// Phone width: usable without sideways scrolling of the page (wide
	// tables scroll inside their own box).
	tb.viewport(390, 844, true)
	for _, p := range pages(doneID) {
		tb.open(p.path, p.ready)
		over := eval[int](tb, `document.documentElement.scrollWidth - window.innerWidth`)
		if over > 1 {
			t.Errorf("%s at 390 px: the page is %d px wider than the screen", p.name, over)
		}
		tb.screenshot(dir, p.name+"-phone")
	}
	tb.noConsoleErrors("phone width")

	// Dark theme from the system setting.
	tb.viewport(1280, 900, false)
	tb.colorScheme("light")
	tb.open("/", "#overview .stats")
	light := eval[string](tb, `getComputedStyle(document.body).backgroundColor`)
	tb.colorScheme("dark")
	tb.wait("dark background", fmt.Sprintf(`getComputedStyle(document.body).backgroundColor !== %q`, light), 10*time.Second)
	dark := eval[string](tb, `getComputedStyle(document.body).backgroundColor`)
	if !strings.HasPrefix(dark, "rgb(15, 18, 22") {
		t.Errorf("dark background = %s, light = %s", dark, light)
	}
	for _, p := range pages(doneID)[:4] {
		tb.open(p.path, p.ready)
		tb.screenshot(dir, p.name+"-dark")
	}
	tb.noConsoleErrors("dark theme")

	// Back and forward move between pages without reloading.
	tb.open("/", "#overview .stats")
	tb.do("mark the document", chromedp.Evaluate[chromedp.Void](`window.__marker = 42`))
	tb.do("follow the Tasks link", chromedp.Click(chromedp.CSS(`.nav a[href="/tasks"]`)), chromedp.WaitVisible(chromedp.CSS("#tasks-table")))
	tb.do("follow a task link", chromedp.Click(chromedp.CSS(`#tasks-table tbody tr a`)), chromedp.WaitVisible(chromedp.CSS("#task-status")))
	tb.do("back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("#tasks-table")))
	tb.do("back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("#overview .stats")))
	tb.do("forward", chromedp.NavigateForward(), chromedp.WaitVisible(chromedp.CSS("#tasks-table")))
	if m := eval[int](tb, `window.__marker || 0`); m != 42 {
		t.Errorf("the document was reloaded while navigating")
	}
	if loc := eval[string](tb, `location.pathname`); loc != "/tasks" {
		t.Errorf("after back, back, forward: at %s, want /tasks", loc)
	}
}

// TestBrowserSubmitFormRunsTheTask fills the submit form; the task page
// shows the task waiting, then done by the in-process worker, without a
// reload. Bad JSON is refused before sending, and the API's error about a
// field shows next to that field.
func TestBrowserSubmitFormRunsTheTask(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	startWorker(t, s, "w-submit", map[string]rotaworker.HandlerFunc{"email": succeed(300 * time.Millisecond)})
	tb := newTab(t, s)
	tb.allow("status of 400") // the refused submit below
	tb.open("/submit", "#submit-form")

	// Invalid JSON: shown inline, nothing sent.
	tb.do("type bad JSON",
		chromedp.SetValue(chromedp.ID("submit-kind"), "email"),
		chromedp.SetValue(chromedp.ID("submit-payload"), `{"to": }`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('submit-payload').dispatchEvent(new Event('input'))`))
	if got := tb.text("#payload-state"); !strings.Contains(got, "Not valid JSON") {
		t.Errorf("payload state = %q, want a JSON error", got)
	}
	tb.do("submit bad JSON", chromedp.Click(chromedp.ID("submit-button")))
	if loc := eval[string](tb, `location.pathname`); loc != "/submit" {
		t.Fatalf("left the form with invalid JSON: %s", loc)
	}

	// An invalid kind: the API's message under the kind field.
	tb.do("bad kind",
		chromedp.SetValue(chromedp.ID("submit-kind"), "no way"),
		chromedp.SetValue(chromedp.ID("submit-payload"), `{"to": "a@b.c"}`),
		chromedp.Click(chromedp.ID("submit-button")))
	tb.wait("kind error", `(document.querySelector('[data-field=kind] .field-error')||{}).textContent.includes('"kind"')`, 10*time.Second)

	// A good submit: on to the task page, which follows the task to SUCCESS.
	tb.do("good submit",
		chromedp.SetValue(chromedp.ID("submit-kind"), "email"),
		chromedp.Click(chromedp.CSS("details summary")),
		chromedp.SetValue(chromedp.ID("submit-retries"), "2"),
		chromedp.Click(chromedp.ID("submit-button")))
	tb.wait("task page", `/^\/tasks\/[0-9a-f]{32}$/.test(location.pathname) && !!document.querySelector('#task-status')`, 10*time.Second)
	id := strings.TrimPrefix(eval[string](tb, `location.pathname`), "/tasks/")
	tb.wait("SUCCESS shown", `document.querySelector('#task-status').textContent === 'SUCCESS'`, 10*time.Second)
	task := s.waitTask(t, id, time.Second, func(task *rota.Task) bool { return task.Status == rota.StatusSuccess })
	if task.MaxRetries != 2 || string(task.Payload) != `{"to":"a@b.c"}` {
		t.Errorf("stored task = %+v", task)
	}
	if got := tb.text("#task-result"); !strings.Contains(got, `"echo"`) {
		t.Errorf("result shown = %q", got)
	}
	tb.noConsoleErrors("submit")
}

// TestBrowserStopEndsARunningTask: Stop on the task page of a running
// task ends it CANCELED, and the page shows it.
func TestBrowserStopEndsARunningTask(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	started := make(chan struct{}, 1)
	startWorker(t, s, "w-stop", map[string]rotaworker.HandlerFunc{"slow": func(ctx context.Context, t *rotaworker.Task[json.RawMessage]) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}})
	id := s.submit(t, rotaclient.TaskParams{Kind: "slow", Payload: map[string]any{"n": 1}, HeartbeatTimeoutSeconds: 3})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not start the task")
	}
	tb := newTab(t, s)
	tb.open("/tasks/"+id, "#runs-table")
	tb.wait("RUNNING shown", `document.querySelector('#task-status').textContent === 'RUNNING'`, 10*time.Second)
	tb.do("stop", chromedp.SetValue(chromedp.ID("stop-message"), "stopped from the UI"), chromedp.Click(chromedp.ID("stop-button")))
	tb.wait("CANCELED shown", `document.querySelector('#task-status').textContent === 'CANCELED'`, 8*time.Second)
	task := s.waitTask(t, id, liveDeadline, func(task *rota.Task) bool { return task.Status == rota.StatusCanceled })
	if len(task.Runs) != 1 || task.Runs[0].Status != rota.StatusCanceled || !task.Runs[0].StopRequested {
		t.Errorf("task = %+v", task)
	}
	if !eval[bool](tb, `document.getElementById('stop-button').disabled`) {
		t.Errorf("Stop is still enabled on a finished task")
	}
	tb.noConsoleErrors("stop")
}

// TestBrowserLiveUpdatesWithinASecond: with the task list and a task page
// open, changes made through the API show up without a reload. The test
// logs how long each took (typically 0.2 s, the goal being 1 s) and fails
// only past liveDeadline: it shares the machine with the whole suite under
// -race, where a browser can be starved for a second or more.
const liveDeadline = 5 * time.Second

func TestBrowserLiveUpdatesWithinASecond(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	tb := newTab(t, s)
	tb.open("/tasks", "#task-list .empty")
	tb.wait("live", `document.querySelector('#live').dataset.state === 'live'`, 10*time.Second)
	tb.do("mark the document", chromedp.Evaluate[chromedp.Void](`window.__marker = 7`))

	start := time.Now()
	id := s.submit(t, rotaclient.TaskParams{Kind: "live", Payload: map[string]any{"n": 1}})
	tb.wait("new task listed", fmt.Sprintf(`!!document.querySelector('tr[data-task=%q]')`, id), liveDeadline)
	t.Logf("new task listed after %v", time.Since(start))

	// A status change on the open task page.
	tb.do("open the task", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-task=%q] a`, id))), chromedp.WaitVisible(chromedp.ID("task-status")))
	if tb.text("#task-status") != "SCHEDULED" {
		t.Fatalf("status = %q", tb.text("#task-status"))
	}
	start = time.Now()
	claim, err := s.client.Claim(context.Background(), rotaclient.ClaimParams{WorkerID: "manual", Kinds: []string{"live"}})
	if err != nil || len(claim.Runs) != 1 {
		t.Fatalf("claim: %+v, %v", claim, err)
	}
	tb.wait("RUNNING shown", `document.querySelector('#task-status').textContent === 'RUNNING'`, liveDeadline)
	t.Logf("RUNNING shown after %v", time.Since(start))
	start = time.Now()
	if err := s.client.Succeed(context.Background(), claim.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "manual", Message: "finished by hand"}); err != nil {
		t.Fatal(err)
	}
	tb.wait("SUCCESS shown", `document.querySelector('#task-status').textContent === 'SUCCESS' && document.querySelector('#task-message').textContent === 'finished by hand'`, liveDeadline)
	t.Logf("SUCCESS shown after %v", time.Since(start))
	if m := eval[int](tb, `window.__marker || 0`); m != 7 {
		t.Errorf("the page was reloaded")
	}
	tb.noConsoleErrors("live")
}

// TestBrowserDataIsNeverHTML: a payload, a message and a worker id holding
// markup render as text; no script runs, no element is created.
func TestBrowserDataIsNeverHTML(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	_, xssID := seed(t, s)
	tb := newTab(t, s)

	tb.open("/tasks/"+xssID, "#task-payload")
	payload := tb.text("#task-payload")
	if !strings.Contains(payload, "<script>window.__xss='script'</script>") || !strings.Contains(payload, "<b>not bold</b>") {
		t.Errorf("payload shown as %q, want the markup as text", payload)
	}
	if n := eval[int](tb, `document.querySelectorAll('main script, main img[src="x"], main b').length`); n != 0 {
		t.Errorf("%d elements were created from data", n)
	}
	if !strings.Contains(tb.text("#task-result"), "<script>") {
		t.Errorf("result shown as %q", tb.text("#task-result"))
	}

	tb.open("/tasks?kind=email", "#tasks-table")
	tb.open("/workers", "#workers-table")
	if !strings.Contains(tb.text("#workers-table"), "<img src=x onerror=alert(1)>") {
		t.Errorf("the worker id is not shown as text: %q", tb.text("#workers-table"))
	}
	time.Sleep(200 * time.Millisecond) // an onerror handler would have run by now
	if v := eval[string](tb, `String(window.__xss)`); v != "undefined" {
		t.Errorf("script from data ran: window.__xss = %s", v)
	}
	if n := eval[int](tb, `document.querySelectorAll('main img[src="x"]').length`); n != 0 {
		t.Errorf("an <img> was created from a worker id")
	}
	tb.noConsoleErrors("data as text")
}

// TestBrowserLoginWithToken: with authentication on, the UI sends the
// browser to /login; a wrong token is refused; the right one sets an
// HttpOnly cookie that authenticates the API and the event stream.
func TestBrowserLoginWithToken(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	s := newStack(t, stackOptions{authToken: token})
	tb := newTab(t, s)
	tb.allow("401") // the first API calls and the first stream are refused

	tb.do("open the overview", chromedp.Navigate(s.URL+"/tasks?kind=x"))
	tb.wait("on the login page", `location.pathname === '/login' && !!document.querySelector('#token')`, 10*time.Second)
	if next := eval[string](tb, `new URLSearchParams(location.search).get('next')`); next != "/tasks?kind=x" {
		t.Errorf("next = %q", next)
	}
	tb.do("wrong token", chromedp.SetValue(chromedp.ID("token"), "nope"), chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	tb.do("right token", chromedp.SetValue(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")))
	tb.wait("back on the tasks page", `location.pathname === '/tasks' && !!document.querySelector('#task-list .empty')`, 10*time.Second)
	tb.wait("stream authenticated by the cookie", `document.querySelector('#live').dataset.state === 'live'`, 8*time.Second)
	if c := eval[string](tb, `document.cookie`); strings.Contains(c, "rota_token") {
		t.Errorf("the token cookie is readable from script: %q", c)
	}
	id := s.submit(t, rotaclient.TaskParams{Kind: "x", Payload: map[string]any{}})
	tb.wait("new task listed", fmt.Sprintf(`!!document.querySelector('tr[data-task=%q]')`, id), 10*time.Second)

	// Cross-site state changes are refused, whatever the credentials.
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/tasks/stop/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", resp.StatusCode)
	}

	// Logging out clears the cookie.
	tb.do("log out", chromedp.Click(chromedp.CSS(".logout button")))
	tb.wait("on the login page", `location.pathname === '/login'`, 10*time.Second)
	resp, err = http.Get(s.URL + "/api/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/stats without a token: %d, want 401", resp.StatusCode)
	}
}

// TestBrowserKindsAndWorkersActions: pause, resume and change a kind's
// settings, and stop (drain) a worker, from their pages.
func TestBrowserKindsAndWorkersActions(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	if _, err := s.client.SetKind(ctx, "email", rotaclient.KindSettings{}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, s)
	tb.open("/kinds", "#kinds-table")
	tb.do("pause", chromedp.Click(chromedp.CSS(`button[data-toggle="email"]`)))
	tb.wait("paused", `document.querySelector('tr[data-kind="email"] .badge').textContent === 'paused'`, 10*time.Second)
	if k, _ := s.client.GetKind(ctx, "email"); k == nil || !k.Paused {
		t.Fatalf("kind after Pause = %+v", k)
	}
	tb.do("settings",
		chromedp.SetValue(chromedp.CSS(`form[data-kind-form="email"] input[name="priority_factor"]`), "5"),
		chromedp.SetValue(chromedp.CSS(`form[data-kind-form="email"] input[name="max_running"]`), "7"),
		chromedp.Click(chromedp.CSS(`form[data-kind-form="email"] button`)))
	tb.wait("saved", `document.querySelector('#kinds-flash').textContent.includes('saved')`, 10*time.Second)
	if k, _ := s.client.GetKind(ctx, "email"); k == nil || k.PriorityFactor != 5 || k.MaxRunning != 7 || !k.Paused {
		t.Fatalf("kind after Save = %+v", k)
	}
	// The save's live update may re-render the table while the click is
	// on its way; tab.do then finds the new button and clicks again.
	tb.do("resume", chromedp.Click(chromedp.CSS(`button[data-toggle="email"]`)))
	tb.wait("resumed", `document.querySelector('tr[data-kind="email"] .badge').textContent === 'active'`, 10*time.Second)

	startWorker(t, s, "drain-me", map[string]rotaworker.HandlerFunc{"email": succeed(0)})
	tb.open("/workers", `tr[data-worker="drain-me"]`)
	tb.do("stop the worker", chromedp.Click(chromedp.CSS(`button[data-stop="drain-me"]`)))
	tb.wait("stopped", `document.querySelector('tr[data-worker="drain-me"] .badge').textContent === 'stopped'`, 10*time.Second)
	tb.noConsoleErrors("kinds and workers")
}

// TestBrowserListKeepsChangesDuringItsLoad: a task submitted while the task
// list's first load is on its way (the list read before the insert, its
// answer arriving after the insert's event) still shows: the page gets the
// events that came during its load once the load is done. It used to
// register for events only after its load, and such a task stayed off the
// list until the next event (the login test failed that way under load).
func TestBrowserListKeepsChangesDuringItsLoad(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var held atomic.Bool
	s := newStack(t, stackOptions{wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || r.URL.Path != "/api/tasks" || !held.CompareAndSwap(false, true) {
				next.ServeHTTP(w, r)
				return
			}
			// The first list: read now, answered once the gate opens.
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			<-gate
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}})
	tb := newTab(t, s)
	tb.do("open the list", chromedp.Navigate(s.URL+"/tasks"))
	tb.wait("the stream live", `document.querySelector('#live')?.dataset.state === 'live'`, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for !held.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the list's first load never came")
		}
		time.Sleep(10 * time.Millisecond)
	}
	id := s.submit(t, rotaclient.TaskParams{Kind: "during", Payload: map[string]any{}})
	// Time for the insert's event to reach the page while its first
	// load waits (were it late, the test would pass without checking).
	time.Sleep(500 * time.Millisecond)
	close(gate)
	tb.wait("the task submitted during the load listed", fmt.Sprintf(`!!document.querySelector('tr[data-task=%q]')`, id), 10*time.Second)
	tb.noConsoleErrors("list during load")
}
