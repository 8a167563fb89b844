package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Warm connections (Config.WarmConns).
//
// PostgreSQL plans a statement on a connection the first time it runs
// there, and again after an ANALYZE of a table it reads (the analyzer's,
// analyze.go, or autovacuum's). The hot statements are long (the claim's
// and the hand-off's are a few hundred lines with their CTEs): parsing and
// planning one took 11–50 ms on the 2-core VM of the benchmarks, in
// PostgreSQL's log. Done on a request's path, that was the slowest 1% of
// the 500 tasks/s latency benchmark: the first ~150 tasks after the load
// began waited 50–150 ms while each of the pool's connections planned the
// submit, hand-off, claim and report statements in turn, and each ANALYZE
// of the young tasks table gave a burst of the same.
//
// So a store with WarmConns keeps its pool full (MinConns = MaxConns) and
// warms each connection before the pool hands it out, and its connections
// again, one at a time while idle, after each ANALYZE: the statements of
// warmSQL are prepared, so that a query of the same text runs them, and
// EXPLAIN EXECUTE makes their generic plans (plan_cache_mode
// force_generic_plan), which PostgreSQL keeps for their later executions.
// A connection busy when an ANALYZE ends plans on its next use, as before.

// A pool replaces a connection that broke (a query cancelled mid-flight
// closes its connection). Warming costs PostgreSQL a few hundred
// milliseconds of CPU on a slow machine, so new connections are warmed
// only within a budget of MaxConns every warmBudgetEvery: the pool's
// first fill, and the occasional replacement. Past it (a pool replacing
// connections by the second, as on a machine so loaded that clients give
// up on their requests) a new connection plans on first use, as without
// WarmConns, and warming adds no load where there is too much already.
const warmBudgetEvery = time.Minute

// warmPlanRows is the least rows of tasks, as last analyzed, for which
// warmConn makes plans (see there).
const warmPlanRows = 1000

// warmBudget counts the warm-ups of new connections: at most per every
// period.
type warmBudget struct {
	per   int
	every time.Duration

	mu    sync.Mutex
	start time.Time // of the current period
	used  int
}

// take reports whether a new connection may be warmed at now, and counts
// it.
func (b *warmBudget) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.start) >= b.every {
		b.start, b.used = now, 0
	}
	if b.used >= b.per {
		return false
	}
	b.used++
	return true
}

// warmSQL are the statements of the hot paths: a submit (single, batch,
// handed to a waiting claim), a claim of one kind with the worker's
// sighting, the reports, and the event log's append.
var warmSQL = []string{
	insertOneSQL, insertStartedSQL, insertBatchSQL,
	seeWorkerSQL[0], seeWorkerAndLockSQL[0], claimOneSQL[0], candidatesSQL, startRunsLeanSQL,
	completeBriefSQL, completeFastSQL,
	eventAppendSQL,
}

// warmConn prepares the statements of warmSQL on conn and makes their
// generic plans: pgx's Prepare with the statement's text as its name
// registers it so that a query of that text runs it (a second Prepare
// of a statement already prepared costs nothing), and one round trip of
// EXPLAIN EXECUTEs makes the plans. A connection whose queries do not go
// through prepared statements (a URL with another default_query_exec_mode,
// e.g. behind PgBouncer) is left as it is.
func warmConn(ctx context.Context, conn *pgx.Conn) error {
	if conn.Config().DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return nil
	}
	// Plans made for an empty or never analyzed table would scan it, and
	// be kept as it grows until the analyzer's first ANALYZE: a new
	// schema's connections only parse the statements, and plan them on
	// first use.
	var rows float32
	if err := conn.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'tasks'::regclass`).Scan(&rows); err != nil {
		return fmt.Errorf("read the size of tasks: %w", err)
	}
	plan := rows >= warmPlanRows
	var plans strings.Builder
	for _, sql := range warmSQL {
		sd, err := conn.Prepare(ctx, sql, sql)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		if !plan {
			continue
		}
		plans.WriteString("EXPLAIN EXECUTE " + sd.Name + "(")
		for i := range sd.ParamOIDs {
			if i > 0 {
				plans.WriteString(", ")
			}
			plans.WriteString("NULL")
		}
		plans.WriteString(");")
	}
	if !plan {
		return nil
	}
	if _, err := conn.PgConn().Exec(ctx, plans.String()).ReadAll(); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}

// warmIdle warms the pool's connections (warmConn) one at a time, each
// while it is idle, so that the others go on serving; it does nothing
// unless Config.WarmConns. It takes a connection that is idle, or else
// the next one released, and gives up after warmIdleFor: a connection
// busy throughout plans on its next use.
func (s *Store) warmIdle(ctx context.Context) {
	if !s.cfg.WarmConns {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, warmIdleFor)
	defer cancel()
	warmed := map[uint32]bool{} // by backend pid
	for len(warmed) < int(s.pool.Stat().TotalConns()) {
		var pick *pgxpool.Conn
		for _, c := range s.pool.AcquireAllIdle(ctx) {
			if pick == nil && !warmed[c.Conn().PgConn().PID()] {
				pick = c
				continue
			}
			c.Release()
		}
		if pick == nil {
			c, err := s.pool.Acquire(ctx)
			if err != nil {
				return // ctx done, or the pool closed
			}
			if warmed[c.Conn().PgConn().PID()] {
				c.Release()
				select { // the others are busy: look again shortly
				case <-time.After(10 * time.Millisecond):
				case <-ctx.Done():
					return
				}
				continue
			}
			pick = c
		}
		warmed[pick.Conn().PgConn().PID()] = true
		err := warmConn(ctx, pick.Conn())
		pick.Release()
		if err != nil {
			if !s.isClosed() && ctx.Err() == nil {
				s.log.Warn("pgstore: warm a connection", "err", err)
			}
			return
		}
	}
}

// warmIdleFor bounds a warmIdle.
const warmIdleFor = 5 * time.Second
