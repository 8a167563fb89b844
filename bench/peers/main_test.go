package main

import "testing"

func TestExpandScenarios(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"submit":                     "submit-single,submit-batch",
		"submit-batch":               "submit-batch",
		"submit-single,e2e":          "submit-single,e2e",
		"e2e, submit ,latency":       "e2e,submit-single,submit-batch,latency",
		"submit-batch,submit-single": "submit-batch,submit-single",
	} {
		if got := expandScenarios(in); got != want {
			t.Errorf("expandScenarios(%q) = %q, want %q", in, got, want)
		}
	}
}
