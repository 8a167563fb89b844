-- Schedules (seed 003 cron policies, seed 004 calendar plans). Instants are
-- unix milliseconds (UTC); 0 = unset.
CREATE TABLE schedules (
    id                 TEXT PRIMARY KEY,
    name               TEXT    NOT NULL,
    kind               TEXT    NOT NULL,
    level              INTEGER NOT NULL,           -- priority: 0 high, 1 mid, 2 low
    payload            TEXT    NOT NULL,
    cron_expr          TEXT    NOT NULL DEFAULT '',
    timezone           TEXT    NOT NULL DEFAULT '',
    plan               TEXT,                       -- JSON PlanSpec; NULL for cron
    enabled            INTEGER NOT NULL,
    max_concurrency    INTEGER NOT NULL,
    concurrency_policy TEXT    NOT NULL,
    overlap_action     TEXT    NOT NULL,
    failure_action     TEXT    NOT NULL,
    misfire_policy     TEXT    NOT NULL,
    catchup_limit      INTEGER NOT NULL,
    timeout_s          INTEGER NOT NULL,
    target             TEXT,                       -- JSON Target; NULL when none
    version            INTEGER NOT NULL,
    rev                INTEGER NOT NULL,           -- store-wide revision of the last configuration change
    deleted            INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    -- state
    high_water         INTEGER NOT NULL DEFAULT 0,
    next_fire          INTEGER NOT NULL DEFAULT 0,
    last_run_id        TEXT    NOT NULL DEFAULT '',
    plan_seq           INTEGER NOT NULL DEFAULT 0,
    plan_at            INTEGER NOT NULL DEFAULT 0,
    plan_run_id        TEXT    NOT NULL DEFAULT '',
    plan_retry         INTEGER NOT NULL DEFAULT 0,
    real_repet         INTEGER NOT NULL DEFAULT 0,
    ended              INTEGER NOT NULL DEFAULT 0,
    ended_at           INTEGER NOT NULL DEFAULT 0,
    misfire_dropped    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE UNIQUE INDEX schedules_name ON schedules (name) WHERE deleted = 0;
CREATE INDEX schedules_rev ON schedules (rev);

-- Schedule columns of tasks: the schedule attempt (failure_action RETRY),
-- the reason of a SKIPPED run, manual triggers and runs held back by the
-- QUEUE concurrency policy (held = 1: stored with avail = 0 until released).
ALTER TABLE tasks ADD COLUMN schedule_attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN skip_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN triggered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN held INTEGER NOT NULL DEFAULT 0;

-- At most one run per (schedule, fire time), triggered runs aside: two
-- engines racing, or a leader change, can never double-fire.
CREATE UNIQUE INDEX tasks_schedule_fire ON tasks (schedule_id, fire_time) WHERE schedule_id <> '' AND triggered = 0;
-- Unfinished runs of a schedule (policies, held-run release).
CREATE INDEX tasks_schedule_open ON tasks (schedule_id, fire_time) WHERE schedule_id <> '' AND done = 0;
