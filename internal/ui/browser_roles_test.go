package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rotahq/rota/rotaclient"
)

// TestBrowserReaderSeesNoActions: a reader logged in sees no action
// buttons (stop, run again, edit, kind settings, worker stop, submit, the
// audit page) and the server refuses the actions anyway; an admin sees
// the audit log of the changes made.
//
// Not parallel: the browser's cookies are per host, whatever the port, so
// another test's login or logout at 127.0.0.1 would replace this one's.
func TestBrowserReaderSeesNoActions(t *testing.T) {
	const boot = "boot-token"
	s := newStack(t, stackOptions{authToken: boot})
	ctx := context.Background()
	var reader struct {
		Token string `json:"token"`
	}
	if err := s.client.Do(ctx, http.MethodPost, "/api/tokens", map[string]any{"name": "viewer", "role": "reader"}, &reader); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.SetKind(ctx, "email", rotaclient.KindSettings{}); err != nil {
		t.Fatal(err)
	}
	id := s.submit(t, rotaclient.TaskParams{Kind: "email", Payload: map[string]any{}, Delay: time.Hour})

	tb := newTab(t, s)
	tb.allow("401")
	tb.allow("403") // the refused pause below
	tb.do("log in as a reader", chromedp.Navigate(s.URL+"/login?next=/tasks/"+id),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), reader.Token), chromedp.Submit(chromedp.ID("token")))
	tb.wait("task page as a reader", fmt.Sprintf(`location.pathname === '/tasks/%s' && document.body.dataset.role === 'reader' && !!document.querySelector('#stop-button')`, id), 10*time.Second)
	hidden := func(sel string) string {
		return fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el.offsetParent === null; })()`, sel)
	}
	for _, sel := range []string{"#stop-button", "#run-again", "#edit-save", `a[href="/submit"]`, `a[href="/audit"]`} {
		tb.wait(sel+" hidden", hidden(sel), 5*time.Second)
	}
	if who := tb.text("#who"); who != "viewer (reader)" {
		t.Errorf("#who = %q", who)
	}
	tb.do("open /kinds", chromedp.Navigate(s.URL+"/kinds"))
	tb.wait("kinds page", `!!document.querySelector('#kinds-table')`, 10*time.Second)
	for _, sel := range []string{`button[data-toggle="email"]`, "#new-kind-form"} {
		tb.wait(sel+" hidden", hidden(sel), 5*time.Second)
	}
	// The server refuses anyway, with the cookie as credentials.
	status := eval[float64](tb, `fetch('/api/kinds/email/pause', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`)
	if status != 403 {
		t.Errorf("a reader's pause: %v, want 403", status)
	}
	// No bulk action for a reader: neither the bar nor the server.
	tb.do("open /tasks", chromedp.Navigate(s.URL+"/tasks"))
	tb.wait("tasks page", `!!document.querySelector('#tasks-table')`, 10*time.Second)
	for _, sel := range []string{"#bulk-bar", "#select-page"} {
		tb.wait(sel+" hidden", hidden(sel), 5*time.Second)
	}
	status = eval[float64](tb, `fetch('/api/tasks/bulk', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"action":"stop","filter":{}}'}).then(r => r.status)`)
	if status != 403 {
		t.Errorf("a reader's bulk stop: %v, want 403", status)
	}

	// An admin sees the audit log (the kind created above by the bootstrap
	// token is its first record).
	tb.do("log out", chromedp.Click(chromedp.CSS(".logout button")))
	tb.wait("on the login page", `location.pathname === '/login' && !!document.querySelector('#token')`, 10*time.Second)
	tb.do("log in as admin", chromedp.SetValue(chromedp.ID("token"), boot), chromedp.Submit(chromedp.ID("token")))
	tb.wait("logged in", `location.pathname === '/' && document.body.dataset.role === 'admin'`, 10*time.Second)
	tb.open("/audit", "#audit-table")
	tb.wait("kind.update listed", `[...document.querySelectorAll('#audit-table td')].some(td => td.textContent === 'kind.update')`, 5*time.Second)
	tb.wait("token.create listed", `[...document.querySelectorAll('#audit-table td')].some(td => td.textContent === 'token.create')`, 5*time.Second)
	tb.noConsoleErrors("roles")
	tb.do("log out", chromedp.Click(chromedp.CSS(".logout button"))) // leave no cookie to other tests
	tb.wait("logged out", `location.pathname === '/login'`, 10*time.Second)
}
