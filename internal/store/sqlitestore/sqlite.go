// Package sqlitestore is Rota's embedded store: one SQLite file, written
// through modernc.org/sqlite (pure Go, no cgo, so `go install` works
// everywhere).
//
// Design: SQLite allows one writer at a time, so the store owns exactly one
// write connection, driven by one goroutine that applies operations in
// group commits: whatever operations queue up while a transaction commits go
// into the next transaction together. Operations validate before they
// write; one that fails after writing has the batch run again with a
// SAVEPOINT per operation, so that it rolls back alone. One fsync then acknowledges many
// operations, which keeps full durability (WAL, synchronous=FULL) without
// paying an fsync per request. Reads go through a separate pool of read-only
// connections, which WAL lets run concurrently with the writer.
//
// The lean model (issue 13, migration 0011_lean): a single-worker task
// keeps its current run in its own row, so a claim, a heartbeat and a
// report each write that row once; a run goes to run_log (the history)
// only when a newer attempt replaces it, and multi-worker tasks keep their
// runs there. The view runs shows both to every reader.
package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Config configures a Store.
type Config struct {
	// Path of the database file; its directory is created if missing.
	Path string
	// Relaxed trades durability for speed: synchronous=NORMAL, so a power
	// loss (not a process crash) may lose the last commits. Default false:
	// every acknowledged write is on disk (synchronous=FULL).
	Relaxed bool
	// MaxBatch caps the operations in one group commit (default 256).
	MaxBatch int
	// ReadConns is the size of the read pool (default 4).
	ReadConns int
	// ReadCacheKiB is the page cache of each read connection in KiB
	// (default 512; SQLite's own default is 2,000). Each cached page costs
	// about twice its size in the C heap of modernc.org/sqlite (its
	// allocator rounds a 4 KiB page plus header up to an 8 KiB slot), and
	// a deep queue fills every cache: see "Scale and memory" in
	// docs/architecture.md. The writer keeps SQLite's default.
	ReadCacheKiB int
	// Cost, when set, counts the store's statements and commits (package
	// storecost); nil counts nothing.
	Cost *storecost.Counter
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	cfg   Config
	wdb   *sql.DB // exactly one connection: the writer
	rdb   *sql.DB // read-only pool
	wc    *stmtCache
	r     rdbq
	kinds sync.Map // name → struct{}: kinds known to be in the kinds table
	ops   chan *op
	// closing guards closed: queue holds it to read closed and send, Close
	// to set it, so that nothing is queued once Close began.
	closing sync.RWMutex
	closed  bool
	quit    chan struct{}
	done    chan struct{}
	close   sync.Once
}

var _ store.Store = (*Store)(nil)

// op is one operation of a group commit. fn runs inside the batch's
// transaction; its error rolls back its own savepoint unless it is a
// keepError, whose changes are committed and whose inner error is returned.
type op struct {
	fn   func(ctx context.Context, tx *wtx) error
	errc chan error
	// wg, when set, is told of the outcome instead of errc: the writer
	// sets err, then calls wg.Done (RunCompleteMany waits for many
	// operations at once).
	wg  *sync.WaitGroup
	err error
	// report, when set, is a success report that the writer settles in
	// one statement with the reports next to it in the group (see
	// completeRows) before fn runs.
	report *groupReport
	// insert, when set, is an insert of plain tasks (no key, no
	// dependencies) that the writer inserts with the inserts next to it
	// in the group (see insertGroup) before fn runs.
	insert *groupInsert
}

// keepError marks an operation error whose changes must still be committed
// (a stale heartbeat expires the run it names, then reports lease lost).
type keepError struct{ err error }

func (k keepError) Error() string { return k.err.Error() }
func (k keepError) Unwrap() error { return k.err }

// ErrClosed is returned by operations on a closed store; it is a
// rota.CodeUnavailable error (HTTP 503).
var ErrClosed = rota.Errorf(rota.CodeUnavailable, "the store is closed")

// New opens (creating if needed) the database at cfg.Path, migrates it
// forward, and starts the writer. A database written by a newer Rota (a
// schema version this binary does not know) is refused.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlitestore: empty path")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.ReadConns <= 0 {
		cfg.ReadConns = 4
	}
	if cfg.ReadCacheKiB <= 0 {
		cfg.ReadCacheKiB = 512
	}
	if dir := filepath.Dir(cfg.Path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlitestore: create data directory: %w", err)
		}
	}
	sync := "FULL"
	if cfg.Relaxed {
		sync = "NORMAL"
	}
	// temp_store(2): statement journals and temporary b-trees in memory,
	// not in temporary files (a pwrite each page; see noStatementJournal).
	pragmas := []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(" + sync + ")", "foreign_keys(0)", "recursive_triggers(1)",
		"temp_store(2)"}
	dsn := func(extra ...string) string {
		q := url.Values{}
		for _, p := range append(pragmas, extra...) {
			q.Add("_pragma", p)
		}
		q.Set("_txlock", "immediate")
		return "file:" + cfg.Path + "?" + q.Encode()
	}
	wdb, err := sql.Open("sqlite", dsn())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", cfg.Path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, err
	}
	rdb, err := sql.Open("sqlite", dsn("query_only(1)", fmt.Sprintf("cache_size(-%d)", cfg.ReadCacheKiB)))
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlitestore: open read pool: %w", err)
	}
	rdb.SetMaxOpenConns(cfg.ReadConns)
	rdb.SetMaxIdleConns(cfg.ReadConns)
	s := &Store{
		cfg:  cfg,
		wdb:  wdb,
		rdb:  rdb,
		wc:   newStmtCache(wdb, cfg.Cost),
		r:    rdbq{newStmtCache(rdb, cfg.Cost)},
		ops:  make(chan *op, 4096),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	// New's context bounds the opening only: the writer keeps its values,
	// not its cancellation, and ends at Close once it drained the queue (a
	// queued write always runs: see write).
	go s.writer(context.WithoutCancel(ctx))
	return s, nil
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int {
	names, _ := fs.Glob(migrationFS, "migrations/*.sql")
	return len(names)
}

func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS rota_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("sqlitestore: create meta table: %w", err)
	}
	var have int
	var v string
	switch err := db.QueryRowContext(ctx, `SELECT value FROM rota_meta WHERE key = 'schema_version'`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("sqlitestore: read schema version: %w", err)
	default:
		if have, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("sqlitestore: bad schema version %q", v)
		}
	}
	names, err := store.PendingMigrations(migrationFS, "migrations", have)
	if err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	for i, name := range names {
		body, err := migrationFS.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlitestore: migrate: %w", err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlitestore: migration %s: %w", names[i], err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rota_meta (key, value) VALUES ('schema_version', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.Itoa(have+i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlitestore: record schema version: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlitestore: commit migration %s: %w", names[i], err)
		}
	}
	return nil
}

// write runs fn in the writer's next group commit and returns once that
// commit is durable (or failed).
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *wtx) error) error {
	return s.writeOp(ctx, &op{fn: fn})
}

// writeOp is write for an operation built by the caller.
func (s *Store) writeOp(ctx context.Context, o *op) error {
	o.errc = make(chan error, 1)
	if err := s.queue(ctx, o); err != nil {
		return err
	}
	// Once queued the operation will run; wait for its outcome even if ctx
	// ends, so that the caller never reports failure for a committed write.
	return unavailable(<-o.errc)
}

// queue hands o to the writer, or fails without queuing it: ErrClosed
// once Close began, or ctx's error. Close waits for the operations being
// queued and the writer runs every operation queued before it stops, so
// a queued operation always runs (a send into the queue's buffer after
// the writer stopped would wait for its outcome for ever).
func (s *Store) queue(ctx context.Context, o *op) error {
	s.closing.RLock()
	defer s.closing.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) writer(ctx context.Context) {
	defer close(s.done)
	batch := make([]*op, 0, s.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		case <-s.quit:
			// Drain what was queued before Close.
			for {
				select {
				case o := <-s.ops:
					s.commit(ctx, []*op{o})
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		s.commit(ctx, batch)
		s.wc.prepareWanted(ctx)
	}
}

// commit applies a batch in one transaction and delivers each outcome.
//
// Operations validate before they write, so the common failure (a lost
// lease, a conflict, an unknown id) leaves nothing to undo: the batch runs
// without savepoints, whose cost (two statements an operation, and a copy
// of each page an operation touches into the statement journal) would
// otherwise be paid by every operation. Only when an operation fails after
// it wrote is the transaction rolled back and the batch run again with a
// SAVEPOINT per operation, so that the failure rolls back alone.
func (s *Store) commit(ctx context.Context, batch []*op) {
	errs, redo := s.apply(ctx, batch, false)
	if redo {
		errs, _ = s.apply(ctx, batch, true)
	}
	for i, o := range batch {
		o.deliver(errs[i])
	}
}

// deliver hands the operation's outcome to its caller.
func (o *op) deliver(err error) {
	if o.wg != nil {
		o.err = err
		o.wg.Done()
		return
	}
	o.errc <- err
}

// apply runs batch in one transaction and commits it, returning each
// operation's outcome. Without savepoints, an operation that fails after
// writing rolls the transaction back and apply returns redo (a batch of
// one just fails).
func (s *Store) apply(ctx context.Context, batch []*op, savepoints bool) (errs []error, redo bool) {
	errs = make([]error, len(batch))
	fail := func(err error) ([]error, bool) {
		for i := range errs {
			errs[i] = err
		}
		return errs, false
	}
	s.cfg.Cost.Add(ctx, oneStatement) // BEGIN IMMEDIATE
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		s.abandon(ctx)
		return fail(fmt.Errorf("sqlitestore: begin: %w", err))
	}
	w := &wtx{tx: tx, cache: s.wc, kinds: &s.kinds}
	for _, o := range batch {
		if o.report != nil {
			o.report.set, o.report.rep = false, nil
		}
		if o.insert != nil {
			o.insert.set = false
		}
	}
	for i, o := range batch {
		if ins := groupInserts(batch[i:], savepoints); len(ins) > 1 {
			if err := insertGroup(ctx, w, ins); err != nil {
				// Not the outcome of one insert: run them alone.
				tx.Rollback()
				return nil, true
			}
		}
		if reps := groupReports(batch[i:], savepoints); len(reps) > 1 {
			if err := completeRows(ctx, w, reps); err != nil {
				// Not the outcome of one report: run them alone.
				tx.Rollback()
				if len(batch) == 1 {
					return fail(err)
				}
				return nil, true
			}
		}
		if errs[i], err = w.run(ctx, o, savepoints); err != nil {
			tx.Rollback()
			return fail(err)
		}
		if errs[i] != nil && w.dirty && !savepoints {
			tx.Rollback()
			if len(batch) == 1 {
				return errs, false
			}
			return nil, true
		}
	}
	// COMMIT: one fsync of the WAL under synchronous=FULL.
	s.cfg.Cost.Add(ctx, storecost.Counts{Statements: 1, RoundTrips: 1, Commits: 1})
	if err := tx.Commit(); err != nil {
		// A failed COMMIT (a full disk) may leave the transaction open on
		// the connection: end it, or no later write could begin.
		s.abandon(ctx)
		return fail(fmt.Errorf("sqlitestore: commit: %w", err))
	}
	return errs, false
}

// groupReports returns the grouped success reports at the start of ops,
// up to the first other operation or the second report of a run; none
// when the first is already settled, or with savepoints (a group run
// again runs each operation alone).
func groupReports(ops []*op, savepoints bool) []*groupReport {
	var out []*groupReport
	if savepoints || len(ops) == 0 || ops[0].report == nil || ops[0].report.set {
		return nil
	}
	seen := make(map[string]bool)
	for _, o := range ops {
		if o.report == nil || seen[o.report.p.RunID] {
			break
		}
		seen[o.report.p.RunID] = true
		out = append(out, o.report)
	}
	return out
}

// run runs one operation of a batch, inside a savepoint of its own when
// savepoints is set, and returns its outcome (opErr) or, when the
// transaction itself failed, err. w.dirty then tells whether the
// operation wrote.
func (w *wtx) run(ctx context.Context, o *op, savepoints bool) (opErr, err error) {
	w.dirty = false
	if savepoints {
		if _, err := w.ExecContext(ctx, "SAVEPOINT op"); err != nil {
			return nil, fmt.Errorf("sqlitestore: savepoint: %w", err)
		}
	}
	opErr = o.fn(ctx, w)
	var keep keepError
	switch {
	case opErr == nil:
	case errors.As(opErr, &keep):
		opErr = keep.err
	case savepoints:
		if _, err := w.ExecContext(ctx, "ROLLBACK TO op"); err != nil {
			return nil, fmt.Errorf("sqlitestore: rollback to savepoint: %w (after %v)", err, opErr)
		}
	}
	if savepoints {
		if _, err := w.ExecContext(ctx, "RELEASE op"); err != nil {
			return nil, fmt.Errorf("sqlitestore: release savepoint: %w", err)
		}
	}
	if keep.err != nil {
		w.dirty = false // its changes are kept: nothing to undo
	}
	return opErr, nil
}

// abandon rolls back whatever transaction a failed commit or begin left
// open on the write connection; "no transaction is active" is the usual,
// harmless answer.
func (s *Store) abandon(ctx context.Context) {
	_, _ = s.wdb.ExecContext(ctx, "ROLLBACK")
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return unavailable(fmt.Errorf("sqlitestore: ping: %w", err))
	}
	return nil
}

// Close stops the writer after the queued operations and closes the
// database. It is idempotent.
func (s *Store) Close() error {
	var err error
	s.close.Do(func() {
		s.closing.Lock()
		s.closed = true
		s.closing.Unlock()
		close(s.quit)
		<-s.done
		s.wc.close()
		s.r.cache.close()
		err = errors.Join(s.rdb.Close(), s.wdb.Close())
	})
	return err
}

// inList returns "?,?,?" for n placeholders.
func inList(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// notFound and conflict are the package's short names for the rota
// errors a client sees (store.NotFoundError, store.ConflictError).
func notFound(what, id string) error { return store.NotFoundError(what, id) }

func conflict(format string, args ...any) error { return store.ConflictError(format, args...) }
