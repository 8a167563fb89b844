-- Rota PostgreSQL schema, version 1. Instants are bigint unix milliseconds
-- (UTC); 0 = unset. Identifiers compare bytewise (COLLATE "C"), like
-- SQLite's, whatever the database's locale: ids sort by creation time and
-- listings sort the same on every backend.

CREATE TABLE kinds (
    name              text COLLATE "C" PRIMARY KEY,
    priority_factor   integer NOT NULL DEFAULT 2,
    paused            boolean NOT NULL DEFAULT false,
    max_running       integer NOT NULL DEFAULT 0,
    rate              double precision NOT NULL DEFAULT 0,
    retention_seconds integer NOT NULL DEFAULT 0,
    round_pos         integer NOT NULL DEFAULT 0, -- position in the weighted round
    rate_tokens       double precision NOT NULL DEFAULT 0, -- rate-limit tokens left at rate_at
    rate_at           bigint NOT NULL DEFAULT 0             -- last claim; 0 = never (a full bucket)
);

-- The tokens of a kind's rate bucket at now: store.RateRefill.
CREATE FUNCTION rate_refill(rate double precision, tokens double precision, at bigint, now bigint)
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN at = 0 THEN GREATEST(1, rate)
        ELSE LEAST(GREATEST(1, rate), tokens + rate * (now - at)::double precision / 1000) END
$$;

CREATE TABLE tasks (
    id             text COLLATE "C" PRIMARY KEY,
    kind           text COLLATE "C" NOT NULL,
    level          smallint NOT NULL,                 -- 0 high, 1 mid, 2 low
    payload        json,                              -- kept as submitted; NULL when empty
    key            text COLLATE "C",                  -- NULL when none
    status         text NOT NULL,
    done           boolean NOT NULL GENERATED ALWAYS AS
                       (status IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')) STORED,
    avail          boolean NOT NULL DEFAULT true,     -- has room for a run (time aside)
    attempt        integer NOT NULL DEFAULT 0,
    failures       integer NOT NULL DEFAULT 0,
    successes      integer NOT NULL DEFAULT 0,
    running        integer NOT NULL DEFAULT 0,
    max_retries    integer NOT NULL,
    workers        integer NOT NULL,
    worker_ids     text[] COLLATE "C" NOT NULL DEFAULT '{}', -- empty = any worker
    pinned         boolean NOT NULL GENERATED ALWAYS AS (cardinality(worker_ids) > 0) STORED,
    holders        text[] COLLATE "C" NOT NULL DEFAULT '{}', -- workers with a RUNNING or SUCCESS run
    timeout_s      integer NOT NULL,
    hb_timeout_s   integer NOT NULL,
    stop_requested boolean NOT NULL DEFAULT false,
    created_at     bigint NOT NULL,
    run_at         bigint NOT NULL,
    start_time     bigint NOT NULL DEFAULT 0,
    end_time       bigint NOT NULL DEFAULT 0,
    worker_address text NOT NULL DEFAULT '',
    message        text NOT NULL DEFAULT '',
    result         json,
    schedule_id    text COLLATE "C" NOT NULL DEFAULT '',
    fire_time      bigint NOT NULL DEFAULT 0,
    updated_at     bigint NOT NULL
);

-- Idempotency: one unfinished task per kind and key (the arbiter of
-- INSERT ... ON CONFLICT in TaskInsert).
CREATE UNIQUE INDEX tasks_open_key ON tasks (kind, key) WHERE key IS NOT NULL AND NOT done;
-- Claims: per kind, level and pinned-or-not, due first (run_at <= now is a
-- range of this index, so delayed tasks are never scanned).
CREATE INDEX tasks_ready ON tasks (kind, level, pinned, run_at, id) WHERE avail;
-- Next due time of delayed tasks; oldest waiting task for Stats.
CREATE INDEX tasks_due ON tasks (kind, run_at) WHERE avail;
-- Listing (newest first within a filter) and stats.
CREATE INDEX tasks_kind_id ON tasks (kind, id);
CREATE INDEX tasks_status_id ON tasks (status, id);
CREATE INDEX tasks_key_id ON tasks (key, id) WHERE key IS NOT NULL;
CREATE INDEX tasks_kind_status ON tasks (kind, status);
CREATE INDEX tasks_schedule ON tasks (schedule_id, fire_time) WHERE schedule_id <> '';
-- Retention: finished tasks by kind and end time.
CREATE INDEX tasks_done_end ON tasks (kind, end_time) WHERE done;

-- The weighted round (f² high, f mid, 1 low per round, starting at a
-- kind's round_pos): the slot at which the i-th (0-based) task of a level
-- goes out, counted from the start of pos's round. A claim takes the tasks
-- with the smallest slots; see pgstore's claim.go.
CREATE FUNCTION round_slot(f integer, pos integer, level integer, i bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    ff  integer := GREATEST(f, 1);
    rnd integer := ff * ff + ff + 1;                                                  -- slots per round
    fst integer := CASE level WHEN 0 THEN 0 WHEN 1 THEN ff * ff ELSE ff * ff + ff END; -- the level's first slot
    per integer := CASE level WHEN 0 THEN ff * ff WHEN 1 THEN ff ELSE 1 END;          -- the level's slots per round
    p   integer := CASE WHEN pos < 0 OR pos >= rnd THEN 0 ELSE pos END;
    frm integer := GREATEST(p, fst);
    lft integer := GREATEST(0, fst + per - frm);                                      -- its slots left in pos's round
BEGIN
    IF i < lft THEN
        RETURN frm + i;
    END IF;
    RETURN rnd::bigint * (1 + (i - lft) / per) + fst + (i - lft) % per;
END
$$;

CREATE TABLE runs (
    id               text COLLATE "C" PRIMARY KEY,
    task_id          text COLLATE "C" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    kind             text COLLATE "C" NOT NULL,
    worker_id        text COLLATE "C" NOT NULL,
    worker_address   text NOT NULL DEFAULT '',
    attempt          integer NOT NULL,
    status           text NOT NULL,
    start_time       bigint NOT NULL,
    end_time         bigint NOT NULL DEFAULT 0,
    lease_expires_at bigint NOT NULL DEFAULT 0,
    deadline         bigint NOT NULL DEFAULT 0,
    expires_at       bigint NOT NULL DEFAULT 0, -- min(lease, deadline) while RUNNING
    stop_requested   boolean NOT NULL DEFAULT false,
    message          text NOT NULL DEFAULT ''
);

-- A task's runs, oldest first (TaskGet; multi-worker claims).
CREATE INDEX runs_task ON runs (task_id, id);
-- The reaper (oldest expiry first, then by id, as SQLite orders) and
-- RunNextExpiry.
CREATE INDEX runs_expiry ON runs (expires_at, id) WHERE status = 'RUNNING';
-- Running runs per kind (MaxRunning) and per worker (WorkerList): counted,
-- not kept in counters that every report would have to lock.
CREATE INDEX runs_kind_running ON runs (kind) WHERE status = 'RUNNING';
CREATE INDEX runs_worker_running ON runs (worker_id) WHERE status = 'RUNNING';

CREATE TABLE workers (
    id             text COLLATE "C" PRIMARY KEY,
    address        text NOT NULL DEFAULT '',
    kinds          text[] NOT NULL DEFAULT '{}',
    first_seen     bigint NOT NULL,
    last_seen      bigint NOT NULL,
    last_wait_ms   bigint NOT NULL DEFAULT 0,
    stop_requested boolean NOT NULL DEFAULT false
);

-- Leader lease: at most one row; term is the fencing token.
CREATE TABLE leader (
    id         integer PRIMARY KEY CHECK (id = 1),
    node_id    text COLLATE "C" NOT NULL,
    term       bigint NOT NULL,
    expires_at bigint NOT NULL
);

CREATE TABLE nodes (
    id             text COLLATE "C" PRIMARY KEY,
    address        text NOT NULL DEFAULT '',
    version        text NOT NULL DEFAULT '',
    started_at     bigint NOT NULL,
    last_heartbeat bigint NOT NULL
);
