package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// BenchmarkStore runs the conformance suite's hot-path benchmarks.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, open)
}

// BenchmarkClaimDeepQueue measures single-task claims from a queue of
// 1,000 and of 1,000,000 waiting tasks (priorities mixed, all due): the rate
// must not depend on the depth, since a claim reads only the head of an
// index range. Tasks are bulk-loaded with INSERT ... SELECT generate_series
// (depth + b.N of them, so the queue never gets shallower than depth), then
// VACUUM ANALYZE and CHECKPOINT. The benchmark logs (and, with
// ROTA_EXPLAIN_DIR set, writes to that folder) EXPLAIN (ANALYZE, BUFFERS) of the
// claim's candidate query after the claims, with the custom plan (what the
// first executions use) and the generic plan (what a prepared statement may
// switch to).
func BenchmarkClaimDeepQueue(b *testing.B) {
	for _, depth := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			schema := newSchema(b)
			st := openSchema(b, schema, "bench")
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, testURL())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
			tasks := pgx.Identifier{schema, "tasks"}.Sanitize()
			if _, err := conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "kinds"}.Sanitize()+` (name) VALUES ('deep')`); err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO `+tasks+` (id, kind, level, payload, status, max_retries, workers,
					timeout_s, hb_timeout_s, created_at, run_at, updated_at)
				SELECT lpad(to_hex(i), 32, '0'), 'deep', i % 3, '{"n":1}', 'SCHEDULED', 3, 1, 0, 30, $1 + i, $1 + i, $1 + i
				FROM generate_series(1, $2::bigint) AS i`, base, depth+b.N); err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `VACUUM ANALYZE `+tasks); err != nil {
				b.Fatal(err)
			}
			// Write the load out now rather than in a checkpoint during the
			// timed claims (needs superuser or pg_checkpoint; best effort).
			if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
				b.Logf("CHECKPOINT: %v (the load's pages may be written during the claims)", err)
			}
			now := time.UnixMilli(base + int64(depth+b.N) + 1).UTC()
			var runIDs rota.IDGenerator
			p := store.TaskClaimParams{WorkerID: "w1", WorkerAddress: "w1:7070", Kinds: []string{"deep"}, Max: 1, Now: now,
				NewRunID: func() string { return runIDs.New(now) }}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				res, err := st.TaskClaim(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Runs) != 1 {
					b.Fatalf("claim got %d runs, want 1", len(res.Runs))
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
			b.StopTimer()
			if b.N >= 100 {
				plans := explainClaim(b, conn, schema, now.UnixMilli()) + explainHot(b, conn, schema, now.UnixMilli())
				b.Logf("depth %d after %d claims:\n%s", depth, b.N, plans)
				// The log above may be cut short; ROTA_EXPLAIN_DIR keeps
				// the whole plans in a file.
				if dir := os.Getenv("ROTA_EXPLAIN_DIR"); dir != "" {
					name := filepath.Join(dir, fmt.Sprintf("claim-explain-depth-%d.txt", depth))
					if err := os.WriteFile(name, []byte(plans), 0o644); err != nil {
						b.Error(err)
					}
				}
			}
		})
	}
}

// explainClaim returns EXPLAIN (ANALYZE, BUFFERS) of the candidate query
// for one task (factor 2, round position 0), custom and generic plans, in
// a transaction that is rolled back.
func explainClaim(b *testing.B, conn *pgx.Conn, schema string, now int64) string {
	b.Helper()
	ctx := context.Background()
	var out strings.Builder
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	// Each plan runs twice and the second is logged: the first pays the
	// session's one-time costs (catalog caches, compiling round_slot).
	plan := func(title, sql string, args ...any) {
		if rows, err := tx.Query(ctx, sql, args...); err != nil {
			b.Fatal(err)
		} else {
			rows.Close()
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			b.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&out, "-- %s\n%s\n", title, strings.Join(lines, "\n"))
	}
	plan("custom plan", `EXPLAIN (ANALYZE, BUFFERS) `+pgstore.CandidatesSQL, "deep", now, "w1", 1)
	if _, err := tx.Exec(ctx, `PREPARE rota_candidates (text, bigint, text, bigint) AS `+pgstore.CandidatesSQL); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
		b.Fatal(err)
	}
	plan("generic plan", fmt.Sprintf(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE rota_candidates ('deep', %d, 'w1', 1)`, now))
	if _, err := tx.Exec(ctx, `DEALLOCATE rota_candidates`); err != nil {
		b.Fatal(err)
	}
	return out.String()
}

// explainHot returns EXPLAIN (ANALYZE, BUFFERS) of the other hot
// statements, generic plans (as the store runs them), in a transaction
// that is rolled back: the claim's write (the next waiting task), the
// heartbeat's lock, read and write and the report's write (a running
// run of the benchmark's claims), and the reaper's search (every running
// run expired).
func explainHot(b *testing.B, conn *pgx.Conn, schema string, now int64) string {
	b.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	exec := func(sql string, args ...any) {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`SET LOCAL search_path TO ` + pgx.Identifier{schema}.Sanitize())
	exec(`SET LOCAL plan_cache_mode = force_generic_plan`)
	var next, task, run string
	if err := tx.QueryRow(ctx, `SELECT (SELECT id FROM tasks WHERE avail ORDER BY run_at LIMIT 1),
		id, run_id FROM tasks WHERE run_status = 'RUNNING' LIMIT 1`).Scan(&next, &task, &run); err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	plan := func(title, sql, args string) {
		exec(`PREPARE rota_hot AS ` + sql)
		if args != "" {
			args = " (" + args + ")"
		}
		rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) EXECUTE rota_hot`+args)
		if err != nil {
			b.Fatalf("%s: %v", title, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&out, "-- %s\n%s\n", title, strings.Join(lines, "\n"))
		exec(`DEALLOCATE rota_hot`)
	}
	q := func(s string) string { return "'" + s + "'" }
	plan("claim: start the runs (one task)", pgstore.StartRunsSQL, fmt.Sprintf(
		`'{%s}', '{%s}', '{1}', '{%d}', '{0}', %d, 'w1:7070', 'deep', 'w1', 0, 1`, next, "ffff"+next[4:], now+30000, now))
	plan("heartbeat/report: lock the run's task", pgstore.LockRunTaskSQL, q(run))
	plan("heartbeat/report of a run in run_log (multi-worker, or older than the lean store): read it", pgstore.RunLogSQL, q(run))
	plan("heartbeat: extend the lease (HOT)", pgstore.HeartbeatRowSQL, fmt.Sprintf(`%d, '', %s`, now+30000, q(task)))
	plan("complete: settle task and run", pgstore.SettleTaskSQL, fmt.Sprintf(
		`'SUCCESS', false, 0, 1, 0, %d, %d, '', NULL, %d, %s, false, 'w1', true, 'SUCCESS', %d, ''`, now, now, now, q(task), now))
	plan("reaper: find and lock expired runs' tasks", pgstore.ExpiredTasksSQL, fmt.Sprintf(`%d, 1000`, now+3_600_000))
	plan("reaper: next expiry", `SELECT min(expires_at) FROM runs WHERE status = 'RUNNING'`, "")
	return out.String()
}
