-- Rota PostgreSQL schema: API tokens with roles, and the audit log (issue
-- 12), as sqlitestore's 0006_access.sql. Instants are bigint unix
-- milliseconds (UTC); 0 = unset.

CREATE TABLE tokens (
    id         text COLLATE "C" PRIMARY KEY,
    name       text COLLATE "C" NOT NULL,
    role       text NOT NULL,
    kinds      json NOT NULL DEFAULT '[]',   -- kind names; [] = any kind
    hash       text COLLATE "C" NOT NULL UNIQUE, -- SHA-256 of the secret, hex
    created_at bigint NOT NULL,
    revoked_at bigint NOT NULL DEFAULT 0
);
-- A name names one live token.
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;

CREATE TABLE audit_log (
    id          text COLLATE "C" PRIMARY KEY, -- time-ordered
    at          bigint NOT NULL,
    actor       text COLLATE "C" NOT NULL,
    role        text NOT NULL,
    action      text COLLATE "C" NOT NULL,
    target      text COLLATE "C" NOT NULL,
    request_id  text NOT NULL,
    remote_addr text NOT NULL,
    before_json json,
    after_json  json
);
CREATE INDEX audit_log_at ON audit_log (at);
