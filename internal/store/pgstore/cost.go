package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

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
// which pgx does not trace: warm a path up before counting it). COMMIT statements count as commits.
type costTracer struct{ c *storecost.Counter }

var (
	_ pgx.QueryTracer   = costTracer{}
	_ pgx.BatchTracer   = costTracer{}
	_ pgx.PrepareTracer = costTracer{}
)

// TraceQueryStart implements pgx.QueryTracer.
func (t costTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.c.Add(ctx, storecost.Counts{Statements: 1, RoundTrips: 1, Commits: commits(d.SQL)})
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
