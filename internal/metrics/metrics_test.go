package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/metrics"
)

func TestNewPreinitialisesAndCounts(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rota.Statuses() {
		if got := testutil.ToFloat64(m.RunsTotal.WithLabelValues(string(s))); got != 0 {
			t.Fatalf("rota_runs_total{status=%s} = %v, want 0", s, got)
		}
	}
	m.Run(rota.StatusSkipped)
	m.Skip(rota.SkipOverlap)
	m.Skip(rota.SkipQueueFull)
	m.Retry()
	m.TimedOut()
	m.Misfires(3)
	m.Lateness(5 * time.Millisecond)
	want := `
# HELP rota_misfire_dropped_total Missed schedule fire times dropped by misfire_policy or the catch-up cap.
# TYPE rota_misfire_dropped_total counter
rota_misfire_dropped_total 3
# HELP rota_task_overlap_skipped_total Schedule fires skipped because the previous run was unfinished (overlap_action SKIP).
# TYPE rota_task_overlap_skipped_total counter
rota_task_overlap_skipped_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rota_misfire_dropped_total", "rota_task_overlap_skipped_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 8+6 {
		t.Fatalf("series = %d (%v), want 14 (8 statuses + 6 metrics)", n, err)
	}
	// A second registry is independent: no global state.
	if _, err := metrics.New(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg); err == nil {
		t.Fatal("registering twice on one registry must fail")
	}
	var nilM *metrics.Metrics
	nilM.Run(rota.StatusSuccess) // must not panic
}
