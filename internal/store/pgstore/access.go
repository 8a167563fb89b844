package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.AccessStore = (*Store)(nil)

const tokenCols = `id, name, role, kinds::text, hash, created_at, revoked_at`

func scanToken(row pgx.Row) (*rota.Token, error) {
	var (
		t                rota.Token
		role, kinds      string
		created, revoked int64
	)
	if err := row.Scan(&t.ID, &t.Name, &role, &kinds, &t.Hash, &created, &revoked); err != nil {
		return nil, err
	}
	t.Role = rota.Role(role)
	if err := json.Unmarshal([]byte(kinds), &t.Kinds); err != nil {
		return nil, fmt.Errorf("token %s: bad kinds %q: %w", t.ID, kinds, err)
	}
	if len(t.Kinds) == 0 {
		t.Kinds = nil
	}
	t.CreatedAt, t.RevokedAt = tm(created), tm(revoked)
	return &t, nil
}

// kindsJSON is a token's kinds as stored: a JSON array, [] for any kind.
func kindsJSON(kinds []string) string {
	if len(kinds) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(kinds) // strings always marshal
	return string(b)
}

// TokenInsert implements store.AccessStore. The unique keys (id, hash, the
// name of a live token) make a duplicate a rota.ErrConflict.
func (s *Store) TokenInsert(ctx context.Context, t rota.Token) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO tokens (id, name, role, kinds, hash, created_at, revoked_at)
		VALUES ($1, $2, $3, $4::json, $5, $6, 0)`,
		t.ID, t.Name, string(t.Role), kindsJSON(t.Kinds), t.Hash, ms(t.CreatedAt))
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
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.Actor != "" {
		add("actor = ?", p.Actor)
	}
	if p.Action != "" {
		add("action = ?", p.Action)
	}
	if p.Target != "" {
		add("target = ?", p.Target)
	}
	if !p.Since.IsZero() {
		add("at >= ?", ms(p.Since))
	}
	if p.Cursor != "" {
		add("id < ?", p.Cursor)
	}
	q := `SELECT id, at, actor, role, action, target, request_id, remote_addr, before_json::text, after_json::text FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := max(p.Limit, 1)
	args = append(args, limit+1)
	q += " ORDER BY id DESC LIMIT $" + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return store.AuditListResult{}, s.translate("list audit log", err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.AuditRecord, error) {
		var (
			r             rota.AuditRecord
			role          string
			at            int64
			before, after *string
		)
		if err := row.Scan(&r.ID, &at, &r.Actor, &role, &r.Action, &r.Target, &r.RequestID, &r.RemoteAddr, &before, &after); err != nil {
			return r, err
		}
		r.Role, r.At = rota.Role(role), tm(at)
		if before != nil {
			r.Before = json.RawMessage(*before)
		}
		if after != nil {
			r.After = json.RawMessage(*after)
		}
		return r, nil
	})
	if err != nil {
		return store.AuditListResult{}, s.translate("list audit log", err)
	}
	out := store.AuditListResult{Records: recs}
	if len(recs) > limit {
		out.Records = recs[:limit]
		out.NextCursor = recs[limit-1].ID
	}
	return out, nil
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
