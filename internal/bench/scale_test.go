package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestScaleSmall runs the scale scenario at two tiny depths, the larger
// one below the tasks claimed (so the feeder must keep the queue fed for
// the scenario to end): each depth gets its fill rate, its claim rate and
// the cost rows of its claims.
func TestScaleSmall(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	rows, err := Run(context.Background(), Config{
		Runs: 1, Scenarios: []string{"scale"}, ScaleWaiting: []int{20, 300}, ScaleTasks: 400,
		Concurrency: 16, Out: &out,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	want := map[string]bool{
		"scale, 20 waiting/fill: batches of 1000, 8 clients":                                     false,
		"scale, 300 waiting/fill: batches of 1000, 8 clients":                                    false,
		"scale, 20 waiting/claim + complete through the SDK worker (400 tasks, concurrency 16)":  false,
		"scale, 300 waiting/claim + complete through the SDK worker (400 tasks, concurrency 16)": false,
	}
	for _, r := range rows {
		k := r.Scenario + "/" + r.Metric
		if _, ok := want[k]; ok {
			want[k] = true
			if r.Median() <= 0 {
				t.Errorf("%s = %v, want > 0", k, r.Median())
			}
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no row %q in:\n%s", k, out.String())
		}
	}
	if !strings.Contains(out.String(), "claim + complete: store statements per task") {
		t.Errorf("no cost rows for the claims:\n%s", out.String())
	}
}
