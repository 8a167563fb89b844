package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the River job of every case; like Rota's payload it carries
// the submit and due instants.
type noopArgs struct {
	SentNS int64 `json:"s"`
	DueNS  int64 `json:"d,omitempty"`
	Warmup bool  `json:"w,omitempty"` // sent before the measure (--latency-warmup)
}

func (noopArgs) Kind() string { return "peers_noop" }

// noopWorker calls fn with the job's args and the instant Work started.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	fn func(a noopArgs, started time.Time)
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	w.fn(job.Args, time.Now())
	return nil
}

// riverChild is the --river-child process: it reads a caseSpec from
// stdin, runs it and writes its caseResult to stdout as JSON.
func riverChild(ctx context.Context) error {
	var spec caseSpec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		return fmt.Errorf("river child: read the case: %w", err)
	}
	run := runRiver
	if spec.System == "asynq" {
		run = runAsynq
	}
	res, err := run(ctx, spec)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// runRiver runs one case on a fresh database: a PostgreSQL schema, or a
// SQLite file for the river-sqlite system.
func runRiver(ctx context.Context, spec caseSpec) (res caseResult, err error) {
	open := openRiverPG
	if spec.System == "river-sqlite" {
		open = openRiverSQLite
	}
	b, closeDB, err := open(ctx, spec)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	r := &riverRun{spec: spec, p: spec.P, db: b, w: &window{proc: os.Getpid(), pg: b.backends}}
	defer r.close()
	switch spec.Scenario {
	case "submit-single":
		res.Metrics, err = r.submit(ctx, 1, spec.P.SubmitTasks)
	case "submit-batch":
		res.Metrics, err = r.submit(ctx, spec.P.BatchSize, spec.P.BatchTasks)
	case "e2e":
		res.Metrics, err = r.e2e(ctx)
	case "latency":
		res.Metrics, err = r.latency(ctx)
	case "delayed":
		res.Metrics, err = r.delayed(ctx)
	default:
		err = fmt.Errorf("unknown scenario %q", spec.Scenario)
	}
	if err != nil {
		return res, err
	}
	res.Usage = r.w.end()
	res.PeakRSSKiB, err = peakRSS(os.Getpid())
	return res, err
}

// riverDB is the database of one River case, behind River's driver for it.
type riverDB struct {
	// newClient makes a River client on the database.
	newClient func(cfg *river.Config) (riverClient, error)
	// scalar runs a query of one row and one column into dst.
	scalar func(ctx context.Context, q string, dst any) error
	// backends lists the PostgreSQL backends of the case (none for SQLite).
	backends func() []int
}

// riverClient is what the cases use of a river.Client, whatever its
// driver's transaction type.
type riverClient interface {
	insert(ctx context.Context, args noopArgs, opts *river.InsertOpts) error
	insertMany(ctx context.Context, ps []river.InsertManyParams) error
	start(ctx context.Context) error
	stop(ctx context.Context) error
	id() string
}

// clientOf adapts a river.Client of any driver to riverClient.
type clientOf[TTx any] struct{ c *river.Client[TTx] }

func (a clientOf[TTx]) insert(ctx context.Context, args noopArgs, opts *river.InsertOpts) error {
	_, err := a.c.Insert(ctx, args, opts)
	return err
}

func (a clientOf[TTx]) insertMany(ctx context.Context, ps []river.InsertManyParams) error {
	_, err := a.c.InsertMany(ctx, ps)
	return err
}

func (a clientOf[TTx]) start(ctx context.Context) error { return a.c.Start(ctx) }
func (a clientOf[TTx]) stop(ctx context.Context) error  { return a.c.Stop(ctx) }
func (a clientOf[TTx]) id() string                      { return a.c.ID() }

// openRiverPG makes a fresh schema for a River case on PostgreSQL: River's
// migrations are applied into it, and the pool's search_path is set to it.
func openRiverPG(ctx context.Context, spec caseSpec) (*riverDB, func() error, error) {
	pcfg, err := pgxpool.ParseConfig(spec.P.PG)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres URL: %w", err)
	}
	pcfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{spec.Schema}.Sanitize()
	pcfg.ConnConfig.RuntimeParams["application_name"] = spec.AppName
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, err
	}
	schema := pgx.Identifier{spec.Schema}.Sanitize()
	closeDB := func() error {
		defer pool.Close()
		_, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		pool.Close()
		return nil, nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: spec.Schema})
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("river migrate: %w", err), closeDB())
	}
	return &riverDB{
		newClient: func(cfg *river.Config) (riverClient, error) {
			c, err := river.NewClient(riverpgxv5.New(pool), cfg)
			return clientOf[pgx.Tx]{c}, err
		},
		scalar:   func(ctx context.Context, q string, dst any) error { return pool.QueryRow(ctx, q).Scan(dst) },
		backends: func() []int { return backendPIDs(ctx, pool, spec.AppName) },
	}, closeDB, nil
}

type riverRun struct {
	spec    caseSpec
	p       params
	db      *riverDB
	client  riverClient
	started bool
	w       *window
}

// open creates the River client: insert-only when fn is nil, else with
// spec.Workers workers running fn (started, with spec.Tuned fetch
// settings).
func (r *riverRun) open(ctx context.Context, fn func(noopArgs, time.Time)) error {
	cfg := &river.Config{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if fn != nil {
		workers := river.NewWorkers()
		river.AddWorker(workers, &noopWorker{fn: fn})
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: r.spec.Workers}}
		if r.spec.Tuned {
			cfg.FetchCooldown = time.Millisecond
			cfg.FetchPollInterval = 50 * time.Millisecond
		}
	}
	c, err := r.db.newClient(cfg)
	if err != nil {
		return err
	}
	r.client = c
	if fn == nil {
		return nil
	}
	if err := c.start(ctx); err != nil {
		return err
	}
	r.started = true
	return r.awaitLeader(ctx, 20*time.Second)
}

// awaitLeader waits until this client is River's elected leader: the
// leader runs the maintenance services, among them the scheduler that makes
// delayed jobs available. A long-running River deployment has a leader, so
// the measure starts once this fresh one has one.
func (r *riverRun) awaitLeader(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var leader string
		err := r.db.scalar(ctx, `SELECT leader_id FROM river_leader`, &leader)
		if err == nil && leader == r.client.id() {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("river leader: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("river client not elected leader within %s", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *riverRun) close() {
	if r.started {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.client.stop(ctx)
	}
}

// submit measures jobs/s inserted from p.Clients concurrent clients, with
// Insert (batch 1) or InsertMany of batch.
func (r *riverRun) submit(ctx context.Context, batch, n int) ([]metric, error) {
	if err := r.open(ctx, nil); err != nil {
		return nil, err
	}
	var next atomic.Int64
	r.w.begin()
	start := time.Now()
	err := parallel(r.p.Clients, func(int) error {
		for {
			i := int(next.Add(int64(batch))) - batch
			if i >= n {
				return nil
			}
			if batch == 1 {
				if err := r.client.insert(ctx, noopArgs{SentNS: time.Now().UnixNano()}, nil); err != nil {
					return err
				}
				continue
			}
			ps := make([]river.InsertManyParams, min(batch, n-i))
			for j := range ps {
				ps[j] = river.InsertManyParams{Args: noopArgs{SentNS: time.Now().UnixNano()}}
			}
			if err := r.client.insertMany(ctx, ps); err != nil {
				return err
			}
		}
	})
	d := time.Since(start)
	r.w.end()
	if err != nil {
		return nil, err
	}
	return []metric{throughput("tasks accepted", n, d)}, nil
}

// e2e: n no-op jobs inserted with InsertMany in batches of p.E2EBatch from
// p.E2EInserters inserters while the workers run. Work counts starts; once
// all started, the table is polled until all are completed (River's
// completer marks jobs completed asynchronously, in batches).
func (r *riverRun) e2e(ctx context.Context) ([]metric, error) {
	n := r.p.E2ETasks
	rec := newRecorder(n)
	if err := r.open(ctx, func(noopArgs, time.Time) { rec.add(0) }); err != nil {
		return nil, err
	}
	time.Sleep(r.p.Warmup)
	r.w.begin()
	start := time.Now()
	var next atomic.Int64
	b := r.p.E2EBatch
	err := parallel(r.p.E2EInserters, func(int) error {
		for {
			i := int(next.Add(int64(b))) - b
			if i >= n {
				return nil
			}
			ps := make([]river.InsertManyParams, min(b, n-i))
			for j := range ps {
				ps[j] = river.InsertManyParams{Args: noopArgs{}}
			}
			if err := r.client.insertMany(ctx, ps); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if err := rec.wait(10 * time.Minute); err != nil {
		return nil, err
	}
	for {
		var completed int
		if err := r.db.scalar(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`, &completed); err != nil {
			return nil, err
		}
		if completed >= n {
			break
		}
		if time.Since(start) > 11*time.Minute {
			return nil, fmt.Errorf("only %d of %d jobs completed", completed, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := time.Since(start)
	r.w.end()
	return []metric{throughput("tasks done", n, d)}, nil
}

// latency: single Inserts at p.Rate/s for p.LatencyFor to idle workers.
func (r *riverRun) latency(ctx context.Context) ([]metric, error) {
	total := int(float64(r.p.Rate) * r.p.LatencyFor.Seconds())
	rec, warm := newRecorder(total), newRecorder(warmupTasks(r.p))
	if err := r.open(ctx, func(a noopArgs, started time.Time) {
		if a.Warmup {
			warm.add(0)
			return
		}
		rec.add(started.Sub(time.Unix(0, a.SentNS)))
	}); err != nil {
		return nil, err
	}
	time.Sleep(r.p.Warmup)
	err := paced(r.p.Rate, warmupTasks(r.p), func() error {
		return r.client.insert(ctx, noopArgs{Warmup: true}, nil)
	})
	if err != nil {
		return nil, err
	}
	if err := warm.wait(time.Minute); err != nil {
		return nil, err
	}
	r.w.begin()
	err = paced(r.p.Rate, total, func() error {
		return r.client.insert(ctx, noopArgs{SentNS: time.Now().UnixNano()}, nil)
	})
	if err != nil {
		return nil, err
	}
	if err := rec.wait(time.Minute); err != nil {
		return nil, err
	}
	r.w.end()
	return percentiles(latencyLabel(r.p), rec.durations()), nil
}

// delayed: p.Delayed jobs with ScheduledAt at exact instants over
// p.DelayedOver, inserted with InsertMany of 1000.
func (r *riverRun) delayed(ctx context.Context) ([]metric, error) {
	n := r.p.Delayed
	rec := newRecorder(n)
	if err := r.open(ctx, func(a noopArgs, started time.Time) { rec.add(started.Sub(time.Unix(0, a.DueNS))) }); err != nil {
		return nil, err
	}
	time.Sleep(r.p.Warmup)
	r.w.begin()
	first, step := dueTimes(r.p)
	ps := make([]river.InsertManyParams, n)
	for i := range ps {
		due := first.Add(time.Duration(i) * step)
		ps[i] = river.InsertManyParams{Args: noopArgs{DueNS: due.UnixNano()}, InsertOpts: &river.InsertOpts{ScheduledAt: due}}
	}
	for i := 0; i < n; i += 1000 {
		if err := r.client.insertMany(ctx, ps[i:min(n, i+1000)]); err != nil {
			return nil, err
		}
	}
	if time.Now().After(first) {
		return nil, errors.New("inserting the delayed jobs took longer than their 2 s lead")
	}
	if err := rec.wait(r.p.DelayedOver + time.Minute); err != nil {
		return nil, err
	}
	r.w.end()
	return percentiles(lateLabel, rec.durations()), nil
}
