package pgstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.AccessStore = (*Store)(nil)

const tokenCols = `id, name, role, kinds::text, hash, created_at, revoked_at`

func scanToken(row pgx.Row) (*rota.Token, error) { return store.ScanToken(row) }

// TokenInsert implements store.AccessStore. The unique keys (id, hash, the
// name of a live token) make a duplicate a rota.ErrConflict.
func (s *Store) TokenInsert(ctx context.Context, t rota.Token) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO tokens (id, name, role, kinds, hash, created_at, revoked_at)
		VALUES ($1, $2, $3, $4::json, $5, $6, 0)`,
		t.ID, t.Name, string(t.Role), store.TokenKindsJSON(t.Kinds), t.Hash, ms(t.CreatedAt))
	if err != nil {
		return s.translate("insert token "+t.Name, err)
	}
	return nil
}

// TokenGetByHash implements store.AccessStore.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*rota.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rota.Errorf(rota.CodeNotFound, "token not found")
	}
	if err != nil {
		return nil, s.translate("get token", err)
	}
	return t, nil
}

// TokenList implements store.AccessStore.
func (s *Store) TokenList(ctx context.Context) ([]rota.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, s.translate("list tokens", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Token, error) {
		t, err := scanToken(row)
		if err != nil {
			return rota.Token{}, err
		}
		return *t, nil
	})
	if err != nil {
		return nil, s.translate("list tokens", err)
	}
	return out, nil
}

// TokenRevoke implements store.AccessStore: one statement that sets
// revoked_at when unset and returns the row either way.
func (s *Store) TokenRevoke(ctx context.Context, p store.TokenRevokeParams) (*rota.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `WITH u AS (
			UPDATE tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at = 0 RETURNING `+tokenCols+`)
		SELECT * FROM u
		UNION ALL SELECT `+tokenCols+` FROM tokens WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM u)`, p.ID, ms(p.Now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("token", p.ID)
	}
	if err != nil {
		return nil, s.translate("revoke token "+p.ID, err)
	}
	return t, nil
}

// AuditAppend implements store.AccessStore.
func (s *Store) AuditAppend(ctx context.Context, r rota.AuditRecord) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_log (id, at, actor, role, action, target, request_id, remote_addr,
		before_json, after_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::json, $10::json)`,
		r.ID, ms(r.At), r.Actor, string(r.Role), r.Action, r.Target, r.RequestID, r.RemoteAddr, nullJSON(r.Before), nullJSON(r.After))
	if err != nil {
		return s.translate("append audit record", err)
	}
	return nil
}

// AuditList implements store.AccessStore.
func (s *Store) AuditList(ctx context.Context, p store.AuditListParams) (store.AuditListResult, error) {
	q, args, limit := store.AuditListQuery(p,
		`id, at, actor, role, action, target, request_id, remote_addr, before_json::text, after_json::text`,
		func(n int) string { return "$" + strconv.Itoa(n) })
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return store.AuditListResult{}, s.translate("list audit log", err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.AuditRecord, error) { return store.ScanAudit(row) })
	if err != nil {
		return store.AuditListResult{}, s.translate("list audit log", err)
	}
	return store.AuditListPage(recs, limit), nil
}

// AuditCleanup implements store.AccessStore.
func (s *Store) AuditCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit_log WHERE id IN
		(SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2)`, ms(before), max(limit, 1))
	if err != nil {
		return 0, s.translate("clean audit log", err)
	}
	return int(tag.RowsAffected()), nil
}

// RunKinds implements store.AccessStore.
func (s *Store) RunKinds(ctx context.Context, runIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(runIDs))
	rows, err := s.pool.Query(ctx, `SELECT id, kind FROM runs WHERE id = ANY($1)`, runIDs)
	if err != nil {
		return nil, s.translate("run kinds", err)
	}
	var id, kind string
	_, err = pgx.ForEachRow(rows, []any{&id, &kind}, func() error {
		out[id] = kind
		return nil
	})
	if err != nil {
		return nil, s.translate("run kinds", err)
	}
	return out, nil
}
