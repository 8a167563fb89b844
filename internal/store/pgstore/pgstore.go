// Package pgstore is Rota's PostgreSQL store, for clusters: several rota
// nodes share one database, written through pgx v5 and its pool (pgxpool).
//
// # Layout
//
// All tables live in one schema (Config.Schema, created if missing); the
// store's connections set search_path to it, so SQL names tables without a
// schema and one database can hold several isolated Rota installations (the
// tests use one schema per test). Instants are bigint unix milliseconds
// (UTC), 0 meaning unset, as in sqlitestore: exactly the precision the
// contract asks for, with no time zone or rounding questions.
//
// A single-worker task (workers = 1) keeps its current run in its own row
// (the run_* columns): a claim, a heartbeat and a report each write that
// row only, and a heartbeat is a HOT update (no index covers the lease;
// fillfactor 80). The run an attempt replaces is written to run_log, the
// history, by the claim that replaces it; multi-worker tasks keep their
// runs in run_log, as do runs written before migration 0009. The view
// runs reads both (in_row tells which holds a run), so readers see one
// runs table; writers write where the run is. Run ids are the caller's
// (TaskClaimParams.NewRunID) and do not name their task, so a report or
// heartbeat finds the task row through the small index tasks_run.
//
// Migrations are embedded (migrations/*.sql) and applied forward by New in
// one transaction guarded by pg_advisory_xact_lock, so nodes starting
// together do not race; a database whose schema is newer than the binary is
// refused.
//
// # Transactions
//
// Every Store method that changes state is one READ COMMITTED transaction,
// pipelined (txn): statements are queued and sent together whenever a
// result is needed, BEGIN with the first batch and COMMIT with the last. A
// heartbeat or a report is two round trips (lock and read; write and
// commit), a claim of one kind one (claimOne), an insert of unkeyed tasks
// one.
// Reports are committed in groups (complete.go): the reports that arrive
// while one group commits go together in the next, settled in one
// transaction of two round trips and a few set-based statements, so that
// under load a node pays one WAL flush for many reports. Small inserts of
// unkeyed tasks (single submits) are grouped the same way (insert.go):
// one statement and one commit for the group.
// Once the work of a transaction is done its commit is not cancelled with
// the caller's context, so a caller is never told that a committed change
// failed. Deadlocks and serialization failures are retried (the locking
// below avoids them; the retry is a safety net).
//
// # Locking
//
// Each kind of transaction locks rows in one order, and the orders cannot
// form a cycle:
//   - claims: the worker's row, then kind rows, then the tasks they pick,
//     with SKIP LOCKED (a claim never waits for a task row);
//   - everything that starts from a task or a run (report, heartbeat,
//     expiry, stop, update): the task's row first (FOR NO KEY UPDATE), then
//     its runs, then (heartbeats) the worker's row. Every change of a run
//     happens under its task's lock, so a run read after that lock is
//     current;
//   - batches of keyed inserts insert in (kind, key) order.
//
// Claims lock the kind's row (SELECT ... FOR UPDATE) for the rest of their
// transaction: the position in the weighted round, the MaxRunning cap and
// the rate bucket are per-kind state that two claimers must not both read
// and advance. The cost is that claims of one kind are serialized across
// the cluster for the length of a claim transaction (for a claim of one
// kind, the statements after the lock and the commit, sent together with
// it, so no round trip is waited for while it is held; for a claim of
// several kinds, a round trip and the commit); a claim of Max tasks pays it
// once for all of them, so busy workers should claim in batches. Claims of different kinds do not
// contend. A claim of several kinds visits them in the order given; it
// waits for a kind's lock only when that kind sorts after every kind lock
// it keeps (otherwise it skips a busy kind, which can only happen once it
// already has work), and it gives back the lock of a kind it took nothing
// from (savepoint rollback), so claims with kinds in different orders
// cannot deadlock.
//
// The pick itself is one statement (candidatesSQL): six index range scans
// of tasks_ready, each stopping after Max rows, ranked in weighted-round
// order by the SQL function round_slot, the restatement of
// store.WeightedPick that the tests check against it. Only the tasks handed out
// are locked, each looked up by primary key (a lateral lookup no plan can
// turn into a scan of the ready range). Its cost does not depend on how
// many tasks wait. A
// PinnedOnly claim (the HTTP executor's) uses the three pinned ranges only
// (pinnedCandidatesSQL).
//
// No counter is kept on kind or worker rows: the running runs of a kind
// (for MaxRunning) and of a worker (for WorkerList) are counted through
// partial indexes over RUNNING runs (tasks_running, and run_log's), so
// reports never touch a kind's or a worker's row. A worker's sighting is
// written at most once a second (seenGrain). A task's holders (the workers with a RUNNING or SUCCESS
// run of it) are kept on the task row, so that a multi-worker claim checks
// them without a sub-query over runs.
//
// The store's connections use plan_cache_mode force_generic_plan (unless
// the URL sets it): every statement is a parameterized index lookup, and
// custom plans would make PostgreSQL plan the claim again at each
// execution.
//
// # Notifications
//
// SupportsNotify is true. Transactions that make tasks claimable now or
// later (insert, retry after failure, lease expiry, a stopped or released
// run that requeues, a run ending under a MaxRunning cap, TaskUpdate,
// KindUpsert of an unpaused kind) record it; once they have committed, the
// store's notifier sends pg_notify on the channel "rota." + schema, for
// every such change since its last send in one statement (see notifier for
// why not inside the transactions). The payload is "kind|runAtMs|nodeID":
// runAtMs is 0 when tasks are claimable now, else the earliest instant
// some become claimable (a kind may get one of each); nodeID is
// Config.NodeID of the sender. Subscribe LISTENs on a dedicated connection
// and delivers the notifications of the other nodes, and of this one only
// those its dispatcher cannot know of (txn.notifySelf).
package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// DefaultSchema is the schema of a Config that names none.
const DefaultSchema = "public"

// Config configures a Store. Zero values mean the documented defaults.
type Config struct {
	// URL is a PostgreSQL connection string (URL or key=value form) as
	// understood by pgx, e.g. "postgres://rota@db:5432/rota?sslmode=verify-full".
	URL string
	// Schema holds every table of the store; it is created if missing.
	// Default "public". At most 63 bytes (a PostgreSQL identifier).
	Schema string
	// MaxConns caps the connection pool (default: pgxpool's, the larger of
	// 4 and the number of CPUs). Subscribe uses one more connection of its
	// own.
	MaxConns int
	// NodeID names this node in the notifications it sends (see the package
	// doc), so that receivers can tell them apart; Subscribe does not
	// deliver this node's own, except those of changes its callers cannot
	// know of (see Subscribe).
	NodeID string
	// Logger receives what the store cannot return: the reconnections of
	// Subscribe. Nil discards.
	Logger *slog.Logger
	// Cost, when set, counts the statements, round trips and commits of
	// the store's connections (package storecost); nil counts nothing.
	Cost *storecost.Counter
	// WarmConns keeps the pool full (MinConns = MaxConns, unless the URL
	// sets pool_min_conns) and its connections warm: the hot statements
	// prepared and planned before a request needs them, on each new
	// connection and on the idle ones after each ANALYZE (warm.go). A
	// server sets it; a short-lived store need not.
	WarmConns bool
}

// Store is the PostgreSQL implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	// Immutable after New.
	cfg      Config
	pool     *pgxpool.Pool
	connCfg  *pgx.ConnConfig // for Subscribe's dedicated connection
	channel  string          // notification channel of the schema
	log      *slog.Logger
	closed   chan struct{} // closed by Close
	closeOne sync.Once
	// life bounds the store's own loops (notifier, analyzer): New's
	// context without its cancellation (that context bounds the opening
	// only), canceled by Close, so that Close never waits on a stuck query.
	life    context.Context
	endLife context.CancelFunc

	// Notifications waiting for the notifier (notify.go).
	noteMu   sync.Mutex
	pending  notes    // guarded by noteMu
	controls []string // guarded by noteMu: presence payloads to send (notify.go)
	// Presence (notify.go): whether this store's LISTEN connection is up,
	// and when it last heard another node (unix ns).
	listening atomic.Bool
	peerSeen  atomic.Int64
	noteWake  chan struct{} // capacity 1: pending has something
	noteDone  chan struct{} // closed when the notifier has stopped

	// Reports waiting for a completer (complete.go).
	completeQ      chan []*completeReq // a request's reports, together
	completersDone sync.WaitGroup

	// Inserts waiting for an inserter (insert.go).
	insertQ       chan *insertReq
	insertersDone sync.WaitGroup

	analyzerDone chan struct{} // closed when the analyzer (analyze.go) has stopped

	knownKinds sync.Map // kind name → struct{}: kinds whose row exists (rows are never deleted)
}

var _ store.Store = (*Store)(nil)

// New connects to cfg.URL, creates the schema if needed and migrates it
// forward. A schema written by a newer Rota (a version this binary does not
// know) is refused with an error that says to upgrade.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if len(cfg.Schema) > 63 || strings.ContainsRune(cfg.Schema, 0) {
		return nil, fmt.Errorf("pgstore: schema name %q: want 1 to 63 bytes without NUL", cfg.Schema)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pcfg, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Migrate on a connection of its own before the pool opens: the
	// pool's connections are warmed (Config.WarmConns) as they open, which
	// needs the tables.
	if err := migrate(ctx, pcfg.ConnConfig.Copy(), cfg.Schema); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open pool: %w", err)
	}
	// The store's own loops are background work, counted apart (storecost).
	life, endLife := context.WithCancel(storecost.Async(context.WithoutCancel(ctx)))
	s := &Store{
		life:     life,
		endLife:  endLife,
		cfg:      cfg,
		pool:     pool,
		connCfg:  pcfg.ConnConfig.Copy(),
		channel:  channelName(cfg.Schema),
		log:      cfg.Logger,
		closed:   make(chan struct{}),
		pending:  make(notes),
		noteWake: make(chan struct{}, 1),
		noteDone: make(chan struct{}),

		completeQ:    make(chan []*completeReq),
		insertQ:      make(chan *insertReq),
		analyzerDone: make(chan struct{}),
	}
	go s.notifier()
	go s.analyzer()
	for range completers {
		s.completersDone.Add(1)
		go s.completer()
	}
	for range inserters {
		s.insertersDone.Add(1)
		go s.inserter()
	}
	return s, nil
}

// poolConfig is the pool configuration of cfg: its URL, with the session
// settings every connection of the store needs (unless the URL sets them).
func poolConfig(cfg Config) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse URL: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = int32(cfg.MaxConns)
	}
	if cfg.Cost != nil {
		pcfg.ConnConfig.Tracer = costTracer{cfg.Cost}
	}
	if cfg.WarmConns {
		if pcfg.MinConns == 0 {
			pcfg.MinConns = pcfg.MaxConns
		}
		budget := &warmBudget{per: int(pcfg.MaxConns), every: warmBudgetEvery}
		pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			// A connection that could not be warmed, or opened past the
			// budget, still serves: its statements are planned on first
			// use, as without WarmConns.
			if !budget.take(time.Now()) {
				return nil
			}
			if err := warmConn(ctx, conn); err != nil {
				cfg.Logger.Warn("pgstore: warm a new connection", "err", err)
			}
			return nil
		}
	}
	rt := pcfg.ConnConfig.RuntimeParams
	rt["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	if rt["application_name"] == "" {
		rt["application_name"] = "rota"
	}
	if rt["plan_cache_mode"] == "" {
		// Every statement of the store is a parameterized index lookup
		// whose best plan does not depend on the values. With custom plans
		// PostgreSQL would plan the claim's pick again at each execution
		// (LIMIT $n makes the generic plan look dearer than it is), and
		// planning probes the ends of tasks_ready, which is slow while
		// claimed tasks' dead entries wait for vacuum.
		rt["plan_cache_mode"] = "force_generic_plan"
	}
	if rt["idle_in_transaction_session_timeout"] == "" {
		// Every transaction of the store runs its statements back to back.
		// One left open by a process that stopped mid-transaction (SIGSTOP,
		// a frozen VM) would hold its row locks for as long as the TCP
		// connection lives: the leader row's FOR SHARE lock of a fenced
		// write would then block every election until the process resumed.
		// PostgreSQL ends such a session after this long, its transaction
		// rolled back, so another node can take over.
		rt["idle_in_transaction_session_timeout"] = "5s"
	}
	return pcfg, nil
}

// channelName is the notification channel of a schema: "rota." + schema,
// or a digest of the schema when that is longer than an identifier may be.
func channelName(schema string) string {
	if name := "rota." + schema; len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(schema))
	return "rota." + hex.EncodeToString(sum[:16])
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int {
	names, _ := fs.Glob(migrationFS, "migrations/*.sql")
	return len(names)
}

// migrate creates the schema and applies the missing migrations, all in
// one transaction under an advisory lock of the schema, on a connection
// of ccfg (whose search_path is schema) opened for it.
func migrate(ctx context.Context, ccfg *pgx.ConnConfig, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		return fmt.Errorf("pgstore: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return migrateTo(ctx, conn, schema, -1)
}

// migrateTo is migrate up to version upTo (-1: the latest), through db,
// whose connections' search_path is schema.
func migrateTo(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, schema string, upTo int) error {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("pgstore: list migrations: %w", err)
	}
	sort.Strings(names)
	latest := len(names)
	if upTo >= 0 && upTo < len(names) {
		names = names[:upTo]
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('rota.migrate'), hashtext($1))`, schema); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS rota_migration (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create migration table: %w", err)
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM rota_migration`).Scan(&have); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if have > latest {
			return fmt.Errorf("schema %q has version %d but this rota binary knows only up to %d: upgrade rota (or use the binary that wrote it)",
				schema, have, latest)
		}
		for i := have; i < len(names); i++ {
			body, err := migrationFS.ReadFile(names[i])
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", names[i], err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO rota_migration (version, name) VALUES ($1, $2)`, i+1, names[i]); err != nil {
				return fmt.Errorf("record schema version %d: %w", i+1, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", schema, err)
	}
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return s.translate("ping", err)
	}
	return nil
}

// PingWrite implements store.Store: a transaction that takes a
// transaction id commits a WAL record and waits for its flush, as every
// write does, without touching a table.
func (s *Store) PingWrite(ctx context.Context, _ time.Time) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.translate("write probe", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		return s.translate("write probe", err)
	}
	return s.translate("write probe", tx.Commit(ctx))
}

// Close lets the reports and inserts in progress commit, sends the
// notifications still waiting, closes the pool and ends the store's
// subscriptions. It is idempotent.
func (s *Store) Close() error {
	s.closeOne.Do(func() {
		close(s.closed)
		s.endLife() // the notifier's last send has a context of its own
		s.completersDone.Wait()
		s.insertersDone.Wait()
		<-s.analyzerDone
		<-s.noteDone
		s.pool.Close()
	})
	return nil
}

// --- transactions ----------------------------------------------------------

// txn is a transaction of the store, pipelined: statements are queued and
// sent together when a result is needed (flush), so that the transaction
// costs a round trip per read rather than per statement. BEGIN goes with
// the first flush and COMMIT with the last. A heartbeat or a report is thus
// two round trips: lock and read, then write and commit. The notifications
// recorded with notify go to the notifier once the commit succeeded.
type txn struct {
	conn  *pgx.Conn
	b     *pgx.Batch // queued, not yet sent
	notes notes      // sent once the transaction has committed
	// group, when set, collects the writes of runs and tasks ending runs
	// instead of queueing a statement for each (complete.go).
	group *groupWrites
	// committed runs after COMMIT succeeded (afterCommit).
	committed []func()
	// knownKinds is the store's set of kinds whose row exists (upsertKinds).
	knownKinds *sync.Map
}

// upsertKinds queues the creation of the rows of kinds (claims lock a
// kind's row), unless this store has seen them stored: kind rows are
// never deleted, so a kind it knows needs no statement.
func (t *txn) upsertKinds(kinds []string) {
	var missing []string
	for _, k := range kinds {
		if _, known := t.knownKinds.Load(k); !known {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return
	}
	slices.Sort(missing) // one lock order for concurrent upserts
	missing = slices.Compact(missing)
	t.queue(`INSERT INTO kinds (name) SELECT unnest($1::text[]) ON CONFLICT (name) DO NOTHING`, missing)
	t.afterCommit(func() {
		for _, k := range missing {
			t.knownKinds.Store(k, struct{}{})
		}
	})
}

// afterCommit runs fn once the transaction has committed (not if it rolls
// back, nor for an attempt that is run again).
func (t *txn) afterCommit(fn func()) { t.committed = append(t.committed, fn) }

// queue adds a statement to the next flush. Attach a callback (Exec,
// QueryRow, Query) to see its result; callbacks run during the flush, in
// order, and the first error they or the statements return ends it.
func (t *txn) queue(sql string, args ...any) *pgx.QueuedQuery {
	return t.b.Queue(sql, args...)
}

// flush sends the queued statements and runs their callbacks.
func (t *txn) flush(ctx context.Context) error {
	if t.b.Len() == 0 {
		return nil
	}
	b := t.b
	t.b = &pgx.Batch{}
	return t.conn.SendBatch(ctx, b).Close()
}

// queryRow queues sql with scan as its row callback and flushes.
func (t *txn) queryRow(ctx context.Context, scan func(pgx.Row) error, sql string, args ...any) error {
	t.queue(sql, args...).QueryRow(scan)
	return t.flush(ctx)
}

// query queues sql with fn as its rows callback and flushes.
func (t *txn) query(ctx context.Context, fn func(pgx.Rows) error, sql string, args ...any) error {
	t.queue(sql, args...).Query(fn)
	return t.flush(ctx)
}

// notify records that tasks of kind are claimable from runAt on (both in
// ms); an instant not after now means now. The notification is sent once
// the transaction has committed (see notifier).
func (t *txn) notify(kind string, runAt, now int64) {
	if t.notes == nil {
		t.notes = make(notes)
	}
	t.notes.add(kind, runAt, now, false)
}

// notifySelf is notify for a change that this node's own dispatcher does
// not see from the call's result (a run that ended freed a place under its
// kind's MaxRunning cap; a settled task is claimable again): its
// notification reaches this node's Subscribe too.
func (t *txn) notifySelf(kind string, runAt, now int64) {
	if t.notes == nil {
		t.notes = make(notes)
	}
	t.notes.add(kind, runAt, now, true)
}

// keepError marks an error whose transaction must still commit (a stale
// heartbeat expires the run it names, then reports lease lost).
type keepError struct{ err error }

func (k keepError) Error() string { return k.err.Error() }
func (k keepError) Unwrap() error { return k.err }

// maxTxAttempts bounds how often a transaction that failed with a deadlock
// or serialization failure is run again. The lock order (package doc)
// should make these impossible; the retry is a safety net, not a design.
const maxTxAttempts = 3

// commitTimeout bounds the last flush (queued writes and COMMIT), which
// runs even when the caller's context has ended once fn is done: a caller
// must not be told that a change failed when it was committed.
const commitTimeout = 30 * time.Second

// tx runs fn in a transaction and commits it, then posts the notifications
// fn recorded. fn may run again (after a deadlock), so it must reset what
// it reports; callbacks fn queued without flushing run during the commit
// flush, after fn returned and after COMMIT was sent (so a callback error
// there is returned although the transaction committed: use them for
// reads only). An error of fn rolls back, except a keepError: its
// transaction commits and its inner error is returned.
func (s *Store) tx(ctx context.Context, op string, fn func(t *txn) error) error {
	for attempt := 1; ; attempt++ {
		err := s.txOnce(ctx, fn)
		if err == nil {
			return nil
		}
		var k keepError
		if errors.As(err, &k) {
			return k.err
		}
		if attempt < maxTxAttempts && retryable(err) && ctx.Err() == nil {
			continue
		}
		return s.translate(op, err)
	}
}

func (s *Store) txOnce(ctx context.Context, fn func(t *txn) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	conn := c.Conn()
	defer func() {
		// Roll back whatever did not commit, so that the connection goes
		// back to the pool idle (the pool drops one left in a transaction).
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}()
	t := &txn{conn: conn, b: &pgx.Batch{}, knownKinds: &s.knownKinds}
	t.queue("BEGIN")
	ferr := fn(t)
	var k keepError
	if ferr != nil && !errors.As(ferr, &k) {
		return ferr
	}
	t.queue("COMMIT")
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := t.flush(cctx); err != nil {
		return err
	}
	s.post(t.notes)
	for _, fn := range t.committed {
		fn()
	}
	return ferr
}

// --- errors ----------------------------------------------------------------

// retryable reports whether err is a deadlock or serialization failure,
// after which the whole transaction may run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// translate turns a driver error into one that carries meaning upward: rota
// errors pass through; unique violations become rota.ErrConflict, values
// the database refuses (invalid JSON, ...) rota.ErrInvalid, lost or refused
// connections and deadlocks rota.ErrUnavailable, all still wrapping the
// driver error for logs; anything else is wrapped with the operation's
// name.
func (s *Store) translate(op string, err error) error {
	if err == nil {
		return nil
	}
	var re *rota.Error
	if errors.As(err, &re) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505": // unique_violation
			what := "a row with the same key"
			if pe.ConstraintName == "tasks_pkey" {
				what = "a task with this id"
			}
			return fmt.Errorf("pgstore: %s: %w: %w", op, rota.Errorf(rota.CodeConflict, "%s already exists", what), err)
		case strings.HasPrefix(pe.Code, "22"): // data exception: a value the column cannot hold
			return fmt.Errorf("pgstore: %s: %w: %w", op, rota.Errorf(rota.CodeInvalid, "a value was refused by the database: %s", pe.Message), err)
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"), strings.HasPrefix(pe.Code, "53"),
			pe.Code == "58030", pe.Code == "25006", pe.Code == "40P01", pe.Code == "40001":
			// Connection trouble, shutdown, insufficient resources (a
			// full disk: 53100), an I/O error, a read-only standby,
			// deadlock or serialization failure: try again later.
			return fmt.Errorf("pgstore: %s: %w: %w", op, rota.Errorf(rota.CodeUnavailable, "the database is unavailable or busy"), err)
		}
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) || s.isClosed() {
		return fmt.Errorf("pgstore: %s: %w: %w", op, rota.Errorf(rota.CodeUnavailable, "the database is unreachable"), err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// notFound and conflict are the package's short names for the rota
// errors a client sees (store.NotFoundError, store.ConflictError).
func notFound(what, id string) error { return store.NotFoundError(what, id) }

func conflict(format string, args ...any) error { return store.ConflictError(format, args...) }

// --- instants --------------------------------------------------------------

// ms and tm are the package's short names for store.Millis and
// store.FromMillis: instants as stored.
func ms(t time.Time) int64 { return store.Millis(t) }

func tm(v int64) time.Time { return store.FromMillis(v) }
