package rotaapi

import (
	"encoding/json"

	"github.com/rotahq/rota"
)

// Token is an API token as GET /api/tokens lists it: never its secret.
type Token struct {
	// TokenID identifies the token (DELETE /api/tokens/{token_id}).
	TokenID string `json:"token_id"`
	// Name is the token's name, the actor of its audit records.
	Name string `json:"name"`
	// Role is what the token may do.
	Role rota.Role `json:"role"`
	// Kinds confines a submitter or worker token to these kinds; [] for
	// any kind.
	Kinds []string `json:"kinds"`
	// CreatedAt is when the token was made.
	CreatedAt int64 `json:"created_at"`
	// RevokedAt is when it was revoked; 0 while it is valid.
	RevokedAt int64 `json:"revoked_at"`
}

// TokenList is the data of GET /api/tokens.
type TokenList struct {
	// Tokens are every token, oldest first, revoked ones included.
	Tokens []Token `json:"tokens"`
}

// TokenCreateRequest is the body of POST /api/tokens.
type TokenCreateRequest struct {
	// Name is 1 to 128 characters; one live token per name.
	Name string `json:"name"`
	// Role is reader, submitter, worker, operator or admin.
	Role rota.Role `json:"role"`
	// Kinds, for submitter and worker tokens only, confines the token to
	// these kinds.
	Kinds []string `json:"kinds,omitempty"`
}

// TokenCreateResponse is the data of POST /api/tokens: the only answer
// that shows the secret.
type TokenCreateResponse struct {
	TokenID string    `json:"token_id"`
	Name    string    `json:"name"`
	Role    rota.Role `json:"role"`
	Kinds   []string  `json:"kinds"`
	// Token is the secret to send as "Authorization: Bearer <token>".
	Token string `json:"token"`
}

// Me is the data of GET /api/auth/me: who the caller is.
type Me struct {
	// Name is the token's name: "anonymous" with authentication off,
	// "bootstrap" for the --auth-token secret.
	Name string    `json:"name"`
	Role rota.Role `json:"role"`
	// Kinds confines the caller to these kinds; [] for any kind.
	Kinds []string `json:"kinds"`
	// Auth reports whether the server requires authentication.
	Auth bool `json:"auth"`
}

// AuditRecord is one record of the audit log: a change an operator made.
type AuditRecord struct {
	ID string `json:"id"`
	// At is when the change was made.
	At int64 `json:"at"`
	// Actor is the token's name; Role its role.
	Actor string    `json:"actor"`
	Role  rota.Role `json:"role"`
	// Action names the change, e.g. "task.stop", "schedule.update".
	Action string `json:"action"`
	// Target is the id or name of the object changed.
	Target string `json:"target"`
	// RequestID is the request's X-Request-ID.
	RequestID  string `json:"request_id"`
	RemoteAddr string `json:"remote_addr"`
	// Before and After are the object as the API shows it before and
	// after the change, where they are cheap to have.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// AuditList is the data of GET /api/audit: a page of records, newest
// first.
type AuditList struct {
	Records []AuditRecord `json:"records"`
	Page
}
