package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store/pgstore"
)

// TestClaimableProbeReadsReadyIndex pins the plan of the claim's "is there
// work" probe (claimableSQL: run by every claim, an empty one included):
// each of its branches must read tasks_ready, the partial index of
// claimable tasks, whatever the statistics. Without an ORDER BY, a generic
// plan made while the table was small read the kind's every task through
// an index led by kind (tasks_kind_id) to find none claimable: in
// BenchmarkPostgresCPUPerTask that was a third of the claim's PostgreSQL
// CPU, growing with the finished tasks kept.
func TestClaimableProbeReadsReadyIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	st, err := pgstore.New(ctx, pgstore.Config{URL: testURL(), Schema: schema, NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()+`; SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `PREPARE probe (text, text, bigint) AS `+pgstore.ClaimableSQL); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		var plan []map[string]any
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE probe ('k', 'w1', 9999999999999)`).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		scans := tasksScans(plan[0]["Plan"].(map[string]any), nil)
		if len(scans) != 6 {
			t.Fatalf("%s: %d scans of tasks in the probe's plan, want 6 (levels × pinned): %v", when, len(scans), scans)
		}
		for _, s := range scans {
			if s != "tasks_ready" {
				out, _ := json.Marshal(plan)
				t.Errorf("%s: the probe reads tasks by %q, want tasks_ready; plan: %s", when, s, out)
				return
			}
		}
	}
	check("empty table")
	// States of a kind's tasks as the claim sees them in the first
	// seconds of a busy installation: each analyzed, as the store's
	// analyzer does (analyze.go), then the probe planned again.
	for _, st := range []struct{ rows, avail int }{{100, 100}, {500, 250}, {1000, 500}, {1000, 0}, {5000, 500}, {20000, 0}, {20000, 20000}} {
		if _, err := conn.Exec(ctx, `TRUNCATE tasks CASCADE`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO tasks (id, kind, level, status, avail, max_retries, workers, timeout_s, hb_timeout_s,
			end_time, created_at, run_at, updated_at)
		SELECT lpad(to_hex(i), 32, '0'), 'k', 1, CASE WHEN i <= $2 THEN 'SCHEDULED' ELSE 'SUCCESS' END, i <= $2, 0, 1, 0, 30, i, i, i, i
		FROM generate_series(1, $1::int) AS i`, st.rows, st.avail); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `ANALYZE tasks`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `DEALLOCATE probe; PREPARE probe (text, text, bigint) AS `+pgstore.ClaimableSQL); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("%d tasks, %d claimable", st.rows, st.avail))
	}
}

// tasksScans returns the index (or "seq") each node of plan that reads the
// tasks table uses, appended to out.
func tasksScans(plan map[string]any, out []string) []string {
	if plan["Relation Name"] == "tasks" {
		if idx, ok := plan["Index Name"].(string); ok {
			out = append(out, idx)
		} else {
			out = append(out, fmt.Sprint(plan["Node Type"]))
		}
	}
	if subs, ok := plan["Plans"].([]any); ok {
		for _, sub := range subs {
			out = tasksScans(sub.(map[string]any), out)
		}
	}
	return out
}
