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

// LeaderAttemptElect implements store.Store. One statement decides, by
// store.ElectLeader's rule: the single leader row is inserted, taken over
// (term + 1, or a registry's larger term) or extended (same term); INSERT ...
// ON CONFLICT DO UPDATE locks the row and re-checks the condition on its
// latest version, so concurrent candidates cannot both win. The row is then
// read back in the same transaction (one round trip for both).
func (s *Store) LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error) {
	var res store.LeaderElectResult
	err := s.tx(ctx, "elect leader", func(t *txn) error {
		now := ms(p.Now)
		exp := now + p.TTL.Milliseconds()
		// store.ElectLeader's rule in one statement ($4 > 0: a registry's term).
		t.queue(`INSERT INTO leader AS l (id, node_id, term, expires_at) VALUES (1, $1, GREATEST($4::bigint, 1), $2)
			ON CONFLICT (id) DO UPDATE SET
				node_id = excluded.node_id,
				term = CASE WHEN l.node_id = excluded.node_id AND l.expires_at > $3 AND l.term >= $4 THEN l.term
					WHEN $4 > l.term THEN $4 ELSE l.term + 1 END,
				expires_at = excluded.expires_at
			WHERE (l.node_id = excluded.node_id AND l.expires_at > $3 AND l.term >= $4) OR $4 > l.term OR l.expires_at <= $3`,
			p.NodeID, exp, now, p.Term)
		// The row as the statement above left it, whoever leads.
		var node string
		var term, until int64
		err := t.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&node, &term, &until) },
			`SELECT node_id, term, expires_at FROM leader WHERE id = 1`)
		if err != nil {
			return fmt.Errorf("elect %s: %w", p.NodeID, err)
		}
		res = store.LeaderElectResult{Leader: node == p.NodeID, LeaderID: node, Term: term, ExpiresAt: tm(until)}
		return nil
	})
	return res, err
}

// LeaderResign implements store.Store: the lease ends at once, so the next
// candidate takes over (with a new term).
func (s *Store) LeaderResign(ctx context.Context, nodeID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE leader SET expires_at = 0 WHERE id = 1 AND node_id = $1`, nodeID); err != nil {
		return s.translate("resign", err)
	}
	return nil
}

// NodeHeartbeat implements store.Store.
func (s *Store) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO nodes (id, address, version, started_at, last_heartbeat) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address, version = excluded.version,
			started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat`,
		p.NodeID, p.Address, p.Version, ms(p.StartedAt), ms(p.Now))
	if err != nil {
		return s.translate("node heartbeat", err)
	}
	return nil
}

// NodeList implements store.Store.
func (s *Store) NodeList(ctx context.Context, now time.Time, liveness time.Duration) ([]rota.Node, error) {
	rows, err := s.pool.Query(ctx, `SELECT n.id, n.address, n.version, n.started_at, n.last_heartbeat,
			COALESCE(l.node_id = n.id AND l.expires_at > $1, false)
		FROM nodes n LEFT JOIN leader l ON l.id = 1 WHERE n.last_heartbeat >= $2 ORDER BY n.id`,
		ms(now), ms(now.Add(-liveness)))
	if err != nil {
		return nil, s.translate("list nodes", err)
	}
	nodes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Node, error) {
		var n rota.Node
		var started, last int64
		if err := row.Scan(&n.ID, &n.Address, &n.Version, &started, &last, &n.Leader); err != nil {
			return rota.Node{}, err
		}
		n.StartedAt, n.LastHeartbeat = tm(started), tm(last)
		return n, nil
	})
	if err != nil {
		return nil, s.translate("list nodes", err)
	}
	return nodes, nil
}

// NodeRemove implements store.Store.
func (s *Store) NodeRemove(ctx context.Context, nodeID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM nodes WHERE id = $1`, nodeID); err != nil {
		return s.translate("remove node", err)
	}
	return nil
}

// fence checks a leader-only write's fencing term (store.CheckFence) at the
// start of the write's transaction. FOR SHARE holds the leader row until the
// write commits: an election that would take over (a new term) waits for
// it, so the write is never applied under a term that is not current.
func (t *txn) fence(ctx context.Context, want int64, now time.Time) error {
	if want == 0 {
		return nil
	}
	var term, until int64
	found := true
	err := t.queryRow(ctx, func(row pgx.Row) error {
		err := row.Scan(&term, &until)
		if errors.Is(err, pgx.ErrNoRows) {
			found = false
			return nil
		}
		return err
	}, `SELECT term, expires_at FROM leader WHERE id = 1 FOR SHARE`)
	if err != nil {
		return fmt.Errorf("read leader for the fence: %w", err)
	}
	return store.CheckFence(want, found, term, tm(until), now)
}

// fenceFire checks the fencing terms of a fire batch, once per distinct
// (Term, Now): the engine's batches carry one of each.
func (t *txn) fenceFire(ctx context.Context, ps []store.ScheduleFireParams) error {
	for i := range ps {
		if i > 0 && ps[i].Term == ps[i-1].Term && ps[i].Now.Equal(ps[i-1].Now) {
			continue
		}
		if err := t.fence(ctx, ps[i].Term, ps[i].Now); err != nil {
			return err
		}
	}
	return nil
}
