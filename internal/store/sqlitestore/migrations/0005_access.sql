-- API tokens with roles, and the audit log (issue 12). Instants are unix
-- milliseconds (UTC); 0 = unset.
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,
    kinds      TEXT NOT NULL DEFAULT '[]',   -- JSON array of kind names; [] = any kind
    hash       TEXT NOT NULL UNIQUE,         -- SHA-256 of the secret, hex
    created_at INTEGER NOT NULL,
    revoked_at INTEGER NOT NULL DEFAULT 0
);
-- A name names one live token.
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;

CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,            -- time-ordered
    at          INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    role        TEXT NOT NULL,
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    remote_addr TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT
);
CREATE INDEX audit_log_at ON audit_log (at);
