package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

const kindCols = `name, priority_factor, paused, max_running, rate, retention_seconds, dispatch`

func scanKind(row pgx.Row) (*rota.Kind, error) {
	var k rota.Kind
	if err := row.Scan(&k.Name, &k.PriorityFactor, &k.Paused, &k.MaxRunning, &k.Rate, &k.RetentionSeconds, &k.Dispatch); err != nil {
		return nil, err
	}
	return &k, nil
}

// KindList implements store.Store.
func (s *Store) KindList(ctx context.Context) ([]rota.Kind, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+kindCols+` FROM kinds ORDER BY name`)
	if err != nil {
		return nil, s.translate("list kinds", err)
	}
	kinds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Kind, error) {
		k, err := scanKind(row)
		if err != nil {
			return rota.Kind{}, err
		}
		return *k, nil
	})
	if err != nil {
		return nil, s.translate("list kinds", err)
	}
	return kinds, nil
}

// KindGet implements store.Store.
func (s *Store) KindGet(ctx context.Context, name string) (*rota.Kind, error) {
	k, err := scanKind(s.pool.QueryRow(ctx, `SELECT `+kindCols+` FROM kinds WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("kind", name)
	}
	if err != nil {
		return nil, s.translate("get kind "+name, err)
	}
	return k, nil
}

// KindUpsert implements store.Store: one INSERT ... ON CONFLICT DO UPDATE
// where a NULL (nil) field keeps the stored value or takes the default.
func (s *Store) KindUpsert(ctx context.Context, p store.KindUpsertParams) (*rota.Kind, error) {
	var out *rota.Kind
	err := s.tx(ctx, "upsert kind", func(t *txn) error {
		var k *rota.Kind
		err := t.queryRow(ctx, func(row pgx.Row) (err error) {
			k, err = scanKind(row)
			return err
		}, `INSERT INTO kinds AS k (name, priority_factor, paused, max_running, rate, retention_seconds, dispatch)
			VALUES ($1, COALESCE($2::integer, $7), COALESCE($3::boolean, false), COALESCE($4::integer, 0),
				COALESCE($5::double precision, 0), COALESCE($6::integer, 0), COALESCE($8::text, 'pull'))
			ON CONFLICT (name) DO UPDATE SET
				priority_factor = COALESCE($2::integer, k.priority_factor),
				paused = COALESCE($3::boolean, k.paused),
				max_running = COALESCE($4::integer, k.max_running),
				rate = COALESCE($5::double precision, k.rate),
				retention_seconds = COALESCE($6::integer, k.retention_seconds),
				dispatch = COALESCE($8::text, k.dispatch)
			RETURNING `+kindCols, p.Name, p.PriorityFactor, p.Paused, p.MaxRunning, p.Rate, p.RetentionSeconds,
			rota.DefaultPriorityFactor, p.Dispatch)
		if err != nil {
			return fmt.Errorf("upsert kind %s: %w", p.Name, err)
		}
		if !k.Paused {
			// Resumed, uncapped or reweighted: claimable tasks may wait.
			t.notify(k.Name, 0, 0)
		}
		out = k
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const workerCols = `w.id, w.address, w.kinds, w.first_seen, w.last_seen, w.last_wait_ms, w.stop_requested, w.deregistered,
	(SELECT count(*) FROM runs r WHERE r.worker_id = w.id AND r.status = 'RUNNING')`

func scanWorker(row pgx.Row, now time.Time) (*rota.Worker, error) {
	var (
		w                   rota.Worker
		first, last, waitMS int64
		dereg               bool
	)
	if err := row.Scan(&w.ID, &w.Address, &w.Kinds, &first, &last, &waitMS, &w.StopRequested, &dereg, &w.Running); err != nil {
		return nil, err
	}
	w.FirstSeen, w.LastSeen = tm(first), tm(last)
	w.Status = store.WorkerStatusAt(w.LastSeen, time.Duration(waitMS)*time.Millisecond, w.StopRequested || dereg, w.Running, now)
	return &w, nil
}

// WorkerList implements store.Store.
func (s *Store) WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+workerCols+` FROM workers w ORDER BY id`)
	if err != nil {
		return nil, s.translate("list workers", err)
	}
	ws, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Worker, error) {
		w, err := scanWorker(row, now)
		if err != nil {
			return rota.Worker{}, err
		}
		return *w, nil
	})
	if err != nil {
		return nil, s.translate("list workers", err)
	}
	return ws, nil
}

// WorkerStop implements store.Store.
func (s *Store) WorkerStop(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	var out *rota.Worker
	err := s.tx(ctx, "stop worker", func(t *txn) error {
		// Read in the commit's flush: an unknown worker changes nothing.
		t.queue(`UPDATE workers w SET stop_requested = true WHERE id = $1 RETURNING `+workerCols, id).
			QueryRow(func(row pgx.Row) error {
				w, err := scanWorker(row, now)
				if errors.Is(err, pgx.ErrNoRows) {
					return notFound("worker", id)
				}
				out = w
				return err
			})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WorkerListPage implements store.Store.
func (s *Store) WorkerListPage(ctx context.Context, p store.WorkerListParams) (store.WorkerListResult, error) {
	q, args, limit := store.WorkerListQuery(p, workerCols, func(n int) string { return fmt.Sprintf("$%d", n) },
		func(ph string) string { return ph + "::text = ANY(w.kinds)" }, "true")
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return store.WorkerListResult{}, s.translate("list workers", err)
	}
	ws, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Worker, error) {
		w, err := scanWorker(row, p.Now)
		if err != nil {
			return rota.Worker{}, err
		}
		return *w, nil
	})
	if err != nil {
		return store.WorkerListResult{}, s.translate("list workers", err)
	}
	return store.WorkerListPage(ws, limit), nil
}

// WorkerDeregister implements store.Store.
func (s *Store) WorkerDeregister(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	var out *rota.Worker
	err := s.tx(ctx, "deregister worker", func(t *txn) error {
		t.queue(`UPDATE workers w SET deregistered = true, last_seen = greatest(last_seen, $2), last_wait_ms = 0
			WHERE id = $1 RETURNING `+workerCols, id, ms(now)).
			QueryRow(func(row pgx.Row) error {
				w, err := scanWorker(row, now)
				if errors.Is(err, pgx.ErrNoRows) {
					return notFound("worker", id)
				}
				out = w
				return err
			})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WorkerPrune implements store.Store.
func (s *Store) WorkerPrune(ctx context.Context, p store.WorkerPruneParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM workers WHERE id IN (SELECT id FROM workers w
		WHERE w.last_seen < $1 AND w.last_seen + w.last_wait_ms < $1
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.worker_id = w.id AND r.status = 'RUNNING')
		ORDER BY w.last_seen LIMIT $2)`, ms(p.SeenBefore), limit)
	if err != nil {
		return 0, s.translate("prune workers", err)
	}
	return int(tag.RowsAffected()), nil
}

// Stats implements store.Store: one statement, so the counts are one
// snapshot.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	rows, err := s.pool.Query(ctx, `SELECT k.name, k.paused, c.status, COALESCE(c.n, 0), o.oldest
		FROM kinds k
		CROSS JOIN LATERAL (SELECT min(r.run_at) AS oldest FROM `+readyGroups+`,
			LATERAL (SELECT run_at FROM tasks WHERE avail AND status = 'SCHEDULED' AND kind = k.name
				AND level = g.level AND pinned = g.pinned AND run_at <= $1 ORDER BY run_at LIMIT 1) r) o
		LEFT JOIN (SELECT kind, status, count(*) AS n FROM tasks GROUP BY kind, status) c ON c.kind = k.name
		ORDER BY k.name, c.status`, ms(now))
	if err != nil {
		return store.Stats{}, s.translate("stats", err)
	}
	defer rows.Close()
	var out store.Stats
	for rows.Next() {
		var (
			kind   string
			paused bool
			status *string
			n      int
			oldest *int64
		)
		if err := rows.Scan(&kind, &paused, &status, &n, &oldest); err != nil {
			return store.Stats{}, s.translate("stats", err)
		}
		if len(out.Kinds) == 0 || out.Kinds[len(out.Kinds)-1].Kind != kind {
			ks := store.KindStats{Kind: kind, Counts: map[rota.Status]int{}, Paused: paused}
			if oldest != nil {
				ks.OldestWaitingAge = now.Sub(tm(*oldest))
			}
			out.Kinds = append(out.Kinds, ks)
		}
		if status != nil {
			out.Kinds[len(out.Kinds)-1].Counts[rota.Status(*status)] = n
		}
	}
	if err := rows.Err(); err != nil {
		return store.Stats{}, s.translate("stats", err)
	}
	return out, nil
}
