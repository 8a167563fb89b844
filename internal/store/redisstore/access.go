package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.AccessStore = (*Store)(nil)

// row is a record stored as a JSON array of column values, read back
// with the shared row scanners (store.ScanToken, store.ScanAudit).
type row []json.RawMessage

// Scan implements store.RowScanner.
func (r row) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return fmt.Errorf("row of %d values scanned into %d", len(r), len(dest))
	}
	for i, d := range dest {
		if err := json.Unmarshal(r[i], d); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

func tokenRow(t rota.Token) []any {
	return []any{t.ID, t.Name, string(t.Role), store.TokenKindsJSON(t.Kinds), t.Hash, ms(t.CreatedAt), ms(t.RevokedAt)}
}

// getToken reads token id, guarded; nil when absent.
func (t *tx) getToken(id string) (*rota.Token, error) {
	var r row
	found, err := t.get(t.s.p+"tok:"+id, &r)
	if err != nil || !found {
		return nil, err
	}
	return store.ScanToken(r)
}

// TokenInsert implements store.AccessStore.
func (s *Store) TokenInsert(ctx context.Context, tk rota.Token) error {
	return s.update(ctx, "insert token", func(t *tx) error {
		var byHash, byName string
		taken, err := t.get(s.p+"tokh:"+tk.Hash, &byHash)
		if err != nil {
			return err
		}
		named, err := t.get(s.p+"tokn:"+tk.Name, &byName)
		if err != nil {
			return err
		}
		old, err := t.getToken(tk.ID)
		if err != nil {
			return err
		}
		if taken || named || old != nil {
			return store.ConflictError("a token named %q (or with this id) already exists", tk.Name)
		}
		t.zadd(s.p+"toks", float64(ms(tk.CreatedAt)), tk.ID)
		if err := t.put(s.p+"tokh:"+tk.Hash, tk.ID); err != nil {
			return err
		}
		if err := t.put(s.p+"tokn:"+tk.Name, tk.ID); err != nil {
			return err
		}
		return t.put(s.p+"tok:"+tk.ID, tokenRow(tk))
	})
}

// TokenGetByHash implements store.AccessStore.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*rota.Token, error) {
	var out *rota.Token
	err := s.update(ctx, "get token", func(t *tx) error {
		var id string
		found, err := t.get(s.p+"tokh:"+hash, &id)
		if err != nil || !found {
			return err
		}
		out, err = t.getToken(id)
		return err
	})
	if err == nil && out == nil {
		return nil, rota.Errorf(rota.CodeNotFound, "token not found")
	}
	return out, err
}

// TokenList implements store.AccessStore: oldest first.
func (s *Store) TokenList(ctx context.Context) ([]rota.Token, error) {
	ids, err := s.rdb.ZRange(ctx, s.p+"toks", 0, -1).Result()
	if err != nil {
		return nil, s.wrap("list tokens", err)
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.p + "tok:" + id
	}
	var out []rota.Token
	err = s.readDocs(ctx, keys, func(_ int, b []byte) error {
		var r row
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		tk, err := store.ScanToken(r)
		if err == nil {
			out = append(out, *tk)
		}
		return err
	})
	return out, s.wrap("list tokens", err)
}

// TokenRevoke implements store.AccessStore.
func (s *Store) TokenRevoke(ctx context.Context, p store.TokenRevokeParams) (*rota.Token, error) {
	var out *rota.Token
	err := s.update(ctx, "revoke token", func(t *tx) error {
		tk, err := t.getToken(p.ID)
		if err != nil {
			return err
		}
		if tk == nil {
			return store.NotFoundError("token", p.ID)
		}
		out = tk
		if !tk.RevokedAt.IsZero() {
			return nil
		}
		tk.RevokedAt = tm(ms(p.Now))
		var holder string
		if _, err := t.get(s.p+"tokn:"+tk.Name, &holder); err != nil {
			return err
		}
		if holder == tk.ID {
			t.del(s.p + "tokn:" + tk.Name) // the name is free again
		}
		return t.put(s.p+"tok:"+tk.ID, tokenRow(*tk))
	})
	return out, err
}

// AuditAppend implements store.AccessStore: records by id (a sorted set
// for paging) and by time (for cleanup), bodies in one hash.
func (s *Store) AuditAppend(ctx context.Context, r rota.AuditRecord) error {
	b, err := json.Marshal([]any{r.ID, ms(r.At), r.Actor, string(r.Role), r.Action, r.Target, r.RequestID,
		r.RemoteAddr, rawOrNil(r.Before), rawOrNil(r.After)})
	if err != nil {
		return fmt.Errorf("redisstore: encode audit record: %w", err)
	}
	return s.update(ctx, "append audit record", func(t *tx) error {
		t.hset(s.p+"audit", r.ID, b)
		t.zadd(s.p+"audit:ids", 0, r.ID)
		t.zadd(s.p+"audit:at", float64(ms(r.At)), r.ID)
		return nil
	})
}

func rawOrNil(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return string(v)
}

// AuditList implements store.AccessStore: newest first from the cursor,
// filtered as read.
func (s *Store) AuditList(ctx context.Context, p store.AuditListParams) (store.AuditListResult, error) {
	limit := max(p.Limit, 1)
	max := "+"
	if p.Cursor != "" {
		max = "(" + p.Cursor
	}
	var recs []rota.AuditRecord
	const batch = 500
	for len(recs) <= limit {
		ids, err := s.rdb.ZRevRangeByLex(ctx, s.p+"audit:ids", &redis.ZRangeBy{Min: "-", Max: max, Count: batch}).Result()
		if err != nil || len(ids) == 0 {
			if err != nil {
				return store.AuditListResult{}, s.wrap("list audit log", err)
			}
			break
		}
		bodies, err := s.rdb.HMGet(ctx, s.p+"audit", ids...).Result()
		if err != nil {
			return store.AuditListResult{}, s.wrap("list audit log", err)
		}
		for _, b := range bodies {
			var r row
			if str(b) == "" || json.Unmarshal([]byte(str(b)), &r) != nil {
				continue
			}
			rec, err := store.ScanAudit(r)
			if err != nil {
				return store.AuditListResult{}, s.wrap("list audit log", err)
			}
			if auditMatches(p, rec) && len(recs) <= limit {
				recs = append(recs, rec)
			}
		}
		if len(ids) < batch {
			break
		}
		max = "(" + ids[len(ids)-1]
	}
	return store.AuditListPage(recs, limit), nil
}

func auditMatches(p store.AuditListParams, r rota.AuditRecord) bool {
	return (p.Actor == "" || r.Actor == p.Actor) && (p.Action == "" || r.Action == p.Action) &&
		(p.Target == "" || r.Target == p.Target) && (p.Since.IsZero() || ms(r.At) >= ms(p.Since))
}

// AuditCleanup implements store.AccessStore.
func (s *Store) AuditCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	n := 0
	err := s.update(ctx, "clean audit log", func(t *tx) error {
		ids, err := s.rdb.ZRangeByScore(ctx, s.p+"audit:at", &redis.ZRangeBy{Min: "-inf", Max: "(" + itoa(ms(before)),
			Count: int64(max(limit, 1))}).Result()
		if err != nil {
			return err
		}
		n = len(ids)
		for _, id := range ids {
			t.hdel(s.p+"audit", id)
			t.zrem(s.p+"audit:ids", id)
			t.zrem(s.p+"audit:at", id)
		}
		return nil
	})
	return n, err
}
