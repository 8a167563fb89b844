package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

const kindCols = `name, priority_factor, paused, max_running, rate, retention_seconds, dispatch`

func scanKind(sc scanner) (*rota.Kind, error) {
	var k rota.Kind
	var paused int
	if err := sc.Scan(&k.Name, &k.PriorityFactor, &paused, &k.MaxRunning, &k.Rate, &k.RetentionSeconds, &k.Dispatch); err != nil {
		return nil, err
	}
	k.Paused = paused == 1
	return &k, nil
}

// KindList implements store.Store.
func (s *Store) KindList(ctx context.Context) ([]rota.Kind, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+kindCols+` FROM kinds ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list kinds: %w", err)
	}
	return collectRows(rows, "kind", scanKind)
}

// KindGet implements store.Store.
func (s *Store) KindGet(ctx context.Context, name string) (*rota.Kind, error) {
	return getKind(ctx, s.r, name)
}

func getKind(ctx context.Context, q queryer, name string) (*rota.Kind, error) {
	k, err := scanKind(q.QueryRowContext(ctx, `SELECT `+kindCols+` FROM kinds WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("kind", name)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get kind %s: %w", name, err)
	}
	return k, nil
}

// KindUpsert implements store.Store.
func (s *Store) KindUpsert(ctx context.Context, p store.KindUpsertParams) (*rota.Kind, error) {
	var out *rota.Kind
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if err := ensureKind(ctx, tx, p.Name); err != nil {
			return err
		}
		k, err := getKind(ctx, tx, p.Name)
		if err != nil {
			return err
		}
		p.Apply(k)
		if _, err := tx.ExecContext(ctx, `UPDATE kinds SET priority_factor = ?, paused = ?, max_running = ?, rate = ?,
			retention_seconds = ?, dispatch = ? WHERE name = ?`, k.PriorityFactor, boolInt(k.Paused), k.MaxRunning, k.Rate,
			k.RetentionSeconds, k.Dispatch, k.Name); err != nil {
			return fmt.Errorf("sqlitestore: update kind %s: %w", k.Name, err)
		}
		out = k
		return nil
	})
	return out, err
}

// workerCols are the columns scanWorker reads, from workers aliased w.
const workerCols = `w.id, w.address, w.kinds, w.first_seen, w.last_seen, w.last_wait_ms, w.stop_requested, w.deregistered,
	(SELECT COUNT(*) FROM runs r WHERE r.worker_id = w.id AND r.status = 'RUNNING')`

// WorkerList implements store.Store.
func (s *Store) WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+workerCols+` FROM workers w ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list workers: %w", err)
	}
	defer rows.Close()
	var out []rota.Worker
	for rows.Next() {
		w, err := scanWorker(rows, now)
		if err != nil {
			return nil, err
		}
		out = append(out, *w)
	}
	return out, rows.Err()
}

func scanWorker(sc scanner, now time.Time) (*rota.Worker, error) {
	var (
		w                   rota.Worker
		kinds               string
		first, last, waitMS int64
		stop, dereg         int
	)
	if err := sc.Scan(&w.ID, &w.Address, &kinds, &first, &last, &waitMS, &stop, &dereg, &w.Running); err != nil {
		return nil, fmt.Errorf("sqlitestore: scan worker: %w", err)
	}
	if err := json.Unmarshal([]byte(kinds), &w.Kinds); err != nil {
		return nil, fmt.Errorf("sqlitestore: worker %s kinds: %w", w.ID, err)
	}
	w.FirstSeen, w.LastSeen = tm(first), tm(last)
	w.StopRequested = stop == 1
	w.Status = store.WorkerStatusAt(w.LastSeen, time.Duration(waitMS)*time.Millisecond, w.StopRequested || dereg == 1, w.Running, now)
	return &w, nil
}

// WorkerStop implements store.Store.
func (s *Store) WorkerStop(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	var out *rota.Worker
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE workers SET stop_requested = 1 WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlitestore: stop worker %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("worker", id)
		}
		w, err := scanWorker(tx.QueryRowContext(ctx, `SELECT `+workerCols+` FROM workers w WHERE id = ?`, id), now)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("worker", id)
		}
		out = w
		return err
	})
	return out, err
}

// WorkerListPage implements store.Store.
func (s *Store) WorkerListPage(ctx context.Context, p store.WorkerListParams) (store.WorkerListResult, error) {
	q, args, limit := store.WorkerListQuery(p, workerCols, func(int) string { return "?" },
		func(ph string) string { return "EXISTS (SELECT 1 FROM json_each(w.kinds) WHERE value = " + ph + ")" }, "1")
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.WorkerListResult{}, unavailable(fmt.Errorf("sqlitestore: list workers: %w", err))
	}
	defer rows.Close()
	var out []rota.Worker
	for rows.Next() {
		w, err := scanWorker(rows, p.Now)
		if err != nil {
			return store.WorkerListResult{}, err
		}
		out = append(out, *w)
	}
	if err := rows.Err(); err != nil {
		return store.WorkerListResult{}, unavailable(fmt.Errorf("sqlitestore: list workers: %w", err))
	}
	return store.WorkerListPage(out, limit), nil
}

// WorkerDeregister implements store.Store.
func (s *Store) WorkerDeregister(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	var out *rota.Worker
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE workers SET deregistered = 1, last_seen = max(last_seen, ?), last_wait_ms = 0
			WHERE id = ?`, ms(now), id)
		if err != nil {
			return fmt.Errorf("sqlitestore: deregister worker %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("worker", id)
		}
		w, err := scanWorker(tx.QueryRowContext(ctx, `SELECT `+workerCols+` FROM workers w WHERE id = ?`, id), now)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("worker", id)
		}
		out = w
		return err
	})
	return out, err
}

// WorkerPrune implements store.Store.
func (s *Store) WorkerPrune(ctx context.Context, p store.WorkerPruneParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM workers WHERE id IN (SELECT id FROM workers w
			WHERE w.last_seen < ? AND w.last_seen + w.last_wait_ms < ?
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.worker_id = w.id AND r.status = 'RUNNING')
			ORDER BY w.last_seen LIMIT ?)`, ms(p.SeenBefore), ms(p.SeenBefore), limit)
		if err != nil {
			return fmt.Errorf("sqlitestore: prune workers: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	byKind := map[string]*store.KindStats{}
	var order []string
	get := func(k string) *store.KindStats {
		ks, ok := byKind[k]
		if !ok {
			ks = &store.KindStats{Kind: k, Counts: map[rota.Status]int{}}
			byKind[k] = ks
			order = append(order, k)
		}
		return ks
	}
	kinds, err := s.KindList(ctx)
	if err != nil {
		return store.Stats{}, err
	}
	for _, k := range kinds {
		get(k.Name).Paused = k.Paused
	}
	rows, err := s.r.QueryContext(ctx, statsQuery)
	if err != nil {
		return store.Stats{}, fmt.Errorf("sqlitestore: stats: %w", err)
	}
	for rows.Next() {
		var kind, status string
		var n int
		if err := rows.Scan(&kind, &status, &n); err != nil {
			rows.Close()
			return store.Stats{}, fmt.Errorf("sqlitestore: scan stats: %w", err)
		}
		get(kind).Counts[rota.Status(status)] += n // idle and running rows: see statsQuery
	}
	rows.Close()
	for _, k := range order {
		var v sql.NullInt64
		if err := s.r.QueryRowContext(ctx, oldestWaitingQuery, k, ms(now)).Scan(&v); err != nil {
			return store.Stats{}, fmt.Errorf("sqlitestore: oldest waiting: %w", err)
		}
		if v.Valid {
			byKind[k].OldestWaitingAge = now.Sub(tm(v.Int64))
		}
	}
	var out store.Stats
	for _, k := range order {
		out.Kinds = append(out.Kinds, *byKind[k])
	}
	return out, nil
}
