package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// LeaderAttemptElect implements store.Store.
func (s *Store) LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error) {
	var res store.LeaderElectResult
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		var cur store.LeaderRow
		err := tx.QueryRowContext(ctx, `SELECT node_id, term, expires_at FROM leader WHERE id = 1`).Scan(&cur.NodeID, &cur.Term, &cur.ExpiresAt)
		found := !errors.Is(err, sql.ErrNoRows)
		if found && err != nil {
			return fmt.Errorf("sqlitestore: read leader: %w", err)
		}
		next, changed := store.ElectLeader(cur, found, p)
		if changed {
			if _, err := tx.ExecContext(ctx, `INSERT INTO leader (id, node_id, term, expires_at) VALUES (1, ?, ?, ?)
				ON CONFLICT (id) DO UPDATE SET node_id = excluded.node_id, term = excluded.term, expires_at = excluded.expires_at`,
				next.NodeID, next.Term, next.ExpiresAt); err != nil {
				return fmt.Errorf("sqlitestore: elect: %w", err)
			}
		}
		res = next.Result(p.NodeID)
		return nil
	})
	return res, err
}

// LeaderResign implements store.Store.
func (s *Store) LeaderResign(ctx context.Context, nodeID string) error {
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `UPDATE leader SET expires_at = 0 WHERE id = 1 AND node_id = ?`, nodeID)
		return wrapErr("resign", err)
	})
}

// NodeHeartbeat implements store.Store.
func (s *Store) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, address, version, started_at, last_heartbeat) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET address = excluded.address, version = excluded.version,
				started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat`,
			p.NodeID, p.Address, p.Version, ms(p.StartedAt), ms(p.Now))
		return wrapErr("node heartbeat", err)
	})
}

// NodeList implements store.Store.
func (s *Store) NodeList(ctx context.Context, now time.Time, liveness time.Duration) ([]rota.Node, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT n.id, n.address, n.version, n.started_at, n.last_heartbeat,
		COALESCE(l.node_id = n.id AND l.expires_at > ?, 0)
		FROM nodes n LEFT JOIN leader l ON l.id = 1 WHERE n.last_heartbeat >= ? ORDER BY n.id`,
		ms(now), ms(now.Add(-liveness)))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list nodes: %w", err)
	}
	defer rows.Close()
	var out []rota.Node
	for rows.Next() {
		var n rota.Node
		var started, last int64
		var leader int
		if err := rows.Scan(&n.ID, &n.Address, &n.Version, &started, &last, &leader); err != nil {
			return nil, fmt.Errorf("sqlitestore: scan node: %w", err)
		}
		n.StartedAt, n.LastHeartbeat, n.Leader = tm(started), tm(last), leader == 1
		out = append(out, n)
	}
	return out, rows.Err()
}

// NodeRemove implements store.Store.
func (s *Store) NodeRemove(ctx context.Context, nodeID string) error {
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM nodes WHERE id = ?`, nodeID)
		return wrapErr("remove node", err)
	})
}

// SupportsNotify is false: the embedded store serves one process, whose
// dispatcher already knows every change.
func (s *Store) SupportsNotify() bool { return false }

// Subscribe returns at once: see SupportsNotify.
func (s *Store) Subscribe(ctx context.Context, fn func(store.Notification)) error { return nil }

// fence checks a leader-only write's fencing term (store.CheckFence) in the
// write's transaction: the single writer orders it with every election.
func fence(ctx context.Context, tx *wtx, want int64, now time.Time) error {
	if want == 0 {
		return nil
	}
	var term, until int64
	found := true
	err := tx.QueryRowContext(ctx, `SELECT term, expires_at FROM leader WHERE id = 1`).Scan(&term, &until)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		found = false
	case err != nil:
		return fmt.Errorf("sqlitestore: read leader for the fence: %w", err)
	}
	return store.CheckFence(want, found, term, tm(until), now)
}

// fenceFire checks the fencing terms of a fire batch, once per distinct
// (Term, Now): the engine's batches carry one of each.
func fenceFire(ctx context.Context, tx *wtx, ps []store.ScheduleFireParams) error {
	for i := range ps {
		if i > 0 && ps[i].Term == ps[i-1].Term && ps[i].Now.Equal(ps[i-1].Now) {
			continue
		}
		if err := fence(ctx, tx, ps[i].Term, ps[i].Now); err != nil {
			return err
		}
	}
	return nil
}
