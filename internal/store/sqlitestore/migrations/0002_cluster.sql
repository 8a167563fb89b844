-- Leader lease and node registry (one node for the embedded store, but the
-- same contract as shared stores).
CREATE TABLE leader (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    node_id    TEXT    NOT NULL,
    term       INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE nodes (
    id             TEXT PRIMARY KEY,
    address        TEXT    NOT NULL DEFAULT '',
    version        TEXT    NOT NULL DEFAULT '',
    started_at     INTEGER NOT NULL,
    last_heartbeat INTEGER NOT NULL
) WITHOUT ROWID;
