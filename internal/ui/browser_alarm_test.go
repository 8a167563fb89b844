package ui_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rotahq/rota/rotaapi"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// metricLine returns the line of rota_kind_no_worker{kind="kind"} on the
// stack's /metrics, or "".
func metricLine(t *testing.T, s *stack, kind string) string {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, `rota_kind_no_worker{kind="`+kind+`"}`) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestBrowserNoWorkerBanner: a task of a kind no worker serves raises the
// no-worker banner once --no-worker-after passed (here 500 ms), with the
// gauge at 1; a worker of the kind appearing clears both, live.
func TestBrowserNoWorkerBanner(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{noWorkerAfter: 500 * time.Millisecond, noWorkerInterval: 100 * time.Millisecond})
	tb := newTab(t, s)
	tb.open("/", "#overview .stats")
	tb.wait("live", `document.querySelector('#live').dataset.state === 'live'`, 10*time.Second)
	if !eval[bool](tb, `document.querySelector('#alarms').hidden`) {
		t.Fatal("the banner shows with nothing waiting")
	}

	s.submit(t, rotaclient.TaskParams{Kind: "orphan", Payload: map[string]any{"n": 1}})
	start := time.Now()
	tb.wait("banner shown", `!document.querySelector('#alarms').hidden && !!document.querySelector('#alarms .alarm[data-kind="orphan"]')`, liveDeadline)
	t.Logf("banner shown %v after the submit", time.Since(start))
	if txt := tb.text(`#alarms .alarm[data-kind="orphan"]`); !strings.Contains(txt, "orphan") || !strings.Contains(txt, "No worker") {
		t.Fatalf("banner text %q", txt)
	}
	if got := metricLine(t, s, "orphan"); got != `rota_kind_no_worker{kind="orphan"} 1` {
		t.Fatalf("metric while in alarm: %q", got)
	}
	var kind rotaapi.Kind
	if err := s.client.Do(context.Background(), http.MethodGet, "/api/kinds/orphan", nil, &kind); err != nil || kind.NoWorkerSince == 0 {
		t.Fatalf("GET /api/kinds/orphan while in alarm: %+v, %v; want no_worker_since", kind, err)
	}
	// The banner follows to another page.
	tb.do("open the tasks page", chromedp.Click(chromedp.CSS(`.nav a[href="/tasks"]`)), chromedp.WaitVisible(chromedp.CSS("#tasks-table")))
	tb.wait("banner still shown", `!!document.querySelector('#alarms .alarm[data-kind="orphan"]')`, liveDeadline)

	startWorker(t, s, "rescuer", map[string]rotaworker.HandlerFunc{"orphan": succeed(0)})
	start = time.Now()
	tb.wait("banner cleared", `document.querySelector('#alarms').hidden && !document.querySelector('#alarms .alarm')`, liveDeadline)
	t.Logf("banner cleared %v after the worker started", time.Since(start))
	if got := metricLine(t, s, "orphan"); got != `rota_kind_no_worker{kind="orphan"} 0` {
		t.Fatalf("metric after the worker came: %q", got)
	}
	tb.noConsoleErrors("no-worker banner")
}
