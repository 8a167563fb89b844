package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rotahq/rota/internal/store"
)

var _ store.PushStore = (*Store)(nil)

func scanPushWorker(sc scanner) (*store.PushWorker, error) {
	var (
		w          store.PushWorker
		kinds      string
		registered int64
	)
	if err := sc.Scan(&w.WorkerID, &w.Address, &kinds, &w.Capacity, &registered, &w.Stopped, &w.Running); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(kinds), &w.Kinds); err != nil {
		return nil, fmt.Errorf("sqlitestore: push worker %s kinds: %w", w.WorkerID, err)
	}
	w.RegisteredAt = tm(registered)
	return &w, nil
}

// WorkerRegister implements store.PushStore.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*store.PushWorker, error) {
	kinds, err := json.Marshal(p.Kinds)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: register worker %s: %w", p.WorkerID, err)
	}
	var out *store.PushWorker
	err = s.write(ctx, func(ctx context.Context, tx *wtx) error {
		now := ms(p.Now)
		if _, err := tx.ExecContext(ctx, `INSERT INTO workers (id, address, kinds, first_seen, last_seen, last_wait_ms)
			VALUES (?, ?, ?, ?, ?, 0)
			ON CONFLICT (id) DO UPDATE SET address = excluded.address, kinds = excluded.kinds,
				last_seen = max(workers.last_seen, excluded.last_seen), last_wait_ms = 0, deregistered = 0`,
			p.WorkerID, p.Address, string(kinds), now, now); err != nil {
			return fmt.Errorf("sqlitestore: register worker %s: %w", p.WorkerID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO push_workers (worker_id, address, capacity, registered_at)
			VALUES (?, ?, ?, ?)
			ON CONFLICT (worker_id) DO UPDATE SET address = excluded.address, capacity = excluded.capacity,
				registered_at = excluded.registered_at`, p.WorkerID, p.Address, p.Capacity, now); err != nil {
			return fmt.Errorf("sqlitestore: register push worker %s: %w", p.WorkerID, err)
		}
		w, err := scanPushWorker(tx.QueryRowContext(ctx, store.PushWorkerSelect("1", store.RunningOf)+` WHERE p.worker_id = ?`, p.WorkerID))
		if err != nil {
			return fmt.Errorf("sqlitestore: read push worker %s: %w", p.WorkerID, err)
		}
		out = w
		return nil
	})
	return out, err
}

// PushWorkerList implements store.PushStore.
func (s *Store) PushWorkerList(ctx context.Context) ([]store.PushWorker, error) {
	rows, err := s.r.QueryContext(ctx, store.PushWorkerSelect("1", store.RunningOf)+` ORDER BY p.worker_id`)
	if err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: list push workers: %w", err))
	}
	return collectRows(rows, "push worker", scanPushWorker)
}

// PushWorkersSeen implements store.PushStore.
func (s *Store) PushWorkersSeen(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, ms(now))
	for _, id := range ids {
		args = append(args, id)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE workers SET last_seen = max(last_seen, ?), last_wait_ms = 0
			WHERE id IN (`+marks+`)`, args...); err != nil {
			return fmt.Errorf("sqlitestore: push workers seen: %w", err)
		}
		return nil
	})
}
