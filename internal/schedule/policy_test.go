package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rotahq/rota"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func secAt(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// run builds a run view: status letter S(cheduled) R(unning) H(eld)
// s(uccess) F(ailed) T(imeout) C(anceled) K (skipped, failure).
func run(id string, status byte, attempt int) rota.ScheduleRun {
	r := rota.ScheduleRun{TaskID: id, Attempt: attempt}
	switch status {
	case 'S':
		r.Status = rota.StatusScheduled
	case 'H':
		r.Status, r.Held = rota.StatusScheduled, true
	case 'R':
		r.Status = rota.StatusRunning
	case 's':
		r.Status = rota.StatusSuccess
	case 'F':
		r.Status = rota.StatusFailed
	case 'T':
		r.Status = rota.StatusTimeout
	case 'C':
		r.Status = rota.StatusCanceled
	case 'K':
		r.Status, r.Reason = rota.StatusSkipped, rota.SkipFailure
	}
	return r
}

// render summarises a decision: "rel:… | v1 v2 … | cancel:…" where each
// verdict is run#attempt, hold#attempt or skip(reason).
func render(d decision) string {
	var vs []string
	for _, v := range d.verdicts {
		switch v.kind {
		case verdictRun:
			vs = append(vs, fmt.Sprintf("run#%d", v.attempt))
		case verdictHold:
			vs = append(vs, fmt.Sprintf("hold#%d", v.attempt))
		case verdictSkip:
			vs = append(vs, "skip("+string(v.reason)+")")
		}
	}
	return fmt.Sprintf("rel:%s | %s | cancel:%s", strings.Join(d.release, ","), strings.Join(vs, " "), strings.Join(d.cancel, ","))
}

func TestDecide(t *testing.T) {
	t.Parallel()
	pol := func(max int, conc rota.ConcurrencyPolicy, ov rota.OverlapAction, fa rota.FailureAction) policy {
		return policy{maxConcurrency: max, concurrency: conc, overlap: ov, failure: fa, maxQueued: 2}
	}
	const (
		skipC = rota.ConcurrencySkip
		queue = rota.ConcurrencyQueue
	)
	tests := []struct {
		name  string
		p     policy
		open  []rota.ScheduleRun
		last  *rota.ScheduleRun
		fires int
		want  string
	}{
		{"first fire runs", pol(1, skipC, rota.OverlapAllow, rota.FailureRunNew), nil, nil, 1, "rel: | run#1 | cancel:"},
		{"previous succeeded", pol(1, skipC, rota.OverlapAllow, rota.FailureRetry), nil, ptr(run("a", 's', 3)), 1, "rel: | run#1 | cancel:"},

		// Overlap (the previous run is unfinished: SCHEDULED or RUNNING).
		{"overlap ALLOW hits the limit: SKIP", pol(1, skipC, rota.OverlapAllow, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 1, "rel: | skip(concurrency) | cancel:"},
		{"overlap ALLOW under the limit runs", pol(2, skipC, rota.OverlapAllow, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 2, "rel: | run#1 skip(concurrency) | cancel:"},
		{"overlap SKIP", pol(5, skipC, rota.OverlapSkip, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 2, "rel: | skip(overlap) skip(overlap) | cancel:"},
		{"overlap SKIP counts a run waiting for a worker", pol(5, skipC, rota.OverlapSkip, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'S', 1)}, ptr(run("a", 'S', 1)), 1, "rel: | skip(overlap) | cancel:"},
		{"overlap SKIP ignores a run being stopped", pol(5, skipC, rota.OverlapSkip, rota.FailureRunNew), []rota.ScheduleRun{stopped(run("a", 'R', 1))}, ptr(stopped(run("a", 'R', 1))), 1, "rel: | run#1 | cancel:"},
		{"overlap CANCEL_PREV", pol(1, skipC, rota.OverlapCancelPrev, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 1, "rel: | run#1 | cancel:a"},
		{"CANCEL_PREV cancels every live run, held ones too", pol(1, queue, rota.OverlapCancelPrev, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1), run("b", 'H', 1)}, ptr(run("b", 'H', 1)), 1, "rel: | run#1 | cancel:a,b"},
		{"CANCEL_PREV on each catch-up fire", pol(1, skipC, rota.OverlapCancelPrev, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 3, "rel: | run#1 run#1 run#1 | cancel:a,n1,n2"},
		{"PARALLEL overrides the limit", pol(1, skipC, rota.OverlapParallel, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 2, "rel: | run#1 run#1 | cancel:"},
		{"PARALLEL overrides QUEUE too", pol(1, queue, rota.OverlapParallel, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 1, "rel: | run#1 | cancel:"},
		{"PARALLEL does not override without overlap", pol(1, skipC, rota.OverlapParallel, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("b", 's', 1)), 1, "rel: | skip(concurrency) | cancel:"},
		{"no overlap but the limit is taken: SKIP", pol(1, skipC, rota.OverlapCancelPrev, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("b", 'F', 1)), 1, "rel: | skip(concurrency) | cancel:"},

		// Failure actions (FAILED, TIMEOUT, CANCELED).
		{"failure RUN_NEW", pol(1, skipC, rota.OverlapAllow, rota.FailureRunNew), nil, ptr(run("a", 'F', 4)), 1, "rel: | run#1 | cancel:"},
		{"failure RETRY", pol(1, skipC, rota.OverlapAllow, rota.FailureRetry), nil, ptr(run("a", 'F', 4)), 1, "rel: | run#5 | cancel:"},
		{"timeout RETRY", pol(1, skipC, rota.OverlapAllow, rota.FailureRetry), nil, ptr(run("a", 'T', 1)), 1, "rel: | run#2 | cancel:"},
		{"canceled RETRY", pol(1, skipC, rota.OverlapAllow, rota.FailureRetry), nil, ptr(run("a", 'C', 2)), 1, "rel: | run#3 | cancel:"},
		{"failure SKIP once, then run", pol(1, skipC, rota.OverlapAllow, rota.FailureSkip), nil, ptr(run("a", 'F', 1)), 2, "rel: | skip(failure) run#1 | cancel:"},
		{"after a failure skip record", pol(1, skipC, rota.OverlapAllow, rota.FailureSkip), nil, ptr(run("k", 'K', 1)), 1, "rel: | run#1 | cancel:"},
		{"RETRY then the retry overlaps", pol(1, skipC, rota.OverlapAllow, rota.FailureRetry), nil, ptr(run("a", 'F', 1)), 2, "rel: | run#2 skip(concurrency) | cancel:"},
		{"RETRY under the limit with an older run", pol(1, skipC, rota.OverlapAllow, rota.FailureRetry), []rota.ScheduleRun{run("x", 'R', 1)}, ptr(run("a", 'F', 1)), 1, "rel: | skip(concurrency) | cancel:"},

		// QUEUE.
		{"QUEUE holds", pol(1, queue, rota.OverlapAllow, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 1, "rel: | hold#1 | cancel:"},
		{"QUEUE full", pol(1, queue, rota.OverlapAllow, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 4, "rel: | hold#1 hold#1 skip(queue_full) skip(queue_full) | cancel:"},
		{"QUEUE releases oldest first when a slot frees", pol(1, queue, rota.OverlapAllow, rota.FailureRunNew), []rota.ScheduleRun{run("b", 'H', 1), run("c", 'H', 1)}, ptr(run("c", 'H', 1)), 0, "rel:b |  | cancel:"},
		{"QUEUE releases, then the new fire waits", pol(1, queue, rota.OverlapAllow, rota.FailureRunNew), []rota.ScheduleRun{run("b", 'H', 1)}, ptr(run("b", 'H', 1)), 1, "rel:b | hold#1 | cancel:"},
		{"QUEUE keeps holding while full", pol(1, queue, rota.OverlapAllow, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1), run("b", 'H', 1)}, ptr(run("b", 'H', 1)), 0, "rel: |  | cancel:"},
		{"QUEUE overlap SKIP", pol(1, queue, rota.OverlapSkip, rota.FailureRunNew), []rota.ScheduleRun{run("a", 'R', 1)}, ptr(run("a", 'R', 1)), 1, "rel: | skip(overlap) | cancel:"},
		{"QUEUE with a failed previous and RETRY", pol(1, queue, rota.OverlapAllow, rota.FailureRetry), []rota.ScheduleRun{run("x", 'R', 1)}, ptr(run("a", 'F', 2)), 1, "rel: | hold#3 | cancel:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := 0
			newID := func() string { n++; return fmt.Sprintf("n%d", n) }
			var fires []time.Time
			for i := range tc.fires {
				fires = append(fires, secAt(5*(i+1)))
			}
			got := render(decide(tc.p, tc.open, tc.last, fires, newID))
			if got != tc.want {
				t.Fatalf("decide:\n got  %s\n want %s", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func stopped(r rota.ScheduleRun) rota.ScheduleRun { r.StopRequested = true; return r }

func TestSelectMisfires(t *testing.T) {
	t.Parallel()
	// Misfire example: last scan 10:00:00, scan at 10:00:05, every second.
	latest := []time.Time{secAt(1), secAt(2), secAt(3), secAt(4), secAt(5)}
	now := secAt(5).Add(300 * time.Millisecond)
	tests := []struct {
		pol     rota.MisfirePolicy
		limit   int
		earlier int64
		fire    []time.Time
		record  []time.Time
		dropped int64
	}{
		{rota.MisfireFireNow, 0, 0, latest, nil, 0},
		{rota.MisfireSkip, 0, 0, []time.Time{secAt(5)}, []time.Time{secAt(1), secAt(2), secAt(3), secAt(4)}, 4},
		{rota.MisfireCatchUpLimited, 2, 0, []time.Time{secAt(4), secAt(5)}, []time.Time{secAt(1), secAt(2), secAt(3)}, 3},
		{rota.MisfireCatchUpLimited, 0, 0, []time.Time{secAt(5)}, []time.Time{secAt(1), secAt(2), secAt(3), secAt(4)}, 4},
		// Beyond the cap (3 here) and the records cap (2): counted only.
		{rota.MisfireFireNow, 0, 1000, []time.Time{secAt(3), secAt(4), secAt(5)}, []time.Time{secAt(1), secAt(2)}, 1002},
	}
	for _, tc := range tests {
		sel := selectMisfires(tc.pol, tc.limit, latest, tc.earlier, now, time.Second, 3+2*boolToInt(tc.earlier == 0), 2+10*boolToInt(tc.earlier == 0))
		if d := cmp.Diff(tc.fire, sel.fire); d != "" {
			t.Errorf("%s/%d: fire (-want +got):\n%s", tc.pol, tc.limit, d)
		}
		if d := cmp.Diff(tc.record, sel.record, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s/%d: record (-want +got):\n%s", tc.pol, tc.limit, d)
		}
		if sel.dropped != tc.dropped {
			t.Errorf("%s/%d: dropped %d, want %d", tc.pol, tc.limit, sel.dropped, tc.dropped)
		}
	}
	// SKIP with nothing current fires nothing.
	if sel := selectMisfires(rota.MisfireSkip, 0, latest, 0, secAt(9), time.Second, 100, 100); len(sel.fire) != 0 || sel.dropped != 5 {
		t.Errorf("SKIP when every time is missed: %+v", sel)
	}
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
