package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
)

var _ store.PushStore = (*Store)(nil)

func scanPushWorker(row pgx.Row) (*store.PushWorker, error) {
	var (
		w          store.PushWorker
		registered int64
	)
	if err := row.Scan(&w.WorkerID, &w.Address, &w.Kinds, &w.Capacity, &registered, &w.Stopped, &w.Running); err != nil {
		return nil, err
	}
	w.RegisteredAt = tm(registered)
	return &w, nil
}

// WorkerRegister implements store.PushStore: the worker row and the
// registration in one round trip.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*store.PushWorker, error) {
	var out *store.PushWorker
	err := s.tx(ctx, "register worker", func(t *txn) error {
		now := ms(p.Now)
		t.queue(`INSERT INTO workers (id, address, kinds, first_seen, last_seen, last_wait_ms)
			VALUES ($1, $2, $3, $4, $4, 0)
			ON CONFLICT (id) DO UPDATE SET address = excluded.address, kinds = excluded.kinds,
				last_seen = greatest(workers.last_seen, excluded.last_seen), last_wait_ms = 0, deregistered = false`,
			p.WorkerID, p.Address, idList(p.Kinds), now)
		t.queue(`INSERT INTO push_workers (worker_id, address, capacity, registered_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (worker_id) DO UPDATE SET address = excluded.address, capacity = excluded.capacity,
				registered_at = excluded.registered_at`, p.WorkerID, p.Address, p.Capacity, now)
		err := t.queryRow(ctx, func(row pgx.Row) (err error) {
			out, err = scanPushWorker(row)
			return err
		}, store.PushWorkerSelect("true", store.RunningOf)+` WHERE p.worker_id = $1`, p.WorkerID)
		if err != nil {
			return fmt.Errorf("register worker %s: %w", p.WorkerID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PushWorkerList implements store.PushStore.
func (s *Store) PushWorkerList(ctx context.Context) ([]store.PushWorker, error) {
	rows, err := s.pool.Query(ctx, store.PushWorkerSelect("true", store.RunningOf)+` ORDER BY p.worker_id`)
	if err != nil {
		return nil, s.translate("list push workers", err)
	}
	ws, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.PushWorker, error) {
		w, err := scanPushWorker(row)
		if err != nil {
			return store.PushWorker{}, err
		}
		return *w, nil
	})
	if err != nil {
		return nil, s.translate("list push workers", err)
	}
	return ws, nil
}

// PushWorkersSeen implements store.PushStore.
func (s *Store) PushWorkersSeen(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE workers SET last_seen = greatest(last_seen, $1), last_wait_ms = 0
		WHERE id = ANY($2::text[])`, ms(now), ids)
	if err != nil {
		return s.translate("push workers seen", err)
	}
	return nil
}
