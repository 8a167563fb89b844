package pgstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotahq/rota/internal/store/storecost"
)

// costTracer counts the statements and round trips of the store's
// connections into a storecost.Counter (Config.Cost). It is installed only
// when a counter is given, so an uncounted store pays nothing.
//
// A lone statement (Exec, Query, QueryRow) is one round trip; a pipelined
// batch (txn.flush, SendBatch) is one round trip for all its statements; a
// preparation (pgx prepares each distinct statement once per connection)
// is one more (a batch prepares what it lacks in a pipeline of its own,
// which pgx does not trace: warm a path up before counting it). COMMIT
// statements count as commits, and so does a write sent outside a
// transaction block, which is a transaction of its own (insertcopy.go).
type costTracer struct{ c *storecost.Counter }

var (
	_ pgx.QueryTracer    = costTracer{}
	_ pgx.BatchTracer    = costTracer{}
	_ pgx.PrepareTracer  = costTracer{}
	_ pgx.CopyFromTracer = costTracer{}
)

// TraceQueryStart implements pgx.QueryTracer.
func (t costTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	n := storecost.Counts{Statements: 1, RoundTrips: 1, Commits: commits(d.SQL)}
	if conn.PgConn().TxStatus() == 'I' && writes(d.SQL) {
		n.Commits = 1
	}
	t.c.Add(ctx, n)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (costTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (t costTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	n := storecost.Counts{RoundTrips: 1}
	if d.Batch != nil {
		for _, q := range d.Batch.QueuedQueries {
			n.Statements++
			n.Commits += commits(q.SQL)
		}
	}
	t.c.Add(ctx, n)
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (costTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (costTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TraceCopyFromStart implements pgx.CopyFromTracer: a COPY is one
// statement and one round trip (its statement description is cached per
// connection); outside a transaction block it is a transaction of its own
// and counts as a commit (insertcopy.go).
func (t costTracer) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	n := storecost.Counts{Statements: 1, RoundTrips: 1}
	if conn.PgConn().TxStatus() == 'I' {
		n.Commits = 1
	}
	t.c.Add(ctx, n)
	return ctx
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (costTracer) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// TracePrepareStart implements pgx.PrepareTracer.
func (costTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

// TracePrepareEnd implements pgx.PrepareTracer: a statement the
// connection had not prepared yet cost a round trip.
func (t costTracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared {
		t.c.Add(ctx, storecost.Counts{Prepares: 1, RoundTrips: 1})
	}
}

// commits is 1 for a COMMIT statement, else 0.
func commits(sql string) int64 {
	if strings.EqualFold(strings.TrimSpace(sql), "commit") {
		return 1
	}
	return 0
}

// RowWrites returns the row writes PostgreSQL has counted for each table
// of the store's schema (pg_stat_user_tables: n_tup_ins, n_tup_upd,
// n_tup_hot_upd, n_tup_del), after asking each of the store's connections
// to flush its statistics (flushStats). Call it when the store is quiet:
// the writes of transactions in progress are not counted yet.
func (s *Store) RowWrites(ctx context.Context) (map[string]storecost.Rows, error) {
	if err := s.flushStats(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(storecost.Async(ctx), `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
		FROM pg_stat_user_tables WHERE schemaname = $1`, s.cfg.Schema)
	if err != nil {
		return nil, s.translate("read table statistics", err)
	}
	out := map[string]storecost.Rows{}
	for rows.Next() {
		var name string
		var r storecost.Rows
		if err := rows.Scan(&name, &r.Inserted, &r.Updated, &r.HotUpdated, &r.Deleted); err != nil {
			rows.Close()
			return nil, s.translate("read table statistics", err)
		}
		out[name] = r
	}
	if err := rows.Err(); err != nil {
		return nil, s.translate("read table statistics", err)
	}
	return out, nil
}

// flushStatsWait bounds how long flushStats waits for busy connections.
const flushStatsWait = 2 * time.Second

// flushStats asks every connection of the pool to flush the statistics it
// holds (pg_stat_force_next_flush, PostgreSQL 15 and later: the backend
// flushes as it goes idle after that statement, before it answers), so
// that pg_stat_user_tables counts their writes; a backend otherwise
// flushes at most once a second. A busy connection (the notifier's, a
// claim's) is flushed once it is idle, within flushStatsWait. On
// PostgreSQL before 15 it does nothing: recent writes may be missing.
func (s *Store) flushStats(ctx context.Context) error {
	ctx = storecost.Async(ctx)
	flushed := map[uint32]bool{}
	wait := time.NewTimer(flushStatsWait)
	defer wait.Stop()
	for {
		for _, c := range s.pool.AcquireAllIdle(ctx) {
			pid := c.Conn().PgConn().PID()
			if !flushed[pid] {
				if _, err := c.Conn().Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
					c.Release()
					var pe *pgconn.PgError
					if errors.As(err, &pe) && pe.Code == "42883" { // undefined_function: before 15
						return nil
					}
					return s.translate("flush statistics", err)
				}
				flushed[pid] = true
			}
			c.Release()
		}
		if len(flushed) >= int(s.pool.Stat().TotalConns()) {
			return nil
		}
		select {
		case <-wait.C:
			return nil // what the busy connections hold is missing
		case <-ctx.Done():
			return s.translate("flush statistics", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// writes reports whether sql is an INSERT, UPDATE or DELETE statement.
// (The one WITH statement sent alone, the event append, commits without
// waiting for its WAL flush: not counted.)
func writes(sql string) bool {
	sql = strings.TrimSpace(sql)
	for _, w := range []string{"insert", "update", "delete"} {
		if len(sql) >= len(w) && strings.EqualFold(sql[:len(w)], w) {
			return true
		}
	}
	return false
}
