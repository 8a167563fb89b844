package store

import (
	"context"
	"time"

	"github.com/rotahq/rota"
)

// AccessStore stores the API tokens and the audit log. It is part of Store
// (every backend implements it), kept apart so that the API's
// authenticator asks only for what it uses.
type AccessStore interface {
	// TokenInsert stores a new token as given (ID, Name, Role, Kinds, Hash,
	// CreatedAt). rota.ErrConflict when a token that is not revoked has the
	// same name, or any token the same id or hash.
	TokenInsert(ctx context.Context, t rota.Token) error
	// TokenGetByHash returns the token whose secret hashes to hash,
	// revoked or not (the caller checks RevokedAt). rota.ErrNotFound when
	// there is none.
	TokenGetByHash(ctx context.Context, hash string) (*rota.Token, error)
	// TokenList returns every token, revoked ones included, oldest first.
	TokenList(ctx context.Context) ([]rota.Token, error)
	// TokenRevoke marks the token revoked at p.Now and returns it; revoking
	// a revoked token changes nothing and returns it as it is.
	// rota.ErrNotFound when there is no such token.
	TokenRevoke(ctx context.Context, p TokenRevokeParams) (*rota.Token, error)

	// RunKinds returns the kind of each of the runs that exist, by run id
	// (unknown ids are absent), so that a token confined to some kinds can
	// be refused reports on runs of others.
	RunKinds(ctx context.Context, runIDs []string) (map[string]string, error)

	// AuditAppend appends one record to the audit log. Records are never
	// changed; AuditCleanup deletes old ones.
	AuditAppend(ctx context.Context, rec rota.AuditRecord) error
	// AuditList returns the records that match p, newest first (by ID,
	// which rota.IDGenerator makes time-ordered), and a cursor for the
	// next page ("" on the last one).
	AuditList(ctx context.Context, p AuditListParams) (AuditListResult, error)
	// AuditCleanup deletes up to limit records older than before, oldest
	// first, and returns how many it deleted. A leader duty.
	AuditCleanup(ctx context.Context, before time.Time, limit int) (int, error)
}

// TokenRevokeParams names the token to revoke.
type TokenRevokeParams struct {
	ID  string
	Now time.Time
}

// AuditListParams filter and page the audit log. Zero values match
// everything.
type AuditListParams struct {
	Actor  string
	Action string
	Target string
	// Since keeps the records at or after this instant.
	Since time.Time
	// Cursor is the NextCursor of the previous page: records with an ID
	// below it.
	Cursor string
	// Limit is the page size (at least 1).
	Limit int
}

// AuditListResult is a page of the audit log.
type AuditListResult struct {
	Records    []rota.AuditRecord
	NextCursor string
}
