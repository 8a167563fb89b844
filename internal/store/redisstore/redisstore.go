// Package redisstore is the Redis implementation of store.Store, on Redis
// 7 through github.com/redis/go-redis/v9.
//
// # Model
//
// Every record (task, kind, worker, node, schedule, token, key holder) is
// a hash with a version "v" and a JSON body "d". Following the lean store
// model, a task's hash carries its current run(s): a claim, a heartbeat
// and a report each rewrite that one hash; a finished run moves to the
// task's history list (h:<id>) only when a newer attempt replaces it, and
// a run id is "<task id>.<attempt>", so a report finds its task by key.
// Multi-worker tasks keep all their runs in the hash.
//
// Secondary structures are sorted sets, maintained with the record in the
// same script and removed with it (TaskCleanup), so they are bounded by
// the records: ready work per kind and level scored by RunAt (pinned tasks
// apart), which also holds delayed work (score in the future); running
// runs scored by expiry; tasks by status and by kind+status (lists and
// counts); finished tasks per kind by end time (retention).
//
// # Atomicity
//
// A method reads what it needs, computes the new state in Go with the
// rules shared by every backend (store.Settle, store.WeightedPick, ...)
// and applies it with ONE script, commit.lua: it checks that no record
// read has changed version since (optimistic concurrency; else the method
// runs again), checks the fencing term for leader duties, then writes the
// records, the index entries and the wake-up (PUBLISH) at once. Leader
// election is such a change too: the leader hash (node, term, lease end)
// decided by store.ElectLeader; its term is the fencing token, checked by
// commit.lua for leader duties. The event log has a script of its own
// (events.lua: consecutive ids), and heartbeats and reports read with
// runread.lua. See scripts/*.lua for each script's contract.
//
// # Durability
//
// Redis acknowledges a write once it is in memory. Only with
// appendonly yes and appendfsync always is every acknowledged write on
// disk before the reply, as on the SQL stores; New reads both settings
// and, otherwise, logs a warning at every start and reports
// Durability() "relaxed": a crash of Redis (not of Rota) can then lose the
// writes of the last second (everysec) or more (no, or no AOF: everything
// since the last RDB snapshot).
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// DefaultPrefix is the key prefix without ?prefix= in the URL.
const DefaultPrefix = "rota:"

// Durability values (Durability()).
const (
	Durable = "durable" // appendonly yes, appendfsync always
	Relaxed = "relaxed" // anything else: a Redis crash can lose acknowledged writes
)

// Config configures a Store.
type Config struct {
	// URL is redis://[user:pass@]host:port/db or rediss:// (TLS), with an
	// optional ?prefix= (default DefaultPrefix).
	URL    string
	NodeID string // this node: its own notifications are not echoed back
	Logger *slog.Logger
	// Cost, when set, counts commands (Statements), round trips and
	// commits (commit scripts) (package storecost).
	Cost *storecost.Counter
	// ConnectTimeout bounds the first contact (default 10 s).
	ConnectTimeout time.Duration
}

// Store is the Redis implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	cfg        Config
	rdb        *redis.Client
	p          string // key prefix
	log        *slog.Logger
	durability string
	channel    string
	closeOnce  sync.Once
	closed     chan struct{}
	kinds      sync.Map // kind name → struct{}: kinds known to exist (never deleted)
	// caps: kind name → MaxRunning as last read by a claim or set here, so
	// that a run's end wakes the nodes waiting under the cap.
	caps sync.Map
}

var _ store.Store = (*Store)(nil)

// New connects to cfg.URL and reads the server's durability settings. An
// unreachable server is an error naming the URL (without its password)
// within ConnectTimeout.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	opts, prefix, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opts)
	if cfg.Cost != nil {
		rdb.AddHook(costHook{c: cfg.Cost})
	}
	s := &Store{cfg: cfg, rdb: rdb, p: prefix, log: cfg.Logger, channel: prefix + "notify", closed: make(chan struct{})}
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := rdb.Ping(cctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redisstore: cannot reach %s: %w", Redact(cfg.URL), err)
	}
	if s.durability, err = s.readDurability(cctx); err != nil {
		rdb.Close()
		return nil, err
	}
	if err := s.initEvents(cctx, time.Now()); err != nil {
		rdb.Close()
		return nil, s.wrap("open", err)
	}
	return s, nil
}

// ParseURL reads a redis:// or rediss:// URL: the client options and the
// key prefix (?prefix=, default DefaultPrefix).
func ParseURL(raw string) (*redis.Options, string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return nil, "", fmt.Errorf("redisstore: %s: want redis://host:port/db or rediss://host:port/db", Redact(raw))
	}
	q := u.Query()
	prefix := DefaultPrefix
	if q.Has("prefix") {
		prefix = q.Get("prefix")
		q.Del("prefix")
	}
	u.RawQuery = q.Encode()
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: %s: %w", Redact(raw), err)
	}
	if u.Scheme == "rediss" && opts.TLSConfig == nil {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	opts.DialTimeout = 5 * time.Second
	opts.MaxRetries = 1
	return opts, prefix, nil
}

// Redact is the URL without its password, for messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// readDurability reads appendonly and appendfsync and warns unless every
// acknowledged write is on disk.
func (s *Store) readDurability(ctx context.Context) (string, error) {
	vals, err := s.rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		// Managed Redis services may refuse CONFIG: say what we cannot tell.
		s.log.Warn("redisstore: cannot read appendonly/appendfsync (CONFIG GET refused): durability is relaxed: a Redis crash may lose acknowledged tasks", "err", err)
		return Relaxed, nil
	}
	if vals["appendonly"] == "yes" && vals["appendfsync"] == "always" {
		return Durable, nil
	}
	s.log.Warn("redisstore: Redis runs without appendonly yes + appendfsync always: durability is relaxed: "+
		"a crash of Redis can lose acknowledged tasks and reports (up to ~1 s with everysec, everything since the last snapshot without AOF)",
		"appendonly", vals["appendonly"], "appendfsync", vals["appendfsync"])
	return Relaxed, nil
}

// Durability is "durable" when Redis writes every acknowledged change to
// disk first (appendonly yes, appendfsync always), else "relaxed".
func (s *Store) Durability() string { return s.durability }

// Close releases the connections.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.rdb.Close()
	})
	return err
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	return s.wrap("ping", s.rdb.Ping(ctx).Err())
}

// PingWrite implements store.Store: it records now on a key of its own.
func (s *Store) PingWrite(ctx context.Context, now time.Time) error {
	return s.wrap("ping write", s.rdb.Set(ctx, s.p+"pingwrite", ms(now), 0).Err())
}

// wrap turns a client error into one that carries meaning: rota errors
// pass through; connection trouble, a busy or read-only server and out of
// memory are rota.ErrUnavailable.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var re *rota.Error
	if errors.As(err, &re) || errors.Is(err, store.ErrFenced) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	var ne net.Error
	msg := err.Error()
	if errors.As(err, &ne) || errors.Is(err, redis.ErrClosed) || errors.Is(err, net.ErrClosed) ||
		strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "BUSY") || strings.HasPrefix(msg, "READONLY") ||
		strings.HasPrefix(msg, "OOM") || strings.HasPrefix(msg, "MISCONF") || strings.Contains(msg, "EOF") ||
		strings.Contains(msg, "connection refused") {
		return fmt.Errorf("redisstore: %s: %w: %w", op, rota.Errorf(rota.CodeUnavailable, "redis is unavailable"), err)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

// ms and tm are the package's short names for store.Millis and
// store.FromMillis.
func ms(t time.Time) int64 { return store.Millis(t) }

func tm(v int64) time.Time { return store.FromMillis(v) }

// costHook counts commands and round trips for storecost.
type costHook struct{ c *storecost.Counter }

func (h costHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h costHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		d := storecost.Counts{Statements: 1, RoundTrips: 1}
		if isCommit(cmd) {
			d.Commits = 1
		}
		h.c.Add(ctx, d)
		return next(ctx, cmd)
	}
}

func (h costHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		d := storecost.Counts{Statements: int64(len(cmds)), RoundTrips: 1}
		for _, c := range cmds {
			if isCommit(c) {
				d.Commits++
			}
		}
		h.c.Add(ctx, d)
		return next(ctx, cmds)
	}
}

// isCommit: a script run is a commit (each is one AOF write), but for
// runread.lua, which only reads.
func isCommit(cmd redis.Cmder) bool {
	n := cmd.Name()
	if n != "evalsha" && n != "eval" {
		return false
	}
	args := cmd.Args()
	return len(args) < 2 || (args[1] != runReadScript.Hash() && args[1] != runReadSrc)
}

// DropPrefix deletes every key of prefix in the Redis at url (tests and
// `rota bench` clean up after themselves with it).
func DropPrefix(ctx context.Context, url, prefix string) error {
	opts, _, err := ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(opts)
	defer c.Close()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("redisstore: drop %s: %w", prefix, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			return fmt.Errorf("redisstore: drop %s: %w", prefix, err)
		}
		keys = keys[n:]
	}
	return nil
}
