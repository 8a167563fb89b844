package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
)

// TestClaimableProbeReadsReadyIndex pins the plan of the claim's "is there
// work" probe (claimableSQL: run by every claim, an empty one included):
// each of its branches must read tasks_ready, the partial index of
// claimable tasks (or, for pinned tasks, tasks_pinned_waiting), whatever
// the statistics. Without an ORDER BY, a generic
// plan made while the table was small read the kind's every task through
// an index led by kind (tasks_kind_id) to find none claimable: in
// BenchmarkPostgresCPUPerTask that was a third of the claim's PostgreSQL
// CPU, growing with the finished tasks kept.
func TestClaimableProbeReadsReadyIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn := planSchema(t)
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
			// tasks_pinned_waiting (the available pinned tasks) may serve
			// the pinned branches: it holds no finished task either.
			if s != "tasks_ready" && s != "tasks_pinned_waiting" {
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
		fillKind(t, conn, st.rows, st.avail)
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

// TestListPlansReadFewRows checks that lists by status read about the rows
// they return, not the table, with generic plans (the store's connections
// use them): 20,000 finished tasks and a few of each other state, and no
// index led by status or kind on the hot path (migration 0012). Each list
// must read (return plus filter out) at most a few rows more than the
// tasks it lists, and list exactly those.
func TestListPlansReadFewRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, conn := planSchema(t)
	// Ids are time-ordered: the old tasks are the few open and failed
	// ones, as with a backlog, so that the primary key read backwards
	// meets the finished ones first.
	if _, err := conn.Exec(ctx, `INSERT INTO tasks (id, kind, level, status, avail, max_retries, workers, timeout_s, hb_timeout_s,
			end_time, created_at, run_at, updated_at, run_id, run_worker, run_status, running)
		SELECT lpad(to_hex(i), 32, '0'), CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, 1,
			s.status, s.status = 'SCHEDULED', 0, 1, 0, 30, i, i, i, i,
			CASE WHEN s.status = 'RUNNING' THEN 'r' || i END, CASE WHEN s.status = 'RUNNING' THEN 'w1' ELSE '' END,
			CASE WHEN s.status = 'RUNNING' THEN 'RUNNING' ELSE '' END, CASE WHEN s.status = 'RUNNING' THEN 1 ELSE 0 END
		FROM generate_series(1, 20030) AS i
		CROSS JOIN LATERAL (SELECT CASE WHEN i <= 10 THEN 'SCHEDULED' WHEN i <= 20 THEN 'RUNNING'
			WHEN i <= 25 THEN 'FAILED' WHEN i <= 30 THEN 'CANCELED' ELSE 'SUCCESS' END AS status) AS s;
		ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    store.TaskListParams
		want int
	}{
		{"SCHEDULED", store.TaskListParams{Status: rota.StatusScheduled}, 10},
		{"RUNNING", store.TaskListParams{Status: rota.StatusRunning}, 10},
		{"FAILED", store.TaskListParams{Status: rota.StatusFailed}, 5},
		{"FAILED or CANCELED", store.TaskListParams{Statuses: []rota.Status{rota.StatusFailed, rota.StatusCanceled}}, 10},
		{"FAILED of kind a", store.TaskListParams{Status: rota.StatusFailed, Kind: "a"}, 2},
		{"RUNNING of kind b", store.TaskListParams{Status: rota.StatusRunning, Kind: "b"}, 5},
	} {
		q, args, _ := store.TaskListQueryHinted(c.p, func(n int) string { return fmt.Sprintf("$%d", n) }, pgstore.ListStatusHint)
		// EXPLAIN of a statement with parameters plans it for their
		// values; EXPLAIN EXECUTE of a prepared one uses its generic plan.
		lits := make([]string, len(args))
		for i, a := range args {
			switch a := a.(type) {
			case string:
				lits[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
			default:
				lits[i] = fmt.Sprint(a)
			}
		}
		var plan []map[string]any
		if _, err := conn.Exec(ctx, `PREPARE lq AS `+q); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE lq (`+strings.Join(lits, ", ")+`)`).Scan(&plan); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := conn.Exec(ctx, `DEALLOCATE lq`); err != nil {
			t.Fatal(err)
		}
		root := plan[0]["Plan"].(map[string]any)
		if got := int(root["Actual Rows"].(float64)); got != c.want {
			t.Errorf("%s: %d tasks listed, want %d", c.name, got, c.want)
		}
		if read := tasksRowsRead(root); read > c.want+25 {
			out, _ := json.Marshal(plan)
			t.Errorf("%s: the plan read %d rows of tasks to list %d; plan: %s", c.name, read, c.want, out)
		}
		res, err := st.TaskList(ctx, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tasks) != c.want {
			t.Errorf("%s: TaskList gave %d tasks, want %d", c.name, len(res.Tasks), c.want)
		}
	}
}

// tasksRowsRead sums the rows each node of plan reading the tasks table
// returned or filtered out (over all its loops).
func tasksRowsRead(plan map[string]any) int {
	n := 0
	if plan["Relation Name"] == "tasks" {
		loops, _ := plan["Actual Loops"].(float64)
		rows, _ := plan["Actual Rows"].(float64)
		removed, _ := plan["Rows Removed by Filter"].(float64)
		rechecked, _ := plan["Rows Removed by Index Recheck"].(float64)
		n += int((rows + removed + rechecked) * max(loops, 1))
	}
	if subs, ok := plan["Plans"].([]any); ok {
		for _, sub := range subs {
			n += tasksRowsRead(sub.(map[string]any))
		}
	}
	return n
}

// TestPinnedWaitingReadsPinnedOnly checks that the no-worker alarm's read
// of waiting pinned tasks (TaskPinnedWaiting) reads those, not every
// waiting task: 20,000 unpinned tasks wait beside 3 pinned ones.
func TestPinnedWaitingReadsPinnedOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, conn := planSchema(t)
	if _, err := conn.Exec(ctx, `
		INSERT INTO tasks (id, kind, level, status, avail, max_retries, workers, timeout_s, hb_timeout_s,
			created_at, run_at, updated_at, worker_ids)
		SELECT lpad(to_hex(i), 32, '0'), 'k', i % 3, 'SCHEDULED', true, 0, 1, 0, 30, i, i, i,
			CASE WHEN i <= 3 THEN ARRAY['w' || i] ELSE '{}' END
		FROM generate_series(1, 20003) AS i;
		ANALYZE tasks;
		PREPARE pw (bigint, int) AS `+pgstore.PinnedWaitingSQL); err != nil {
		t.Fatal(err)
	}
	var plan []map[string]any
	if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pw (100000, 100)`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	root := plan[0]["Plan"].(map[string]any)
	if read := tasksRowsRead(root); read > 10 {
		out, _ := json.Marshal(plan)
		t.Errorf("the read of waiting pinned tasks read %d rows of tasks for 3; plan: %s", read, out)
	}
	got, err := st.TaskPinnedWaiting(ctx, time.UnixMilli(100000))
	if err != nil || len(got) != 3 {
		t.Fatalf("TaskPinnedWaiting = %+v, %v; want 3 groups", got, err)
	}
}

// TestHandoffProbesReadReadyIndex checks the generic plan of the submit
// that starts its task's run for a sleeping claim (insertStartedSQL): its
// probes for unpinned tasks waiting at each level must read tasks_ready,
// whatever the statistics. Written as NOT EXISTS without an order, a plan
// made while the table held a hundred claimable tasks was a sequential
// scan, which reads every finished task once they pile up.
func TestHandoffProbesReadReadyIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn := planSchema(t)
	for _, c := range []struct{ rows, avail int }{{100, 100}, {1000, 500}, {20000, 0}} {
		fillKind(t, conn, c.rows, c.avail)
		if _, err := conn.Exec(ctx, `PREPARE hand AS `+pgstore.InsertStartedSQL); err != nil {
			t.Fatal(err)
		}
		var plan []map[string]any
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE hand ('t', 'k', 1, '{}', 0, 0, 30, 1, 1, '', 0, 'w1', '', 'r1', 99, 0, 1)`).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `DEALLOCATE hand`); err != nil {
			t.Fatal(err)
		}
		// The insert itself (ModifyTable), then one probe a level.
		scans := tasksScans(plan[0]["Plan"].(map[string]any), nil)
		if len(scans) != 4 || scans[0] != "ModifyTable" {
			t.Fatalf("%d tasks, %d claimable: scans of tasks %v, want the insert and 3 probes (one a level)", c.rows, c.avail, scans)
		}
		scans = scans[1:]
		for _, s := range scans {
			if s != "tasks_ready" {
				out, _ := json.Marshal(plan)
				t.Errorf("%d tasks, %d claimable: a probe reads tasks by %q, want tasks_ready; plan: %s", c.rows, c.avail, s, out)
				break
			}
		}
	}
}

// planSchema opens a store on a fresh schema (so it is migrated) and a
// connection to that schema planning as the store's connections do
// (generic plans), both closed when t ends.
func planSchema(t *testing.T) (*pgstore.Store, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	schema := newSchema(t)
	st, err := pgstore.New(ctx, pgstore.Config{URL: testURL(), Schema: schema, NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()+`; SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	return st, conn
}

// fillKind replaces the tasks with rows tasks of kind k at level mid, the
// first avail of them claimable (SCHEDULED), the others finished
// (SUCCESS), then analyzes the table as the store's analyzer would.
func fillKind(t *testing.T, conn *pgx.Conn, rows, avail int) {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `TRUNCATE tasks CASCADE`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO tasks (id, kind, level, status, avail, max_retries, workers, timeout_s, hb_timeout_s,
			end_time, created_at, run_at, updated_at)
		SELECT lpad(to_hex(i), 32, '0'), 'k', 1, CASE WHEN i <= $2 THEN 'SCHEDULED' ELSE 'SUCCESS' END, i <= $2, 0, 1, 0, 30, i, i, i, i
		FROM generate_series(1, $1::int) AS i`, rows, avail); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
}
