package rota

import (
	"encoding/json"
	"time"
)

// Role is what an API token may do. Roles are fixed; each route of the API
// needs one of them (docs/security.md has the table):
//
//   - RoleReader: every GET, the event stream and the metrics.
//   - RoleSubmitter: a reader that may also submit tasks.
//   - RoleWorker: a reader that may also speak the worker protocol (claim,
//     heartbeat, reports, release).
//   - RoleOperator: everything but tokens and the audit log (stop, run
//     again, PATCH, kinds, schedules, worker stop, submit, the worker
//     protocol).
//   - RoleAdmin: everything.
type Role string

// The roles.
const (
	RoleReader    Role = "reader"
	RoleSubmitter Role = "submitter"
	RoleWorker    Role = "worker"
	RoleOperator  Role = "operator"
	RoleAdmin     Role = "admin"
)

// Roles lists every role, least powerful first.
func Roles() []Role {
	return []Role{RoleReader, RoleSubmitter, RoleWorker, RoleOperator, RoleAdmin}
}

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool {
	for _, x := range Roles() {
		if r == x {
			return true
		}
	}
	return false
}

// Token is an API token as stored: its secret is kept only as a SHA-256
// hash (Hash, lower-case hex).
type Token struct {
	ID   string
	Name string
	Role Role
	// Kinds, when not empty, confines a submitter or worker token to these
	// task kinds.
	Kinds     []string
	Hash      string
	CreatedAt time.Time
	// RevokedAt is when the token was revoked; zero while it is valid.
	RevokedAt time.Time
}

// AuditRecord is one entry of the audit log: a change an operator made
// through the API. Before and After, when set, are the changed object as
// the API shows it before and after the change.
type AuditRecord struct {
	ID string
	At time.Time
	// Actor is the token's name ("anonymous" with authentication off,
	// "bootstrap" for the --auth-token secret); Role is its role.
	Actor      string
	Role       Role
	Action     string // e.g. "task.stop", "schedule.update", "token.create"
	Target     string // the id or name of the object changed
	RequestID  string
	RemoteAddr string
	Before     json.RawMessage
	After      json.RawMessage
}
