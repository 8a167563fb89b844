package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Planner statistics of young tables.
//
// The store's connections use generic plans (force_generic_plan, see New):
// a statement is planned once per connection and the plan is kept until
// the statistics of a table it reads change. A plan made while a table is
// empty (a new schema, or the first seconds of a new installation) reads
// it with a sequential scan wherever the statement looks rows up by an
// array of ids (the grouped reports, fire batches: on an empty table a
// scan looks as cheap as the index), and goes on doing so after the table
// has grown. Measured on the e2e benchmark in a fresh schema: the lock and
// read statements of a group of ~400 reports took ~400 ms each once the
// tables held 100,000 rows, instead of 1–2 ms with the primary key.
// Autovacuum would analyze the tables, but it visits a database once a
// minute (autovacuum_naptime), so a new installation under load would run
// its first minute or more on plans for empty tables.
//
// The analyzer closes that gap: every analyzeEvery it reads the size of
// the store's busy tables and ANALYZEs those whose live rows grew to
// analyzeGrowth (4) times what they held when last analyzed (and number at
// least analyzeMinRows): a young table, at 100, 400, 1,600, 6,400… rows.
// ANALYZE invalidates the cached plans that read the table, so every
// connection plans again with the new statistics (warm.go plans the idle
// ones at once). A table that only changes (claims and reports update rows
// in place) keeps its plans: its size, not its churn, decides between a
// scan and an index. A large table that grows slowly is left to autovacuum
// (PostgreSQL scales a table's last counted rows by its current size when
// it plans, so a plan made at 10,000 rows holds at 1,000,000). In a
// cluster, an advisory lock lets one node at a time do it.
//
// Counting changes instead (an analysis once a table had changed by more
// rows than it held) analyzed every few hundred milliseconds, then every
// 2 s, for as long as a queue ran: each task's claim and end update its
// row twice. In the 500 tasks/s latency benchmark that was about a dozen
// ANALYZEs in 10 s, each followed by every pool connection planning each
// hot statement again on a request's path (11–28 ms each on the 2-core
// VM, in PostgreSQL's log): the slowest 1% of task starts waited for them.
//
// It looks often at small tables because a plan for a small table goes
// on scanning it as it grows: a generic plan prefers a sequential scan to
// ten primary-key probes while the table holds a few hundred rows. With a
// check every 2 s from 1,000 changed rows, the claim's start of runs and
// the grouped reports scanned tables of up to ~1,000 rows in the first
// seconds of a new schema (auto_explain in the 500 tasks/s latency
// benchmark: 16 of 45 sampled starts of runs, 2.7 ms each against 0.6 ms
// with the index; 8 of 93 reports, 1.1 against 0.26 ms). So a table of
// fewer than analyzeSmall rows is checked every analyzeEvery; a larger
// one, whose plans already use the indexes, every analyzeEveryLarge, so
// that a table of 50,000 rows that doubles in a second is not read (up to
// 30,000 sampled rows) twice a second.

const (
	analyzeEvery      = 500 * time.Millisecond
	analyzeGrowth     = 4
	analyzeMinRows    = 100
	analyzeSmall      = 5000
	analyzeEveryLarge = 2 * time.Second
)

// analyzedTables are the tables the analyzer watches.
var analyzedTables = []string{"tasks", "run_log", "schedules"}

// analyzer runs analyzeYoung every analyzeEvery until the store closes.
func (s *Store) analyzer() {
	defer close(s.analyzerDone)
	t := time.NewTicker(analyzeEvery)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-t.C:
		case <-s.closed:
			return
		}
		ctx, cancel := context.WithTimeout(s.life, time.Minute)
		large := tick%int(analyzeEveryLarge/analyzeEvery) == 0
		if _, err := s.analyzeYoung(ctx, large); err != nil && !s.isClosed() {
			s.log.Warn("pgstore: analyze young tables", "err", err)
		}
		cancel()
	}
}

// analyzeYoung analyzes the watched tables whose live rows grew to
// analyzeGrowth times what they held at their last analysis (small ones
// only, unless large), and returns their names.
func (s *Store) analyzeYoung(ctx context.Context, large bool) ([]string, error) {
	// The counters of these tables only (pg_stat_get_live_tuples): the
	// view pg_stat_user_tables computes every table of the database, tens
	// of milliseconds in a database of many schemas.
	rows, err := s.pool.Query(ctx, `SELECT c.relname, c.reltuples, pg_stat_get_live_tuples(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = ANY ($2) AND c.relkind = 'r'`, s.cfg.Schema, analyzedTables)
	if err != nil {
		return nil, fmt.Errorf("read table statistics: %w", err)
	}
	var due []string
	for rows.Next() {
		var (
			name   string
			tuples float32 // -1: never analyzed
			live   int64
		)
		if err := rows.Scan(&name, &tuples, &live); err != nil {
			rows.Close()
			return nil, err
		}
		if live >= analyzeMinRows && float64(live) >= analyzeGrowth*float64(tuples) && (large || tuples < analyzeSmall) {
			due = append(due, name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(due) == 0 {
		return nil, nil
	}
	// On a connection of its own: ANALYZE of a large table takes a good
	// fraction of a second, which the pool's few connections should not
	// give up.
	conn, err := pgx.ConnectConfig(ctx, s.connCfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtext('rota.analyze'), hashtext($1))`,
			s.cfg.Schema).Scan(&got); err != nil {
			return err
		}
		if !got {
			due = nil // another node is at it
			return nil
		}
		for _, name := range due {
			if _, err := tx.Exec(ctx, `ANALYZE `+pgx.Identifier{name}.Sanitize()); err != nil {
				return fmt.Errorf("analyze %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(due) > 0 {
		s.warmIdle(ctx) // the ANALYZE invalidated their plans
	}
	return due, nil
}
