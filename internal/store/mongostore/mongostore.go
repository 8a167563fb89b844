// Package mongostore is the MongoDB backend of store.Store
// (go.mongodb.org/mongo-driver/v2), a full peer of pgstore: several Rota
// nodes may share one database.
//
// # Model
//
// A task is one document of the tasks collection that carries its runs
// (the lean model of the SQL stores taken one step further): the current
// run and, once superseded, the earlier attempts live in the task
// document's runs array, so a claim, a heartbeat and a report are each ONE
// write of that one document, and a retry costs no extra write at all.
// The array is bounded by the task's retries and workers (a document may
// hold 16 MB, tens of thousands of runs). Run ids are the opaque ids the
// caller makes (TaskClaimParams.NewRunID); the task of a run is found
// through the rids array (every run id of the task), which is indexed.
//
// # Atomicity
//
// Multi-document transactions need a replica set (MongoDB) and FerretDB v1
// has none, so this store uses no transactions on any topology: every state
// change that must be atomic is a change of ONE document, made as a
// compare-and-set on the document's version v (read, compute in Go with
// the shared rules of package store, replace where _id and v still match;
// retry when another writer won; see replaceVersioned for FerretDB, whose
// conditional writes are not atomic). Claims of one kind are serialized
// by a short lock, a document of the cas collection (as PostgreSQL
// serializes them on the kind's row): it guards the kind's running cap,
// rate bucket and the position of the weighted round (kind_state).
// Uniqueness (a task key, a schedule's
// fire time) is an _id of its own collection. Changes that span documents
// (a dependency's end reaching its dependents, TaskInsertMany) are
// written in an order that a retry or the reaper can finish: see each
// method.
//
// # Durability
//
// Unless the URL sets a write concern, writes are acknowledged once a
// majority has them in its journal (w=majority, j=true): acknowledged
// means durable, as on the other stores.
//
// # Wake-ups
//
// Every change that makes tasks claimable bumps a per-kind counter
// document (collection notify). Subscribe watches that collection with a
// change stream when the server offers them (a replica set or sharded
// cluster), else polls it every PollInterval (FerretDB, a standalone
// mongod).
package mongostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// Config opens a Store.
type Config struct {
	// URL is a mongodb:// or mongodb+srv:// URL naming the database
	// (mongodb://host:27017/rota); without a database, "rota".
	URL    string
	NodeID string // this node's id ("" outside a server)
	Logger *slog.Logger
	// PollInterval is the wake-up poll of a server without change streams
	// (default 25 ms).
	PollInterval time.Duration
	// ConnectTimeout bounds the first contact (default 10 s).
	ConnectTimeout time.Duration
	// Monitor, when set, sees every command sent (cost tests).
	Monitor *event.CommandMonitor
	// Cost, when set, counts every command as a statement and a round
	// trip (a write also as a commit), as the work of its context.
	Cost *storecost.Counter
}

// Store is a store.Store on MongoDB.
type Store struct {
	client  *mongo.Client
	db      *mongo.Database
	tasks   *mongo.Collection
	kinds   *mongo.Collection
	keys    *mongo.Collection
	workers *mongo.Collection
	nodes   *mongo.Collection
	meta    *mongo.Collection
	notify  *mongo.Collection
	events  *mongo.Collection
	tokens  *mongo.Collection
	audit   *mongo.Collection
	scheds  *mongo.Collection
	fires   *mongo.Collection
	cas     *mongo.Collection
	state   *mongo.Collection
	ready   *mongo.Collection

	log     *slog.Logger
	nodeID  string
	poll    time.Duration
	streams bool // the server offers change streams
	tickets bool // conditional updates are not atomic (FerretDB): writes take tickets (see replaceVersioned)

	mu      sync.Mutex
	known   map[string]bool        // kinds known to exist (never deleted)
	claimMu map[string]*sync.Mutex // per kind: this process's claims take turns
	runTask map[string]string      // run id → task id of the runs this node handed out

	closeOnce sync.Once
	closed    chan struct{}
}

var _ store.Store = (*Store)(nil)

// Redact returns u without its password, for messages.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable mongodb URL)"
	}
	return p.Redacted()
}

// New connects to the database of cfg.URL, checks it answers within
// ConnectTimeout (an error naming the URL, without its password,
// otherwise) and creates the indexes it needs.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 25 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "mongodb" && u.Scheme != "mongodb+srv") {
		return nil, fmt.Errorf("mongostore: %s is not a mongodb:// URL", Redact(cfg.URL))
	}
	dbName := strings.Trim(u.Path, "/")
	if dbName == "" {
		dbName = "rota"
	}
	opts := options.Client().ApplyURI(cfg.URL).SetServerSelectionTimeout(cfg.ConnectTimeout).
		SetConnectTimeout(cfg.ConnectTimeout).SetRetryWrites(false)
	if opts.WriteConcern == nil {
		// Acknowledged means durable, as on the other stores: a majority
		// of the replica set (the server alone when standalone) has the
		// write in its journal.
		journaled := true
		opts.SetWriteConcern(&writeconcern.WriteConcern{W: "majority", Journal: &journaled})
	}
	gate := newWriteGate(cfg.Monitor, cfg.Cost)
	opts.SetMonitor(gate.monitor())
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("mongostore: connect to %s: %w", Redact(cfg.URL), err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := client.Ping(pctx, readpref.Primary()); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongostore: %s unreachable: %w", Redact(cfg.URL), err)
	}
	s := newStore(client, client.Database(dbName), cfg)
	s.tickets = isFerretDB(pctx, s.db)
	gate.on.Store(s.tickets && len(opts.Compressors) == 0)
	s.streams = !s.tickets && offersChangeStreams(pctx, s.db) // FerretDB v1 has no change streams
	// FerretDB v1 uses no index but _id's (its queries filter in Go
	// after reading the whole collection) while every write of a
	// document recomputes each index's JSON expressions: on FerretDB the
	// indexes cost and never serve.
	if !s.tickets {
		if err := s.ensureIndexes(pctx); err != nil {
			// Indexes only speed queries up.
			s.log.Warn("mongostore: indexes not (re)created", "url", Redact(cfg.URL), "err", err)
		}
	}
	if err := s.backfillReady(ctx); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongostore: ready entries of %s: %w", Redact(cfg.URL), err)
	}
	return s, nil
}

func newStore(client *mongo.Client, db *mongo.Database, cfg Config) *Store {
	return &Store{
		client: client, db: db,
		tasks: db.Collection("tasks"), kinds: db.Collection("kinds"), keys: db.Collection("task_keys"),
		workers: db.Collection("workers"), nodes: db.Collection("nodes"), meta: db.Collection("meta"),
		notify: db.Collection("notify"), events: db.Collection("events"), tokens: db.Collection("tokens"),
		audit: db.Collection("audit"), scheds: db.Collection("schedules"), fires: db.Collection("schedule_fires"),
		cas: db.Collection("cas"), state: db.Collection("kind_state"), ready: db.Collection("ready"),
		log: cfg.Logger, nodeID: cfg.NodeID, poll: cfg.PollInterval,
		known: map[string]bool{}, claimMu: map[string]*sync.Mutex{}, runTask: map[string]string{}, closed: make(chan struct{}),
	}
}

// offersChangeStreams reports whether the server is a replica set member
// or a mongos (change streams need an oplog); FerretDB answers neither.
func offersChangeStreams(ctx context.Context, db *mongo.Database) bool {
	var hello bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return false
	}
	if _, ok := hello["setName"]; ok {
		return true
	}
	return hello["msg"] == "isdbgrid"
}

// isFerretDB reports whether the server is FerretDB, whose conditional
// updates are not atomic (see replaceVersioned).
func isFerretDB(ctx context.Context, db *mongo.Database) bool {
	var info bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return false
	}
	_, ok := info["ferretdbVersion"]
	return ok
}

// ensureIndexes creates the indexes of the hot paths: a claim's candidates
// (ready entries) by kind, level and due time; a run's task by run id; the reaper's
// running tasks by expiry; a worker's tasks.
func (s *Store) ensureIndexes(ctx context.Context) error {
	idx := func(keys ...string) mongo.IndexModel {
		d := bson.D{}
		for _, k := range keys {
			d = append(d, bson.E{Key: k, Value: 1})
		}
		return mongo.IndexModel{Keys: d}
	}
	sets := []struct {
		c  *mongo.Collection
		ms []mongo.IndexModel
	}{
		{s.tasks, []mongo.IndexModel{idx("kind", "avail", "level", "run_at"), idx("rids"), idx("exp"), idx("ws"),
			idx("sched", "fire"), idx("deps")}},
		{s.ready, []mongo.IndexModel{{Keys: bson.D{{Key: "k", Value: 1}, {Key: "l", Value: 1}, {Key: "p", Value: -1},
			{Key: "at", Value: 1}, {Key: "t", Value: 1}}}}},
		{s.audit, []mongo.IndexModel{idx("at")}},
		{s.events, []mongo.IndexModel{idx("at")}},
		{s.tokens, []mongo.IndexModel{idx("hash")}},
	}
	for _, set := range sets {
		for _, m := range set.ms { // one at a time: FerretDB v1 panics on some batches
			if _, err := set.c.Indexes().CreateOne(ctx, m); err != nil {
				return fmt.Errorf("create index of %s: %w", set.c.Name(), err)
			}
		}
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = s.client.Disconnect(ctx)
	})
	return err
}

// Drop deletes the store's database (tests).
func (s *Store) Drop(ctx context.Context) error { return s.db.Drop(ctx) }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx, readpref.Primary()); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// PingWrite implements store.Store: it records now in the meta document
// "ping".
func (s *Store) PingWrite(ctx context.Context, now time.Time) error {
	_, err := s.meta.UpdateOne(ctx, bson.D{{Key: "_id", Value: "ping"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "at", Value: store.Millis(now)}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return unavailable("write check", err)
	}
	return nil
}

// unavailable wraps a driver error of a lost server as rota.ErrUnavailable.
func unavailable(what string, err error) error {
	return fmt.Errorf("mongostore: %s: %w: %w", what, rota.ErrUnavailable, err)
}

// wrap wraps a driver error of op; a network or selection error is
// rota.ErrUnavailable.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce mongo.CommandError
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.As(err, &ce) && ce.HasErrorLabel("NetworkError") ||
		errors.Is(err, mongo.ErrClientDisconnected) || strings.Contains(err.Error(), "server selection") {
		return unavailable(op, err)
	}
	return fmt.Errorf("mongostore: %s: %w", op, err)
}

// id is the filter of one document by _id.
func id(v any) bson.D { return bson.D{{Key: "_id", Value: v}} }
