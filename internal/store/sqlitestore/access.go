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

var _ store.AccessStore = (*Store)(nil)

const tokenCols = `id, name, role, kinds, hash, created_at, revoked_at`

func scanToken(sc scanner) (*rota.Token, error) { return store.ScanToken(sc) }

// TokenInsert implements store.AccessStore.
func (s *Store) TokenInsert(ctx context.Context, t rota.Token) error {
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE id = ? OR hash = ? OR (name = ? AND revoked_at = 0)`,
			t.ID, t.Hash, t.Name).Scan(&n)
		if err != nil {
			return fmt.Errorf("sqlitestore: insert token: %w", err)
		}
		if n > 0 {
			return conflict("a token named %q (or with this id) already exists", t.Name)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, 0)`,
			t.ID, t.Name, string(t.Role), store.TokenKindsJSON(t.Kinds), t.Hash, ms(t.CreatedAt))
		if err != nil {
			return fmt.Errorf("sqlitestore: insert token: %w", err)
		}
		return nil
	})
}

// TokenGetByHash implements store.AccessStore.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*rota.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rota.Errorf(rota.CodeNotFound, "token not found")
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get token: %w", err)
	}
	return t, nil
}

// TokenList implements store.AccessStore.
func (s *Store) TokenList(ctx context.Context) ([]rota.Token, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list tokens: %w", err)
	}
	return collectRows(rows, "token", scanToken)
}

// TokenRevoke implements store.AccessStore.
func (s *Store) TokenRevoke(ctx context.Context, p store.TokenRevokeParams) (*rota.Token, error) {
	var out *rota.Token
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, ms(p.Now), p.ID); err != nil {
			return fmt.Errorf("sqlitestore: revoke token: %w", err)
		}
		t, err := scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("token", p.ID)
		}
		if err != nil {
			return fmt.Errorf("sqlitestore: revoke token: %w", err)
		}
		out = t
		return nil
	})
	return out, err
}

// nullJSON is v for a nullable JSON column: nil when empty.
func nullJSON(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return string(v)
}

// AuditAppend implements store.AccessStore.
func (s *Store) AuditAppend(ctx context.Context, r rota.AuditRecord) error {
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO audit_log (id, at, actor, role, action, target, request_id, remote_addr,
			before_json, after_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, ms(r.At), r.Actor, string(r.Role), r.Action, r.Target, r.RequestID, r.RemoteAddr, nullJSON(r.Before), nullJSON(r.After))
		if err != nil {
			return fmt.Errorf("sqlitestore: append audit record: %w", err)
		}
		return nil
	})
}

// AuditList implements store.AccessStore.
func (s *Store) AuditList(ctx context.Context, p store.AuditListParams) (store.AuditListResult, error) {
	q, args, limit := store.AuditListQuery(p,
		`id, at, actor, role, action, target, request_id, remote_addr, before_json, after_json`,
		func(int) string { return "?" })
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.AuditListResult{}, fmt.Errorf("sqlitestore: list audit log: %w", err)
	}
	defer rows.Close()
	var recs []rota.AuditRecord
	for rows.Next() {
		r, err := store.ScanAudit(rows)
		if err != nil {
			return store.AuditListResult{}, fmt.Errorf("sqlitestore: scan audit record: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return store.AuditListResult{}, fmt.Errorf("sqlitestore: list audit log: %w", err)
	}
	return store.AuditListPage(recs, limit), nil
}

// AuditCleanup implements store.AccessStore.
func (s *Store) AuditCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM audit_log WHERE id IN
			(SELECT id FROM audit_log WHERE at < ? ORDER BY at LIMIT ?)`, ms(before), max(limit, 1))
		if err != nil {
			return fmt.Errorf("sqlitestore: clean audit log: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// RunKinds implements store.AccessStore.
func (s *Store) RunKinds(ctx context.Context, runIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(runIDs))
	for start := 0; start < len(runIDs); start += 500 {
		ids := runIDs[start:min(start+500, len(runIDs))]
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		rows, err := s.r.QueryContext(ctx, `SELECT id, kind FROM runs WHERE id IN (`+inList(len(ids))+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: run kinds: %w", err)
		}
		for rows.Next() {
			var id, kind string
			if err := rows.Scan(&id, &kind); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlitestore: run kinds: %w", err)
			}
			out[id] = kind
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("sqlitestore: run kinds: %w", err)
		}
	}
	return out, nil
}
