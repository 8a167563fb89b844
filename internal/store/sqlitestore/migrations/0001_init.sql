-- Rota schema, version 1. Instants are unix milliseconds (UTC); 0 = unset.
CREATE TABLE kinds (
    name              TEXT PRIMARY KEY,
    priority_factor   INTEGER NOT NULL DEFAULT 2,
    paused            INTEGER NOT NULL DEFAULT 0,
    max_running       INTEGER NOT NULL DEFAULT 0,
    rate              REAL    NOT NULL DEFAULT 0,
    retention_seconds INTEGER NOT NULL DEFAULT 0,
    round_pos         INTEGER NOT NULL DEFAULT 0  -- position in the weighted round
) WITHOUT ROWID;

CREATE TABLE tasks (
    id             TEXT PRIMARY KEY,
    kind           TEXT    NOT NULL,
    level          INTEGER NOT NULL,           -- 0 high, 1 mid, 2 low
    payload        TEXT    NOT NULL,
    key            TEXT,                       -- NULL when none
    status         TEXT    NOT NULL,
    done           INTEGER NOT NULL DEFAULT 0, -- status is terminal
    avail          INTEGER NOT NULL DEFAULT 1, -- has room for a run (time aside)
    attempt        INTEGER NOT NULL DEFAULT 0,
    failures       INTEGER NOT NULL DEFAULT 0,
    successes      INTEGER NOT NULL DEFAULT 0,
    running        INTEGER NOT NULL DEFAULT 0,
    max_retries    INTEGER NOT NULL,
    workers        INTEGER NOT NULL,
    worker_ids     TEXT,                       -- JSON array; NULL = any worker
    pinned         INTEGER NOT NULL DEFAULT 0,
    timeout_s      INTEGER NOT NULL,
    hb_timeout_s   INTEGER NOT NULL,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    run_at         INTEGER NOT NULL,
    start_time     INTEGER NOT NULL DEFAULT 0,
    end_time       INTEGER NOT NULL DEFAULT 0,
    worker_address TEXT    NOT NULL DEFAULT '',
    message        TEXT    NOT NULL DEFAULT '',
    result         TEXT,
    schedule_id    TEXT    NOT NULL DEFAULT '',
    fire_time      INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL
) WITHOUT ROWID;

-- Idempotency: one unfinished task per kind and key.
CREATE UNIQUE INDEX tasks_open_key ON tasks (kind, key) WHERE key IS NOT NULL AND done = 0;
-- Claims: per kind and level, pinned or not, oldest first.
CREATE INDEX tasks_ready ON tasks (kind, level, pinned, run_at, id) WHERE avail = 1;
-- Next due time of delayed tasks, oldest waiting.
CREATE INDEX tasks_due ON tasks (kind, run_at) WHERE avail = 1;
-- Listing and stats.
CREATE INDEX tasks_kind_id ON tasks (kind, id);
CREATE INDEX tasks_status_id ON tasks (status, id);
CREATE INDEX tasks_key_id ON tasks (key, id) WHERE key IS NOT NULL;
CREATE INDEX tasks_kind_status ON tasks (kind, status);
CREATE INDEX tasks_schedule ON tasks (schedule_id, fire_time) WHERE schedule_id <> '';

CREATE TABLE runs (
    id               TEXT PRIMARY KEY,
    task_id          TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    worker_id        TEXT    NOT NULL,
    worker_address   TEXT    NOT NULL DEFAULT '',
    attempt          INTEGER NOT NULL,
    status           TEXT    NOT NULL,
    start_time       INTEGER NOT NULL,
    end_time         INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER NOT NULL DEFAULT 0,
    deadline         INTEGER NOT NULL DEFAULT 0,
    expires_at       INTEGER NOT NULL DEFAULT 0, -- min(lease, deadline) while RUNNING
    stop_requested   INTEGER NOT NULL DEFAULT 0,
    message          TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;

CREATE INDEX runs_task ON runs (task_id, id);
CREATE INDEX runs_expiry ON runs (expires_at) WHERE status = 'RUNNING';
-- Running runs per worker and per kind (counts for the worker list and the
-- max_running cap), kept small by the partial predicate.
CREATE INDEX runs_worker_active ON runs (worker_id) WHERE status = 'RUNNING';
CREATE INDEX runs_kind_active ON runs (kind) WHERE status = 'RUNNING';

CREATE TABLE workers (
    id             TEXT PRIMARY KEY,
    address        TEXT    NOT NULL DEFAULT '',
    kinds          TEXT    NOT NULL DEFAULT '[]',
    first_seen     INTEGER NOT NULL,
    last_seen      INTEGER NOT NULL,
    last_wait_ms   INTEGER NOT NULL DEFAULT 0,
    stop_requested INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
