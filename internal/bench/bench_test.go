package bench

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/server"
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
		if len(r.Runs) != 1 || r.Runs[0] <= 0 && !strings.Contains(r.Metric, "p50") && !strings.Contains(r.Metric, "per task") {
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
	costs := costRows(rows)
	if v, ok := costs["submit/single requests: HTTP requests per task"]; !ok || v != 1 {
		t.Errorf("single requests: HTTP requests per task = %v (%v), want 1", v, ok)
	}
	claims, reports := costs["e2e/submit, claim, complete: HTTP requests: claims per task"], costs["e2e/submit, claim, complete: HTTP requests: reports per task"]
	if claims <= 0 || claims > 1 || reports <= 0 || reports > 1 {
		t.Errorf("e2e: claims %v, reports %v per task, want in (0, 1]", claims, reports)
	}
	for _, m := range []string{"e2e/submit, claim, complete: store statements per task",
		"e2e/submit, claim, complete: store commits (= WAL fsyncs) per task",
		"e2e/submit, claim, complete: process CPU (server + load) per task"} {
		if costs[m] <= 0 {
			t.Errorf("%s = %v, want > 0 (rows: %v)", m, costs[m], costs)
		}
	}
	if _, err := os.Stat("/proc/self/status"); err == nil {
		for _, r := range rows {
			if r.Scenario == "e2e" && strings.Contains(r.Metric, "peak RSS") {
				if v := r.Median(); v < 1 || v > 4096 {
					t.Errorf("%s = %v MiB", r.Metric, v)
				}
				return
			}
		}
		t.Errorf("no peak RSS row for e2e:\n%s", out.String())
	}
}

// TestRunCostOnPostgreSQL runs the submit scenario on an in-process
// server with a PostgreSQL store: each task inserted is one row version.
func TestRunCostOnPostgreSQL(t *testing.T) {
	t.Parallel()
	url := os.Getenv("ROTA_TEST_POSTGRES")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	var out bytes.Buffer
	rows, err := Run(t.Context(), Config{Store: url, Scenarios: []string{"submit"},
		Runs: 1, Clients: 4, SubmitTasks: 200, Out: &out})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	costs := costRows(rows)
	for _, what := range []string{"single requests", "batches of 100"} {
		// One task row each. The events go to the event log in chunks, one
		// row per append of whatever was published in the last 20 ms (one
		// to a few tasks' events with single requests, a batch's with
		// batches). Rows written beside the tasks are few and not per task:
		// the kind's row on the first insert, the node's membership
		// heartbeat and the leader's lease renewal (each about once a
		// second, so more of them on a slow, loaded machine). A second row
		// version per task of its own would be over 2.
		if v := costs["submit/"+what+": row versions per task"]; v < 1 || v > 2 {
			t.Errorf("%s: row versions per task = %v, want 1 (+ the event log's chunks and the kind's row)\n%s", what, v, out.String())
		}
		if v := costs["submit/"+what+": store commits per task"]; v <= 0 || v > 1 {
			t.Errorf("%s: commits per task = %v, want in (0, 1]\n%s", what, v, out.String())
		}
	}
}

// costRows maps "scenario/metric" to the value of the rows of costs.
func costRows(rows []Row) map[string]float64 {
	out := map[string]float64{}
	for _, r := range rows {
		if strings.Contains(r.Metric, "per task") {
			out[r.Scenario+"/"+r.Metric] = r.Median()
		}
	}
	return out
}

// TestRunRemoteServerCost measures a server in its own process (--server):
// its CPU per 1,000 tasks and its peak RSS come from its /metrics.
func TestRunRemoteServerCost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, err := server.New(ctx, server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Relaxed: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.WithoutCancel(ctx)) })
	var out bytes.Buffer
	rows, err := Run(ctx, Config{Server: "http://" + srv.Addr(), Scenarios: []string{"e2e"}, Runs: 1,
		E2ETasks: 300, Concurrency: 16, Out: &out})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	got := map[string]float64{}
	for _, r := range rows {
		got[r.Metric] = r.Median()
	}
	if v := got["submit, claim, complete: server CPU per 1,000 tasks"]; v <= 0 {
		t.Errorf("server CPU per 1,000 tasks = %v\n%s", v, out.String())
	}
	if v := got["submit, claim, complete: server peak RSS (sampled every 100 ms)"]; v < 1 || v > 4096 {
		t.Errorf("server peak RSS = %v MiB\n%s", v, out.String())
	}
}

func TestParseProcessMetrics(t *testing.T) {
	t.Parallel()
	body := "# HELP process_cpu_seconds_total x\nprocess_cpu_seconds_total 12.5\nprocess_resident_memory_bytes 4.2e+07\ngo_goroutines 9\n"
	cpu, rss, ok := parseProcessMetrics(strings.NewReader(body))
	if !ok || cpu != 12.5 || rss != 4.2e7 {
		t.Errorf("parse = %v, %v, %v", cpu, rss, ok)
	}
	if _, _, ok := parseProcessMetrics(strings.NewReader("go_goroutines 9\n")); ok {
		t.Error("parse of a body without the process metrics: ok")
	}
}
