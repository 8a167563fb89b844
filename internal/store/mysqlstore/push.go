package mysqlstore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/rotahq/rota/internal/store"
)

var _ store.PushStore = (*Store)(nil)

func scanPushWorker(sc scanner) (store.PushWorker, error) {
	var (
		w          store.PushWorker
		kinds      string
		registered int64
	)
	if err := sc.Scan(&w.WorkerID, &w.Address, &kinds, &w.Capacity, &registered, &w.Stopped, &w.Running); err != nil {
		return w, err
	}
	w.RegisteredAt = tm(registered)
	return w, json.Unmarshal([]byte(kinds), &w.Kinds)
}

// WorkerRegister implements store.PushStore.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*store.PushWorker, error) {
	kinds, err := json.Marshal(p.Kinds)
	if err != nil {
		return nil, wrap("register worker "+p.WorkerID, err)
	}
	var out store.PushWorker
	err = s.tx(ctx, "register worker", func(t *txn) error {
		now := ms(p.Now)
		if _, err := t.exec(`INSERT INTO workers (id, address, kinds, first_seen, last_seen, last_wait_ms) VALUES (?, ?, ?, ?, ?, 0)
			ON DUPLICATE KEY UPDATE address = VALUES(address), kinds = VALUES(kinds),
				last_seen = GREATEST(last_seen, VALUES(last_seen)), last_wait_ms = 0, deregistered = 0`,
			p.WorkerID, p.Address, string(kinds), now, now); err != nil {
			return wrap("register worker "+p.WorkerID, err)
		}
		if _, err := t.exec(`INSERT INTO push_workers (worker_id, address, capacity, registered_at) VALUES (?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE address = VALUES(address), capacity = VALUES(capacity), registered_at = VALUES(registered_at)`,
			p.WorkerID, p.Address, p.Capacity, now); err != nil {
			return wrap("register push worker "+p.WorkerID, err)
		}
		w, err := scanPushWorker(t.QueryRowContext(t.ctx, store.PushWorkerSelect("1", runningOf)+` WHERE p.worker_id = ?`, p.WorkerID))
		out = w
		return wrap("read push worker "+p.WorkerID, err)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// PushWorkerList implements store.PushStore.
func (s *Store) PushWorkerList(ctx context.Context) ([]store.PushWorker, error) {
	rows, err := s.r.QueryContext(ctx, store.PushWorkerSelect("1", runningOf)+` ORDER BY p.worker_id`)
	ws, err := collect(rows, err, "list push workers", scanPushWorker)
	return ws, unavailable(err)
}

// PushWorkersSeen implements store.PushStore.
func (s *Store) PushWorkersSeen(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{ms(now)}
	for _, id := range ids {
		args = append(args, id)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	return s.tx(ctx, "push workers seen", func(t *txn) error {
		_, err := t.exec(`UPDATE workers SET last_seen = GREATEST(last_seen, ?), last_wait_ms = 0 WHERE id IN (`+marks+`)`, args...)
		return wrap("push workers seen", err)
	})
}
