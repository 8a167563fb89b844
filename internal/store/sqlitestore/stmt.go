package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/rotahq/rota/internal/store/storecost"
)

// stmtCache prepares each distinct query once per pool. SQLite spends a
// large share of a short statement's time parsing it, so the hot paths
// (claim, heartbeat, complete) reuse prepared statements.
type stmtCache struct {
	db     *sql.DB
	cost   *storecost.Counter // Config.Cost: counts the statements run through the cache
	mu     sync.Mutex         // guards m and wanted
	m      map[string]*sql.Stmt
	wanted map[string]bool // queries to prepare when the connection is free
}

func newStmtCache(db *sql.DB, cost *storecost.Counter) *stmtCache {
	return &stmtCache{db: db, cost: cost, m: map[string]*sql.Stmt{}}
}

// oneStatement is what a statement costs (storecost): SQLite runs in the
// process, so each statement is one call into the engine.
var oneStatement = storecost.Counts{Statements: 1, RoundTrips: 1}

func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	c.cost.Add(ctx, storecost.Counts{Prepares: 1})
	c.m[q] = st
	return st, nil
}

// lookup returns the prepared statement for q without preparing it; on a
// miss it remembers q so that prepareWanted prepares it later.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st
	}
	if c.wanted == nil {
		c.wanted = map[string]bool{}
	}
	c.wanted[q] = true
	return nil
}

// prepareWanted prepares the queries lookup missed. The writer calls it
// between transactions, when its only connection is free: preparing inside
// a transaction would wait for that connection forever.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = nil
	c.mu.Unlock()
	for q := range wanted {
		c.get(ctx, q) // an error leaves q unprepared; it runs unprepared
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// noStatementJournal: the hot writes that may change many rows (the
// multi-row INSERT of tasks, the claim's UPDATE … FROM, a report's UPDATE
// … RETURNING, which SQLite runs as a trigger) say OR FAIL instead of the
// default ABORT. Under ABORT such a statement inside a transaction keeps a
// statement journal, a copy of every page it touches (written to a
// temporary file, a pwrite each), so that a constraint error can undo the
// statement alone: a quarter of the writer's time in profiles. The store
// never needs that undo: an operation that fails after it wrote has its
// whole group rolled back and run again with a savepoint per operation
// (Store.commit), which rolls back what a failed OR FAIL statement left.
// The INSERT still fails on a duplicate id or key, as before.

// wtx is the writer's transaction with cached statements.
type wtx struct {
	tx    *sql.Tx
	cache *stmtCache
	kinds *sync.Map // kinds known to exist (never deleted), to skip creating them
	dirty bool      // the current operation ran a statement that may write
}

// writes reports whether q may change the database: anything but a SELECT
// (an INSERT or UPDATE … RETURNING is read through QueryRow).
func writes(q string) bool {
	q = strings.TrimLeft(q, " \t\n")
	return len(q) < 6 || !strings.EqualFold(q[:6], "SELECT")
}

// stmt returns the transaction's view of q's prepared statement, or nil
// when q is not prepared yet (it then runs unprepared this once).
func (w *wtx) stmt(ctx context.Context, q string) *sql.Stmt {
	st := w.cache.lookup(q)
	if st == nil {
		return nil
	}
	// The statement was prepared on the writer's only connection, which
	// this transaction holds: StmtContext reuses it without preparing.
	return w.tx.StmtContext(ctx, st)
}

// ExecContext runs q with a cached prepared statement.
func (w *wtx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	w.cache.cost.Add(ctx, oneStatement)
	w.dirty = true
	if st := w.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return w.tx.ExecContext(ctx, q, args...)
}

// QueryContext runs q with a cached prepared statement.
func (w *wtx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	w.cache.cost.Add(ctx, oneStatement)
	w.dirty = w.dirty || writes(q)
	if st := w.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return w.tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q with a cached prepared statement.
func (w *wtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	w.cache.cost.Add(ctx, oneStatement)
	w.dirty = w.dirty || writes(q)
	if st := w.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return w.tx.QueryRowContext(ctx, q, args...)
}

// rdbq is the read pool with cached statements.
type rdbq struct{ cache *stmtCache }

// QueryContext runs q with a cached prepared statement.
func (r rdbq) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	r.cache.cost.Add(ctx, oneStatement)
	st, err := r.cache.get(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs q with a cached prepared statement.
func (r rdbq) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	r.cache.cost.Add(ctx, oneStatement)
	st, err := r.cache.get(ctx, q)
	if err != nil {
		return r.cache.db.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}
