package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

var driverBadConn = driver.ErrBadConn

// ms and tm are the package's short names for store.Millis and
// store.FromMillis: instants as stored.
func ms(t time.Time) int64 { return store.Millis(t) }

func tm(v int64) time.Time { return store.FromMillis(v) }

// oneStatement is the cost of one statement: one round trip (parameters
// are interpolated by the driver, so there is no separate prepare).
var oneStatement = storecost.Counts{Statements: 1, RoundTrips: 1}

// queryer is what both a transaction and the pool offer.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// dbq runs statements on the pool, counting them.
type dbq struct {
	db   *sql.DB
	cost *storecost.Counter
}

func (d dbq) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	d.cost.Add(ctx, oneStatement)
	return d.db.QueryContext(ctx, q, args...)
}

func (d dbq) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	d.cost.Add(ctx, oneStatement)
	return d.db.QueryRowContext(ctx, q, args...)
}

func (d dbq) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	d.cost.Add(ctx, oneStatement)
	return d.db.ExecContext(ctx, q, args...)
}

// txn is one transaction of the store: its statements are counted, and the
// changes it records (notify) are appended to the change sequence before it
// commits.
type txn struct {
	ctx   context.Context
	tx    *sql.Tx
	s     *Store
	notes map[string]note
	event bool
	now   time.Time // the instant of the item being applied (ScheduleFire)
}

// note is a pending wake-up: tasks of a kind claimable from runAt.
type note struct {
	runAt int64
	self  bool
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	t.s.cfg.Cost.Add(ctx, oneStatement)
	return t.tx.QueryContext(ctx, q, args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	t.s.cfg.Cost.Add(ctx, oneStatement)
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	t.s.cfg.Cost.Add(ctx, oneStatement)
	return t.tx.ExecContext(ctx, q, args...)
}

// exec runs a statement in the transaction's context.
func (t *txn) exec(q string, args ...any) (sql.Result, error) {
	return t.ExecContext(t.ctx, q, args...)
}

// affected runs a statement and returns how many rows it changed.
func (t *txn) affected(q string, args ...any) (int64, error) {
	res, err := t.exec(q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// notify records that tasks of kind are claimable from runAt on (unix ms;
// not after now: at once). Other nodes hear of it once the transaction
// commits.
func (t *txn) notify(kind string, runAt, now int64) { t.addNote(kind, runAt, now, false) }

// notifySelf is notify for a change that this node's own dispatcher cannot
// see from the call's result (a settled task is claimable again, a place
// freed under a cap): this node hears it too.
func (t *txn) notifySelf(kind string, runAt, now int64) { t.addNote(kind, runAt, now, true) }

func (t *txn) addNote(kind string, runAt, now int64, self bool) {
	if runAt <= now {
		runAt = 0
	}
	if t.notes == nil {
		t.notes = map[string]note{}
	}
	n, ok := t.notes[kind]
	if !ok || runAt < n.runAt {
		n.runAt = runAt
	}
	n.self = n.self || self
	t.notes[kind] = n
}

// flushNotes appends the recorded changes to the change sequence, in one
// statement.
func (t *txn) flushNotes() error {
	if len(t.notes) == 0 && !t.event {
		return nil
	}
	now := time.Now().UnixMilli()
	var vals []string
	var args []any
	for kind, n := range t.notes {
		vals = append(vals, "(?, ?, ?, ?, ?, 0)")
		args = append(args, now, t.s.cfg.NodeID, boolInt(n.self), kind, n.runAt)
	}
	if t.event {
		vals = append(vals, "(?, ?, 0, '', 0, 1)")
		args = append(args, now, t.s.cfg.NodeID)
	}
	_, err := t.exec(`INSERT INTO changes (at, node, self, kind, run_at, events) VALUES `+strings.Join(vals, ", "), args...)
	return wrap("record change", err)
}

// keepError marks an error whose transaction must still commit (a stale
// heartbeat expires the run it names, then reports lease lost).
type keepError struct{ err error }

func (k keepError) Error() string { return k.err.Error() }
func (k keepError) Unwrap() error { return k.err }

// maxTxAttempts bounds how often a transaction that deadlocked is run
// again.
const maxTxAttempts = 16

// tx runs fn in a transaction and commits it. fn may run again after a
// deadlock, so it must reset what it reports. An error of fn rolls back,
// except a keepError: its transaction commits and its inner error is
// returned.
func (s *Store) tx(ctx context.Context, op string, fn func(t *txn) error) error {
	for attempt := 1; ; attempt++ {
		err := s.txOnce(ctx, fn)
		if err != nil && retryable(err) && attempt < maxTxAttempts && ctx.Err() == nil {
			time.Sleep(time.Duration(attempt) * 2 * time.Millisecond)
			continue
		}
		return unavailable(err)
	}
}

func (s *Store) txOnce(ctx context.Context, fn func(t *txn) error) error {
	select {
	case <-s.closed:
		return errClosed
	default:
	}
	s.cfg.Cost.Add(ctx, oneStatement) // START TRANSACTION
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return wrap("begin", err)
	}
	t := &txn{ctx: ctx, tx: tx, s: s}
	ferr := fn(t)
	var keep keepError
	switch {
	case ferr == nil:
	case errors.As(ferr, &keep):
		ferr = keep.err
	default:
		tx.Rollback()
		return ferr
	}
	if err := t.flushNotes(); err != nil {
		tx.Rollback()
		return err
	}
	s.cfg.Cost.Add(ctx, storecost.Counts{Statements: 1, RoundTrips: 1, Commits: 1})
	if err := tx.Commit(); err != nil {
		return wrap("commit", err)
	}
	return ferr
}

// retryable reports a deadlock or a lock wait timeout: the transaction
// rolled back and may run again.
func retryable(err error) bool {
	var me *mysql.MySQLError
	var race raceError
	return errors.As(err, &race) || errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// raceError marks the loss of a race on a unique key (two first inserts of
// one key): the transaction runs again and finds the winner's row.
type raceError struct{ err error }

func (r raceError) Error() string { return r.err.Error() }
func (r raceError) Unwrap() error { return r.err }

// retryOnDuplicate makes a unique key violation a raceError.
func retryOnDuplicate(err error) error {
	if isDuplicate(err) {
		return raceError{err}
	}
	return err
}

// isDuplicate reports a unique key violation.
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// wrap adds the store's context to a driver error (nil stays nil).
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mysqlstore: %s: %w", what, err)
}

// errClosed is returned by operations on a closed store.
var errClosed = rota.Errorf(rota.CodeUnavailable, "the store is closed")

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// inList returns "?,?,?" for n placeholders.
func inList(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// anyList returns ids as statement arguments.
func anyList(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// notFound and conflict are the package's short names for the rota
// errors a client sees.
func notFound(what, id string) error { return store.NotFoundError(what, id) }

func conflict(format string, args ...any) error { return store.ConflictError(format, args...) }

type scanner interface{ Scan(dest ...any) error }

// collect reads every row of rows with scan and closes rows.
func collect[T any](rows *sql.Rows, err error, what string, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, wrap(what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, wrap("scan "+what, err)
		}
		out = append(out, v)
	}
	return out, wrap(what, rows.Err())
}

// strings1 reads a one-column list of strings.
func strings1(rows *sql.Rows, err error, what string) ([]string, error) {
	return collect(rows, err, what, func(sc scanner) (string, error) {
		var v string
		err := sc.Scan(&v)
		return v, err
	})
}
