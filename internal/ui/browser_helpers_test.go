package ui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's chromium through chromedp: one browser
// for the package, one tab per test (tests run in parallel). The browser is
// $ROTA_CHROMIUM, default /usr/bin/chromium; when it is missing the tests
// fail with the command that installs it.

const installHint = "apt-get update && apt-get install -y chromium (or set ROTA_CHROMIUM to a Chromium binary)"

// browser is the package's shared Chromium, started by the first test that
// needs it and stopped by TestMain.
var browser struct {
	once   sync.Once
	ctx    context.Context // a chromedp context whose browser has started
	cancel func()
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	os.Exit(code)
}

func browserContext(t *testing.T) context.Context {
	t.Helper()
	browser.once.Do(func() {
		path := os.Getenv("ROTA_CHROMIUM")
		if path == "" {
			path = "/usr/bin/chromium"
		}
		if _, err := os.Stat(path); err != nil {
			browser.err = fmt.Errorf("no Chromium at %s: %w", path, err)
			return
		}
		dir, err := os.MkdirTemp("", "rota-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 900),
		)
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil {
			bcancel()
			acancel()
			os.RemoveAll(dir)
			browser.err = fmt.Errorf("start %s: %w", path, err)
			return
		}
		browser.ctx = bctx
		browser.cancel = func() {
			bcancel()
			acancel()
			os.RemoveAll(dir)
		}
	})
	if browser.err != nil {
		t.Fatalf("the browser tests need Chromium: %v\ninstall it: %s", browser.err, installHint)
	}
	return browser.ctx
}

// tab is one browser tab on a stack, recording console errors.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string // console errors and uncaught exceptions
	allowed  []string // substrings of console errors a test expects
}

// newTab opens a tab (desktop size, light theme) for s.
func newTab(t *testing.T, s *stack) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserContext(t))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	tb := &tab{t: t, ctx: ctx, base: s.URL}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				tb.mu.Lock()
				tb.problems = append(tb.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				tb.mu.Unlock()
			}
		}
	}()
	return tb
}

// do runs actions with a time limit. Pages re-render on live updates, so
// a node found by a selector may be replaced before an action reaches it;
// the browser then refuses the action (nothing happened) and do runs the
// actions again against the new page, a few times at most.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	var err error
	for range 5 {
		if err = chromedp.Do(ctx, actions...); err == nil || !nodeReplaced(err) {
			break
		}
	}
	if err != nil {
		tb.t.Fatalf("%s: %v\n(console: %v)", what, err, tb.consoleProblems())
	}
}

// nodeReplaced reports whether err says that a node the actions held was
// gone: a live update re-rendered it between the query and the action
// (DevTools words it two ways), so nothing happened and the actions may
// run again.
func nodeReplaced(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not find node with given id") || strings.Contains(msg, "No node with given id found")
}

// open loads path and waits until the page shows ready (a CSS selector).
func (tb *tab) open(path, ready string) {
	tb.t.Helper()
	tb.do("open "+path, chromedp.Navigate(tb.base+path), chromedp.WaitVisible(chromedp.CSS(ready)))
}

// wait waits until a JavaScript expression is truthy; a navigation while
// it waits is no failure (it evaluates again in the new document).
func (tb *tab) wait(what, expr string, within time.Duration) {
	tb.t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := time.Until(deadline)
		ctx, cancel := context.WithTimeout(tb.ctx, max(left, 0)+5*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr,
			chromedp.WithPollingTimeout(max(left, time.Millisecond)), chromedp.WithPollingInterval(10*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().Before(deadline) { // e.g. the document changed under the poll
			time.Sleep(20 * time.Millisecond)
			continue
		}
		body, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.querySelector('main') ? document.querySelector('main').innerText.slice(0, 2000) : ''`))
		tb.t.Fatalf("%s: not within %v: %v\npage text:\n%s\nconsole: %v", what, within, err, body, tb.consoleProblems())
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// text returns the text of the first element matching a CSS selector.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel))
}

// allow makes console errors containing s expected.
func (tb *tab) allow(s string) {
	tb.mu.Lock()
	tb.allowed = append(tb.allowed, s)
	tb.mu.Unlock()
}

func (tb *tab) consoleProblems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, p := range tb.problems {
		ok := false
		for _, a := range tb.allowed {
			ok = ok || strings.Contains(p, a)
		}
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// noConsoleErrors fails the test on any console error or exception so far.
func (tb *tab) noConsoleErrors(where string) {
	tb.t.Helper()
	time.Sleep(50 * time.Millisecond) // let late console events arrive
	if p := tb.consoleProblems(); len(p) > 0 {
		tb.t.Errorf("%s: console errors:\n  %s", where, strings.Join(p, "\n  "))
	}
}

// screenshotDir is $ROTA_SCREENSHOTS, or a temporary folder of the test.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ROTA_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the whole page as dir/name.png.
func (tb *tab) screenshot(dir, name string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	return path
}

// viewport resizes the tab; mobile emulates a phone.
func (tb *tab) viewport(w, h int64, mobile bool) {
	tb.t.Helper()
	if mobile {
		tb.do("phone viewport", chromedp.EmulateViewport(w, h, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
		return
	}
	tb.do("viewport", chromedp.EmulateViewport(w, h))
}

// colorScheme emulates the system's light or dark preference.
func (tb *tab) colorScheme(scheme string) {
	tb.t.Helper()
	tb.do("emulate "+scheme, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return chromedp.Void{}, err
	})
}
