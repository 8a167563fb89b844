// Package mysqlstore is Rota's store on MySQL 8 or MariaDB 10.6+, through
// database/sql and github.com/go-sql-driver/mysql. Several nodes may share
// one database, as with pgstore.
//
// Model (the lean model shared by the SQL stores): a task with one worker
// carries its current run in its own row, so that a claim, a heartbeat and
// a report are each one write of that row; its finished run stays there
// until a newer attempt moves it to run_history. Tasks with several workers
// keep their runs in run_history. The view runs reads both.
//
// Concurrency: InnoDB row locks at READ COMMITTED. A claim locks its kind's
// row (SELECT ... FOR UPDATE: the weighted round and the rate bucket live
// there), then picks tasks with FOR UPDATE SKIP LOCKED, so that claims
// never wait for a task another transaction is changing, and starts all it
// picked in one UPDATE. Reports lock their task row. A worker's sighting
// (last_seen) is written at most once a second (seenGrain). A transaction that deadlocks anyway is run again.
//
// Wake-ups: MySQL has no LISTEN/NOTIFY. Each transaction that makes tasks
// claimable appends a row to the changes table (a cheap sequence of
// changes); every node polls the rows past the last one it read at a short
// interval (PollInterval, 20 ms by default). See notify.go.
//
// Durability: a commit is durable when the server is configured so
// (innodb_flush_log_at_trx_commit = 1, the default); InnoDB group-commits
// concurrent transactions, one log flush for many.
package mysqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Config configures a Store.
type Config struct {
	// URL is mysql://user:pass@host:3306/db (mariadb:// alike). Query
	// parameters: tls (true, skip-verify, preferred or false).
	URL string
	// Database, when set, replaces the URL's database (tests).
	Database string
	// NodeID names this node in the change sequence, so that its own
	// changes are not echoed back to it (see Subscribe).
	NodeID string
	// MaxConns caps the connection pool (default 16).
	MaxConns int
	// PollInterval is how often Subscribe reads the change sequence
	// (default 20 ms).
	PollInterval time.Duration
	// Logger receives the store's warnings (default slog.Default()).
	Logger *slog.Logger
	// Cost, when set, counts the store's statements and round trips.
	Cost *storecost.Counter
}

// Store is the MySQL/MariaDB implementation of store.Store.
type Store struct {
	cfg     Config
	db      *sql.DB
	r       dbq // reads outside transactions
	log     *slog.Logger
	kinds   sync.Map // kinds known to exist
	closed  chan struct{}
	closeMu sync.Once
	// reports queue for the completer (group.go), which ends at Close.
	reports    chan *report
	completers sync.WaitGroup
	drained    chan struct{} // closed once Close answered the queued reports
}

var _ store.Store = (*Store)(nil)

// connectTimeout bounds the opening of a store (an unreachable server
// fails within it).
const connectTimeout = 8 * time.Second

// New connects to the database of cfg.URL, migrates it forward and returns
// the store. A database written by a newer Rota is refused.
func New(ctx context.Context, cfg Config) (*Store, error) {
	mc, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Database != "" {
		mc.DBName = cfg.Database
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 16
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := setSession(ctx, mc); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s: %w", connectTimeout, err)
		}
		return nil, fmt.Errorf("mysqlstore: connect to %s: %w", Redact(cfg.URL), err)
	}
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: open %s: %w", Redact(cfg.URL), err)
	}
	db.SetMaxOpenConns(cfg.MaxConns)
	db.SetMaxIdleConns(cfg.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysqlstore: %s: %w", Redact(cfg.URL), err)
	}
	s := &Store{cfg: cfg, db: db, r: dbq{db: db, cost: cfg.Cost}, log: cfg.Logger, closed: make(chan struct{}),
		reports: make(chan *report, 4*maxGroup), drained: make(chan struct{})}
	for range completers {
		s.completers.Go(s.completer)
	}
	return s, nil
}

// ParseURL reads a mysql:// or mariadb:// URL into a driver configuration
// (without the session settings the store adds).
func ParseURL(raw string) (*mysql.Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: bad URL %s: %w", Redact(raw), err)
	}
	if u.Scheme != "mysql" && u.Scheme != "mariadb" {
		return nil, fmt.Errorf("mysqlstore: bad URL %s: the scheme must be mysql:// or mariadb://", Redact(raw))
	}
	mc := mysql.NewConfig()
	mc.Net = "tcp"
	mc.Addr = u.Host
	if u.Port() == "" {
		mc.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	if u.User != nil {
		mc.User = u.User.Username()
		mc.Passwd, _ = u.User.Password()
	}
	mc.DBName = strings.TrimPrefix(u.Path, "/")
	if mc.DBName == "" {
		return nil, fmt.Errorf("mysqlstore: bad URL %s: it names no database (mysql://user:pass@host:3306/db)", Redact(raw))
	}
	if tls := u.Query().Get("tls"); tls != "" {
		mc.TLSConfig = tls
	}
	mc.Timeout = 5 * time.Second
	mc.ReadTimeout = 60 * time.Second
	mc.WriteTimeout = 60 * time.Second
	mc.InterpolateParams = true // one round trip per statement
	mc.MultiStatements = false
	return mc, nil
}

// setSession probes the server's flavour and sets the session variables
// every connection of the pool starts with: ANSI quotes (so that the SQL
// shared with the other stores reads alike), no backslash escapes, strict
// mode, READ COMMITTED and a short lock wait.
func setSession(ctx context.Context, mc *mysql.Config) error {
	probe := *mc
	probe.Params = nil
	db, err := sql.Open("mysql", probe.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	var version string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return err
	}
	isolation := "transaction_isolation" // MySQL 8
	if strings.Contains(strings.ToLower(version), "mariadb") {
		isolation = "tx_isolation"
	}
	mc.Params = map[string]string{
		"sql_mode":                 "'ANSI_QUOTES,NO_BACKSLASH_ESCAPES,STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'",
		isolation:                  "'READ-COMMITTED'",
		"innodb_lock_wait_timeout": "10",
		"time_zone":                "'+00:00'",
	}
	return nil
}

// Redact hides the password of a URL for messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i {
			return raw[:i+3] + "***" + raw[j:]
		}
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
		return strings.Replace(u.String(), ":xxxxx@", ":***@", 1)
	}
	return u.String()
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int {
	names, _ := fs.Glob(migrationFS, "migrations/*.sql")
	return len(names)
}

// migrate applies the migrations the database lacks, under a named lock so
// that nodes starting together migrate once.
func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('rota_migrate_', DATABASE()), 30)`).Scan(&got); err != nil {
		return fmt.Errorf("lock for the migration: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `DO RELEASE_LOCK(CONCAT('rota_migrate_', DATABASE()))`)
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS rota_migration (version INT NOT NULL PRIMARY KEY,
		name VARCHAR(256) NOT NULL, applied_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))`); err != nil {
		return fmt.Errorf("create migration table: %w", err)
	}
	var have int
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM rota_migration`).Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	names, err := store.PendingMigrations(migrationFS, "migrations", have)
	if err != nil {
		return err
	}
	for i, name := range names {
		body, err := migrationFS.ReadFile(name)
		if err != nil {
			return err
		}
		// DDL commits implicitly in MySQL: a migration is applied
		// statement by statement, then recorded.
		for _, stmt := range splitStatements(string(body)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO rota_migration (version, name) VALUES (?, ?)`, have+i+1, name); err != nil {
			return fmt.Errorf("record migration %s: %w", name, err)
		}
	}
	return nil
}

// splitStatements splits a migration at the lines holding only ";".
func splitStatements(body string) []string {
	var out []string
	for _, part := range strings.Split(body, "\n;") {
		if s := strings.TrimSpace(stripComments(part)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// stripComments drops the lines that are only a comment.
func stripComments(s string) string {
	lines := strings.Split(s, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return unavailable(fmt.Errorf("mysqlstore: ping: %w", err))
	}
	return nil
}

// PingWrite implements store.Store: it records now in the leader table's
// probe row (id 0), which no election reads.
func (s *Store) PingWrite(ctx context.Context, now time.Time) error {
	return s.tx(ctx, "write probe", func(t *txn) error {
		_, err := t.exec(`INSERT INTO leader (id, node_id, term, expires_at) VALUES (0, 'write-probe', 0, ?)
			ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)`, ms(now))
		return err
	})
}

// Close implements store.Store. It is idempotent.
func (s *Store) Close() error {
	var err error
	s.closeMu.Do(func() {
		close(s.closed)
		s.completers.Wait()
		// Reports queued before Close are answered (errClosed).
		defer close(s.drained)
		for {
			select {
			case r := <-s.reports:
				s.completeGroup([]*report{r})
				close(r.done)
				continue
			default:
			}
			break
		}
		err = s.db.Close()
	})
	return err
}

// unavailable wraps err in a rota.ErrUnavailable error (HTTP 503) when it
// says the server cannot be reached or is out of resources. Other errors
// are returned as they are.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	var re *rota.Error
	if errors.As(err, &re) {
		return err
	}
	var me *mysql.MySQLError
	var ne net.Error
	switch {
	case errors.As(err, &me):
		switch me.Number {
		case 1021, 1114, 1037, 1041, 1205, 1040, 1203, 3024, 1969, 1290, 1792, 1836,
			1053, 1077, 1135, 1152, 1158, 1159, 1160, 1161, 1317, 1927, 4031:
			// disk full, table full, out of memory, lock wait timeout, too
			// many connections, statement timeout, read only; the server
			// shutting down, out of threads, a network error, the query or
			// connection killed (KILL), the session timed out...
		default:
			return err
		}
	case errors.As(err, &ne), errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, driverBadConn), strings.Contains(err.Error(), "connection refused"):
	default:
		return err
	}
	return fmt.Errorf("%w: %w", rota.Errorf(rota.CodeUnavailable, "the store is unavailable: %v", err), err)
}
