package store

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rotahq/rota"
)

// This file holds what every backend does alike with the access tables:
// reading token and audit rows, a token's kinds as stored, and the audit
// log's page query. Only SQL that differs by dialect stays in the backends.

// RowScanner is a row a backend reads: *sql.Row, *sql.Rows, pgx.Row and
// pgx.CollectableRow all are.
type RowScanner interface{ Scan(dest ...any) error }

// TokenKindsJSON is a token's kinds as stored: a JSON array, [] for any
// kind.
func TokenKindsJSON(kinds []string) string {
	if len(kinds) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(kinds) // strings always marshal
	return string(b)
}

// ScanToken reads one token row of the columns id, name, role, kinds (JSON
// text), hash, created_at, revoked_at (unix milliseconds).
func ScanToken(sc RowScanner) (*rota.Token, error) {
	var (
		t                rota.Token
		role, kinds      string
		created, revoked int64
	)
	if err := sc.Scan(&t.ID, &t.Name, &role, &kinds, &t.Hash, &created, &revoked); err != nil {
		return nil, err
	}
	t.Role = rota.Role(role)
	if err := json.Unmarshal([]byte(kinds), &t.Kinds); err != nil {
		return nil, fmt.Errorf("token %s: bad kinds %q: %w", t.ID, kinds, err)
	}
	if len(t.Kinds) == 0 {
		t.Kinds = nil
	}
	t.CreatedAt, t.RevokedAt = FromMillis(created), FromMillis(revoked)
	return &t, nil
}

// ScanAudit reads one audit row of the columns id, at, actor, role,
// action, target, request_id, remote_addr, before_json, after_json (the
// last two JSON text or NULL).
func ScanAudit(sc RowScanner) (rota.AuditRecord, error) {
	var (
		r             rota.AuditRecord
		role          string
		at            int64
		before, after *string
	)
	if err := sc.Scan(&r.ID, &at, &r.Actor, &role, &r.Action, &r.Target, &r.RequestID, &r.RemoteAddr, &before, &after); err != nil {
		return r, err
	}
	r.Role, r.At = rota.Role(role), FromMillis(at)
	if before != nil {
		r.Before = json.RawMessage(*before)
	}
	if after != nil {
		r.After = json.RawMessage(*after)
	}
	return r, nil
}

// AuditListQuery is the statement of an AuditList page: the records
// matching p's filters, newest (highest id) first, after p's cursor,
// reading cols (the backend's rendering of ScanAudit's columns) plus one
// row past the page so that AuditListPage can tell whether another page
// follows. placeholder renders the n-th argument (from 1) in the backend's
// dialect.
func AuditListQuery(p AuditListParams, cols string, placeholder func(n int) string) (query string, args []any, limit int) {
	var where []string
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" "+placeholder(len(args)))
	}
	if p.Actor != "" {
		add("actor =", p.Actor)
	}
	if p.Action != "" {
		add("action =", p.Action)
	}
	if p.Target != "" {
		add("target =", p.Target)
	}
	if !p.Since.IsZero() {
		add("at >=", Millis(p.Since))
	}
	if p.Cursor != "" {
		add("id <", p.Cursor)
	}
	query = `SELECT ` + cols + ` FROM audit_log`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	limit = max(p.Limit, 1)
	args = append(args, limit+1)
	query += " ORDER BY id DESC LIMIT " + placeholder(len(args))
	return query, args, limit
}

// AuditListPage makes the page of an AuditList from the records its
// AuditListQuery read (up to limit+1, newest first).
func AuditListPage(recs []rota.AuditRecord, limit int) AuditListResult {
	out := AuditListResult{Records: recs}
	if len(recs) > limit {
		out.Records = recs[:limit]
		out.NextCursor = recs[limit-1].ID
	}
	return out
}

// WorkerRunsSelect and WorkerRunsOrder frame the query of
// WorkerRunsActive: the backend puts its test of worker_id against the
// list of ids between them.
const (
	WorkerRunsSelect = `SELECT worker_id, id, task_id, kind, start_time FROM runs WHERE status = 'RUNNING' AND worker_id `
	WorkerRunsOrder  = ` ORDER BY worker_id, start_time, id`
)

// ScanWorkerRun reads one row of WorkerRunsSelect and adds the run to its
// worker's in out.
func ScanWorkerRun(sc RowScanner, out map[string][]rota.WorkerRun) error {
	var (
		worker string
		r      rota.WorkerRun
		start  int64
	)
	if err := sc.Scan(&worker, &r.RunID, &r.TaskID, &r.Kind, &start); err != nil {
		return err
	}
	r.StartedAt = FromMillis(start)
	out[worker] = append(out[worker], r)
	return nil
}
