package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

const kindCols = `name, priority_factor, paused, max_running, rate, retention_seconds, dispatch`

func scanKind(sc scanner) (rota.Kind, error) {
	var k rota.Kind
	err := sc.Scan(&k.Name, &k.PriorityFactor, &k.Paused, &k.MaxRunning, &k.Rate, &k.RetentionSeconds, &k.Dispatch)
	return k, err
}

// KindList implements store.Store.
func (s *Store) KindList(ctx context.Context) ([]rota.Kind, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+kindCols+` FROM kinds ORDER BY name`)
	kinds, err := collect(rows, err, "list kinds", scanKind)
	return kinds, unavailable(err)
}

// KindGet implements store.Store.
func (s *Store) KindGet(ctx context.Context, name string) (*rota.Kind, error) {
	k, err := scanKind(s.r.QueryRowContext(ctx, `SELECT `+kindCols+` FROM kinds WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("kind", name)
	}
	if err != nil {
		return nil, unavailable(wrap("get kind "+name, err))
	}
	return &k, nil
}

// KindUpsert implements store.Store.
func (s *Store) KindUpsert(ctx context.Context, p store.KindUpsertParams) (*rota.Kind, error) {
	var out rota.Kind
	err := s.tx(ctx, "upsert kind", func(t *txn) error {
		if _, err := t.exec(`INSERT IGNORE INTO kinds (name) VALUES (?)`, p.Name); err != nil {
			return wrap("create kind "+p.Name, err)
		}
		k, err := scanKind(t.QueryRowContext(t.ctx, `SELECT `+kindCols+` FROM kinds WHERE name = ? FOR UPDATE`, p.Name))
		if err != nil {
			return wrap("read kind "+p.Name, err)
		}
		wasPaused := k.Paused
		p.Apply(&k)
		if _, err := t.exec(`UPDATE kinds SET priority_factor = ?, paused = ?, max_running = ?, rate = ?,
			retention_seconds = ?, dispatch = ? WHERE name = ?`, k.PriorityFactor, boolInt(k.Paused), k.MaxRunning, k.Rate,
			k.RetentionSeconds, k.Dispatch, k.Name); err != nil {
			return wrap("update kind "+k.Name, err)
		}
		if !k.Paused || wasPaused {
			t.notifySelf(k.Name, 0, 0) // resumed, or a cap or rate changed
		}
		out = k
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.kinds.Store(out.Name, struct{}{})
	return &out, nil
}

// runningOf is the SQL count of the running runs of the worker of alias w.
const runningOf = `((SELECT COUNT(*) FROM tasks rt WHERE rt.run_live = 1 AND rt.run_worker = w.id)
	+ (SELECT COUNT(*) FROM run_history rh WHERE rh.run_live = 1 AND rh.worker_id = w.id))`

// workerCols are the columns scanWorker reads, from workers aliased w.
const workerCols = `w.id, w.address, w.kinds, w.first_seen, w.last_seen, w.last_wait_ms, w.stop_requested, w.deregistered, ` + runningOf

func scanWorker(sc scanner, now time.Time) (rota.Worker, error) {
	var (
		w                   rota.Worker
		kinds               string
		first, last, waitMS int64
		dereg               bool
	)
	if err := sc.Scan(&w.ID, &w.Address, &kinds, &first, &last, &waitMS, &w.StopRequested, &dereg, &w.Running); err != nil {
		return w, err
	}
	if err := json.Unmarshal([]byte(kinds), &w.Kinds); err != nil {
		return w, err
	}
	w.FirstSeen, w.LastSeen = tm(first), tm(last)
	w.Status = store.WorkerStatusAt(w.LastSeen, time.Duration(waitMS)*time.Millisecond, w.StopRequested || dereg, w.Running, now)
	return w, nil
}

// WorkerList implements store.Store.
func (s *Store) WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+workerCols+` FROM workers w ORDER BY id`)
	ws, err := collect(rows, err, "list workers", func(sc scanner) (rota.Worker, error) { return scanWorker(sc, now) })
	return ws, unavailable(err)
}

// workerChange applies a change (set) to worker id and returns it.
func (s *Store) workerChange(ctx context.Context, id string, now time.Time, set string, args ...any) (*rota.Worker, error) {
	var out rota.Worker
	err := s.tx(ctx, "change worker", func(t *txn) error {
		n, err := t.affected(`UPDATE workers SET `+set+` WHERE id = ?`, append(args, id)...)
		if err != nil {
			return wrap("change worker "+id, err)
		}
		w, err := scanWorker(t.QueryRowContext(t.ctx, `SELECT `+workerCols+` FROM workers w WHERE id = ?`, id), now)
		if errors.Is(err, sql.ErrNoRows) || n == 0 && err != nil {
			return notFound("worker", id)
		}
		out = w
		return wrap("read worker "+id, err)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkerStop implements store.Store.
func (s *Store) WorkerStop(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	return s.workerChange(ctx, id, now, `stop_requested = 1`)
}

// WorkerDeregister implements store.Store.
func (s *Store) WorkerDeregister(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	return s.workerChange(ctx, id, now, `deregistered = 1, last_seen = GREATEST(last_seen, ?), last_wait_ms = 0`, ms(now))
}

// WorkerListPage implements store.Store.
func (s *Store) WorkerListPage(ctx context.Context, p store.WorkerListParams) (store.WorkerListResult, error) {
	q, args, limit := store.WorkerListQuery(p, workerCols, func(int) string { return "?" },
		func(ph string) string { return "JSON_CONTAINS(w.kinds, JSON_QUOTE(" + ph + "))" }, "1")
	q = strings.ReplaceAll(q, "AS BIGINT)", "AS SIGNED)")
	q = strings.ReplaceAll(q, `(SELECT count(*) FROM runs r WHERE r.worker_id = w.id AND r.status = 'RUNNING')`, runningOf)
	rows, err := s.r.QueryContext(ctx, q, args...)
	ws, err := collect(rows, err, "list workers", func(sc scanner) (rota.Worker, error) { return scanWorker(sc, p.Now) })
	if err != nil {
		return store.WorkerListResult{}, unavailable(err)
	}
	return store.WorkerListPage(ws, limit), nil
}

// WorkerPrune implements store.Store.
func (s *Store) WorkerPrune(ctx context.Context, p store.WorkerPruneParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var n int64
	err := s.tx(ctx, "prune workers", func(t *txn) error {
		var err error
		// A single-table DELETE (ORDER BY, LIMIT) takes no alias.
		n, err = t.affected(`DELETE FROM workers WHERE last_seen < ? AND last_seen + last_wait_ms < ?
			AND `+strings.ReplaceAll(runningOf, "w.id", "workers.id")+` = 0 ORDER BY last_seen LIMIT ?`,
			ms(p.SeenBefore), ms(p.SeenBefore), limit)
		return wrap("prune workers", err)
	})
	return int(n), err
}

// WorkerRunsActive implements store.Store.
func (s *Store) WorkerRunsActive(ctx context.Context, workerIDs []string) (map[string][]rota.WorkerRun, error) {
	out := map[string][]rota.WorkerRun{}
	if len(workerIDs) == 0 {
		return out, nil
	}
	q := store.WorkerRunsSelect + `IN (` + inList(len(workerIDs)) + `)` + store.WorkerRunsOrder
	rows, err := s.r.QueryContext(ctx, q, anyList(workerIDs)...)
	_, err = collect(rows, err, "worker runs", func(sc scanner) (struct{}, error) {
		return struct{}{}, store.ScanWorkerRun(sc, out)
	})
	return out, unavailable(err)
}

// TaskPinnedWaiting implements store.Store.
func (s *Store) TaskPinnedWaiting(ctx context.Context, now time.Time) ([]store.PinnedWaiting, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT kind, worker_ids, MIN(run_at) FROM tasks
		WHERE avail = 1 AND status = 'SCHEDULED' AND pinned = 1 AND run_at <= ?
		GROUP BY kind, worker_ids ORDER BY kind LIMIT ?`, ms(now), store.MaxPinnedGroups)
	groups, err := collect(rows, err, "pinned waiting", func(sc scanner) (store.PinnedWaiting, error) {
		var (
			g      store.PinnedWaiting
			ids    sql.NullString
			oldest int64
		)
		if err := sc.Scan(&g.Kind, &ids, &oldest); err != nil {
			return g, err
		}
		var err error
		g.WorkerIDs, err = decodeWorkerIDs(ids)
		g.Oldest = tm(oldest)
		return g, err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	return store.MergePinned(groups), nil
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	type row struct {
		kind, status string
		n            int
		paused       bool
		oldest       sql.NullInt64
	}
	// One row per kind and status, plus the kind's paused flag and oldest
	// waiting task; kinds without tasks give one row with a NULL status.
	rows, err := s.r.QueryContext(ctx, `SELECT k.name, COALESCE(c.status, ''), COALESCE(c.n, 0), k.paused,
		(SELECT MIN(run_at) FROM tasks o WHERE o.kind = k.name AND o.avail = 1 AND o.status = 'SCHEDULED' AND o.run_at <= ?)
		FROM kinds k LEFT JOIN (SELECT kind, status, COUNT(*) AS n FROM tasks GROUP BY kind, status) c ON c.kind = k.name
		ORDER BY k.name`, ms(now))
	got, err := collect(rows, err, "stats", func(sc scanner) (row, error) {
		var r row
		err := sc.Scan(&r.kind, &r.status, &r.n, &r.paused, &r.oldest)
		return r, err
	})
	if err != nil {
		return store.Stats{}, unavailable(err)
	}
	var out store.Stats
	for _, r := range got {
		if len(out.Kinds) == 0 || out.Kinds[len(out.Kinds)-1].Kind != r.kind {
			ks := store.KindStats{Kind: r.kind, Counts: map[rota.Status]int{}, Paused: r.paused}
			if r.oldest.Valid {
				ks.OldestWaitingAge = now.Sub(tm(r.oldest.Int64))
			}
			out.Kinds = append(out.Kinds, ks)
		}
		if r.status != "" {
			out.Kinds[len(out.Kinds)-1].Counts[rota.Status(r.status)] = r.n
		}
	}
	return out, nil
}
