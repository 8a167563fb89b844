package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestMedianAndPercentiles(t *testing.T) {
	t.Parallel()
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Fatalf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("median even = %v", got)
	}
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := pct(ds, 0.5); p != 50*time.Millisecond {
		t.Fatalf("p50 = %v", p)
	}
	if p := pct(ds, 0.99); p != 99*time.Millisecond {
		t.Fatalf("p99 = %v", p)
	}
}

// TestRunSmall runs every scenario once at a tiny scale against an
// in-process server: the tool works end to end and prints its table.
func TestRunSmall(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	rows, err := Run(context.Background(), Config{
		Runs: 1, Clients: 4, SubmitTasks: 200, E2ETasks: 500, Concurrency: 16,
		Rate: 100, LatencyFor: time.Second, Delayed: 50, DelayedOver: time.Second, Out: &out,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	want := map[string]bool{"submit": false, "e2e": false, "latency": false, "delayed": false}
	for _, r := range rows {
		want[r.Scenario] = true
		if len(r.Runs) != 1 || r.Runs[0] <= 0 && !strings.Contains(r.Metric, "p50") {
			t.Errorf("row %+v has no measurement", r)
		}
	}
	for s, seen := range want {
		if !seen {
			t.Errorf("no row for scenario %s", s)
		}
	}
	if !strings.Contains(out.String(), "| scenario") {
		t.Fatalf("no table printed:\n%s", out.String())
	}
}
