package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.AccessStore = (*Store)(nil)

const tokenCols = `id, name, role, kinds, hash, created_at, revoked_at`

func scanToken(sc scanner) (rota.Token, error) {
	t, err := store.ScanToken(sc)
	if err != nil {
		return rota.Token{}, err
	}
	return *t, nil
}

// TokenInsert implements store.AccessStore.
func (s *Store) TokenInsert(ctx context.Context, tok rota.Token) error {
	return s.tx(ctx, "insert token", func(t *txn) error {
		_, err := t.exec(`INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, 0)`,
			tok.ID, tok.Name, string(tok.Role), store.TokenKindsJSON(tok.Kinds), tok.Hash, ms(tok.CreatedAt))
		if isDuplicate(err) {
			return conflict("a token named %q (or with this id) already exists", tok.Name)
		}
		return wrap("insert token", err)
	})
}

// TokenGetByHash implements store.AccessStore.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*rota.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rota.Errorf(rota.CodeNotFound, "token not found")
	}
	if err != nil {
		return nil, unavailable(wrap("get token", err))
	}
	return &t, nil
}

// TokenList implements store.AccessStore.
func (s *Store) TokenList(ctx context.Context) ([]rota.Token, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
	toks, err := collect(rows, err, "list tokens", scanToken)
	return toks, unavailable(err)
}

// TokenRevoke implements store.AccessStore.
func (s *Store) TokenRevoke(ctx context.Context, p store.TokenRevokeParams) (*rota.Token, error) {
	var out rota.Token
	err := s.tx(ctx, "revoke token", func(t *txn) error {
		if _, err := t.exec(`UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, ms(p.Now), p.ID); err != nil {
			return wrap("revoke token", err)
		}
		tok, err := scanToken(t.QueryRowContext(t.ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("token", p.ID)
		}
		out = tok
		return wrap("revoke token", err)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
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
	_, err := s.r.ExecContext(ctx, `INSERT INTO audit_log (id, at, actor, role, action, target, request_id, remote_addr,
		before_json, after_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, ms(r.At), r.Actor, string(r.Role), r.Action, r.Target, r.RequestID, r.RemoteAddr, nullJSON(r.Before), nullJSON(r.After))
	return unavailable(wrap("append audit record", err))
}

// AuditList implements store.AccessStore.
func (s *Store) AuditList(ctx context.Context, p store.AuditListParams) (store.AuditListResult, error) {
	q, args, limit := store.AuditListQuery(p,
		`id, at, actor, role, action, target, request_id, remote_addr, before_json, after_json`,
		func(int) string { return "?" })
	rows, err := s.r.QueryContext(ctx, q, args...)
	recs, err := collect(rows, err, "list audit log", func(sc scanner) (rota.AuditRecord, error) { return store.ScanAudit(sc) })
	if err != nil {
		return store.AuditListResult{}, unavailable(err)
	}
	return store.AuditListPage(recs, limit), nil
}

// AuditCleanup implements store.AccessStore.
func (s *Store) AuditCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := s.r.ExecContext(ctx, `DELETE FROM audit_log WHERE at < ? ORDER BY at LIMIT ?`, ms(before), max(limit, 1))
	if err != nil {
		return 0, unavailable(wrap("clean audit log", err))
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// RunKinds implements store.AccessStore.
func (s *Store) RunKinds(ctx context.Context, runIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(runIDs))
	for start := 0; start < len(runIDs); start += 500 {
		ids := runIDs[start:min(start+500, len(runIDs))]
		in := inList(len(ids))
		rows, err := s.r.QueryContext(ctx, `SELECT run_id, kind FROM tasks WHERE run_id IN (`+in+`)
			UNION ALL SELECT id, kind FROM run_history WHERE id IN (`+in+`)`, append(anyList(ids), anyList(ids)...)...)
		pairs, err := collect(rows, err, "run kinds", func(sc scanner) ([2]string, error) {
			var v [2]string
			err := sc.Scan(&v[0], &v[1])
			return v, err
		})
		if err != nil {
			return nil, unavailable(err)
		}
		for _, p := range pairs {
			out[p[0]] = p[1]
		}
	}
	return out, nil
}
