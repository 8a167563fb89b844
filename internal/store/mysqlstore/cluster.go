package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// LeaderAttemptElect implements store.Store with the shared rule
// (store.ElectLeader). The leader row (id 1) is locked for the election, so
// that exactly one node wins a term.
func (s *Store) LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error) {
	var res store.LeaderElectResult
	err := s.tx(ctx, "elect", func(t *txn) error {
		var cur store.LeaderRow
		err := t.QueryRowContext(t.ctx, `SELECT node_id, term, expires_at FROM leader WHERE id = 1 FOR UPDATE`).Scan(&cur.NodeID, &cur.Term, &cur.ExpiresAt)
		found := !errors.Is(err, sql.ErrNoRows)
		if found && err != nil {
			return wrap("read leader", err)
		}
		next, changed := store.ElectLeader(cur, found, p)
		switch {
		case !found:
			// Two first elections race on the primary key: the loser's
			// transaction is run again and finds the row.
			if _, err := t.exec(`INSERT INTO leader (id, node_id, term, expires_at) VALUES (1, ?, ?, ?)`,
				next.NodeID, next.Term, next.ExpiresAt); err != nil {
				return retryOnDuplicate(wrap("elect", err))
			}
		case changed:
			if _, err := t.exec(`UPDATE leader SET node_id = ?, term = ?, expires_at = ? WHERE id = 1`,
				next.NodeID, next.Term, next.ExpiresAt); err != nil {
				return wrap("elect", err)
			}
		}
		res = next.Result(p.NodeID)
		return nil
	})
	return res, err
}

// LeaderResign implements store.Store.
func (s *Store) LeaderResign(ctx context.Context, nodeID string) error {
	return s.tx(ctx, "resign", func(t *txn) error {
		_, err := t.exec(`UPDATE leader SET expires_at = 0 WHERE id = 1 AND node_id = ?`, nodeID)
		return wrap("resign", err)
	})
}

// fence checks a leader-only write's fencing term (store.CheckFence) in the
// write's transaction, reading the leader row under a shared lock so that
// no election can change it before the write commits.
func fence(t *txn, want int64, now time.Time) error {
	if want == 0 {
		return nil
	}
	var term, until int64
	found := true
	err := t.QueryRowContext(t.ctx, `SELECT term, expires_at FROM leader WHERE id = 1 LOCK IN SHARE MODE`).Scan(&term, &until)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		found = false
	case err != nil:
		return wrap("read leader for the fence", err)
	}
	return store.CheckFence(want, found, term, tm(until), now)
}

// NodeHeartbeat implements store.Store.
func (s *Store) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	_, err := s.r.ExecContext(ctx, `INSERT INTO nodes (id, address, version, started_at, last_heartbeat) VALUES (?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE address = VALUES(address), version = VALUES(version), started_at = VALUES(started_at),
			last_heartbeat = VALUES(last_heartbeat)`, p.NodeID, p.Address, p.Version, ms(p.StartedAt), ms(p.Now))
	return unavailable(wrap("node heartbeat", err))
}

// NodeList implements store.Store.
func (s *Store) NodeList(ctx context.Context, now time.Time, liveness time.Duration) ([]rota.Node, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT n.id, n.address, n.version, n.started_at, n.last_heartbeat,
		COALESCE(l.node_id = n.id AND l.expires_at > ?, 0)
		FROM nodes n LEFT JOIN leader l ON l.id = 1 WHERE n.last_heartbeat >= ? ORDER BY n.id`,
		ms(now), ms(now.Add(-liveness)))
	nodes, err := collect(rows, err, "list nodes", func(sc scanner) (rota.Node, error) {
		var n rota.Node
		var started, last int64
		err := sc.Scan(&n.ID, &n.Address, &n.Version, &started, &last, &n.Leader)
		n.StartedAt, n.LastHeartbeat = tm(started), tm(last)
		return n, err
	})
	return nodes, unavailable(err)
}

// NodeRemove implements store.Store.
func (s *Store) NodeRemove(ctx context.Context, nodeID string) error {
	_, err := s.r.ExecContext(ctx, `DELETE FROM nodes WHERE id = ?`, nodeID)
	return unavailable(wrap("remove node", err))
}

// TaskCleanup implements store.Store.
func (s *Store) TaskCleanup(ctx context.Context, p store.TaskCleanupParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	deleted := 0
	err := s.tx(ctx, "clean tasks", func(t *txn) error {
		deleted = 0
		if err := fence(t, p.Term, p.Now); err != nil {
			return err
		}
		rows, err := t.QueryContext(t.ctx, `SELECT t.id FROM kinds k JOIN tasks t ON t.done = 1 AND t.kind = k.name
			AND t.end_time < ? - k.retention_seconds * 1000
			WHERE k.retention_seconds > 0 ORDER BY t.end_time, t.id LIMIT ? FOR UPDATE`, ms(p.Now), limit)
		ids, err := strings1(rows, err, "expired tasks")
		if err != nil || len(ids) == 0 {
			return err
		}
		if err := deleteTasks(t, ids, "delete expired tasks"); err != nil {
			return err
		}
		deleted = len(ids)
		return nil
	})
	return deleted, err
}
