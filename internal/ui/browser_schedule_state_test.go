package ui_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaclient"
)

// TestBrowserScheduleStateCircuitBackfill: a schedule's page shows its
// state (error with its message, then active after Resume), its circuit
// and failures in a row, its effective timeout, the jittered instants of
// its next fires, and its backfill form queues runs.
func TestBrowserScheduleStateCircuitBackfill(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	requireSchedulesAPI(t, s)
	ctx := context.Background()
	id, err := s.client.CreateSchedule(ctx, rotaclient.ScheduleParams{
		Name: "breaker", Kind: "report", CronExpr: "0 0 * * * *", FailureAction: rota.FailureHalfOpen,
		FailureThreshold: 2, CooldownSeconds: 600, MaxConcurrency: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The state the engine would have written: an open circuit, then an
	// error that takes the schedule out of the queue; jitter set.
	sc, err := s.store.ScheduleGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sc.ConsecutiveFailures, sc.Circuit, sc.NextAllowedAt = 2, rota.CircuitOpen, time.Now().Add(10*time.Minute).UTC()
	sc.ErrorMessage, sc.JitterSeconds = "the target address was refused", 1800
	if _, err := s.store.ScheduleUpdate(ctx, store.ScheduleUpdateParams{Schedule: *sc, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, s)
	dir := screenshotDir(t)
	tb.open("/schedules/"+id, "#schedule-state")
	if got := tb.text("#schedule-state"); got != "error" {
		t.Errorf("state badge %q, want error", got)
	}
	tb.wait("error box", `(document.querySelector('#schedule-error') || {textContent: ''}).textContent.includes('refused')`, 10*time.Second)
	if got := tb.text("#schedule-circuit .badge"); got != "open" {
		t.Errorf("circuit badge %q, want open", got)
	}
	if got := tb.text("#schedule-failures"); len(got) == 0 || got[0] != '2' {
		t.Errorf("failures in a row %q, want 2 …", got)
	}
	if got := tb.text("#schedule-timeout"); got != "none (the kind's default)" {
		t.Errorf("timeout %q", got)
	}
	tb.screenshot(dir, "schedule-error")
	tb.do("resume", chromedp.Click(chromedp.ID("resume-schedule")))
	tb.wait("active", `document.querySelector('#schedule-state').textContent === 'active' && !document.querySelector('#schedule-error')`, 10*time.Second)
	tb.wait("jittered next fires", `document.querySelectorAll('#next-fires li').length === 10 && document.querySelectorAll('#next-fires .jitter').length > 0`, 10*time.Second)

	to := time.Now().Truncate(time.Hour).Add(-time.Hour)
	from := to.Add(-3 * time.Hour)
	local := func(t time.Time) string { return t.Local().Format("2006-01-02T15:04:05") }
	tb.do("backfill",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('backfill-from').value = '`+local(from)+`';
			document.getElementById('backfill-to').value = '`+local(to)+`'`),
		chromedp.Click(chromedp.ID("backfill-submit")))
	tb.wait("backfill result", `(document.querySelector('#backfill-result') || {textContent: ''}).textContent.includes('3 fire time(s) queued')`, 10*time.Second)
	tb.wait("runs listed", `document.querySelectorAll('#schedule-runs tbody tr').length === 3`, 10*time.Second)
	tb.screenshot(dir, "schedule-backfill")

	tb.open("/schedules?state=active", "#schedules-table")
	if n := eval[int](tb, `document.querySelectorAll('#schedules-table tbody tr').length`); n != 1 {
		t.Errorf("%d active schedules listed, want 1", n)
	}
	tb.noConsoleErrors("schedule state page")
}
