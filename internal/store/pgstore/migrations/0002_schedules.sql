-- Rota PostgreSQL schema, version 2: schedules (seed 003 cron policies,
-- seed 004 calendar plans), as sqlitestore's 0003_schedules.sql. Instants
-- are bigint unix milliseconds (UTC); 0 = unset.

CREATE TABLE schedules (
    id                 text COLLATE "C" PRIMARY KEY,
    name               text COLLATE "C" NOT NULL,
    kind               text COLLATE "C" NOT NULL,
    level              smallint NOT NULL,         -- priority: 0 high, 1 mid, 2 low
    payload            json,                      -- kept as given; NULL when empty
    cron_expr          text NOT NULL DEFAULT '',
    timezone           text NOT NULL DEFAULT '',
    plan               json,                      -- PlanSpec; NULL for cron
    enabled            boolean NOT NULL,
    max_concurrency    integer NOT NULL,
    concurrency_policy text NOT NULL,
    overlap_action     text NOT NULL,
    failure_action     text NOT NULL,
    misfire_policy     text NOT NULL,
    catchup_limit      integer NOT NULL,
    timeout_s          integer NOT NULL,
    target             json,                      -- Target; NULL when none
    version            bigint NOT NULL,
    rev                bigint NOT NULL,           -- store-wide revision of the last configuration change
    deleted            boolean NOT NULL DEFAULT false,
    created_at         bigint NOT NULL,
    updated_at         bigint NOT NULL,
    -- state
    high_water         bigint NOT NULL DEFAULT 0,
    next_fire          bigint NOT NULL DEFAULT 0,
    last_run_id        text COLLATE "C" NOT NULL DEFAULT '',
    plan_seq           bigint NOT NULL DEFAULT 0,
    plan_at            bigint NOT NULL DEFAULT 0,
    plan_run_id        text COLLATE "C" NOT NULL DEFAULT '',
    plan_retry         boolean NOT NULL DEFAULT false,
    real_repet         bigint NOT NULL DEFAULT 0,
    ended              boolean NOT NULL DEFAULT false,
    ended_at           bigint NOT NULL DEFAULT 0,
    misfire_dropped    bigint NOT NULL DEFAULT 0
);

CREATE UNIQUE INDEX schedules_name ON schedules (name) WHERE NOT deleted;
CREATE INDEX schedules_rev ON schedules (rev);

-- The store-wide revision of schedule configurations: one row, not a
-- sequence. A configuration change takes the next value by updating the
-- row, whose lock it keeps until it commits, so revisions commit in order
-- and a reader that saw revision R has seen every change up to R (with a
-- sequence, revision R+1 could commit before R and a reader at R+1 would
-- never load R). Only configuration changes (insert, update, delete) take
-- it, before any other lock; fires never do.
CREATE TABLE schedule_rev (
    id  integer PRIMARY KEY CHECK (id = 1),
    rev bigint NOT NULL
);
INSERT INTO schedule_rev (id, rev) VALUES (1, 0);

-- Schedule columns of tasks: the schedule attempt (failure_action RETRY),
-- the reason of a SKIPPED run, manual triggers and runs held back by the
-- QUEUE concurrency policy. A held run is stored with avail = false until
-- it is released, so it is absent from tasks_ready and tasks_due and the
-- claim never sees it.
ALTER TABLE tasks
    ADD COLUMN schedule_attempt integer NOT NULL DEFAULT 0,
    ADD COLUMN skip_reason      text NOT NULL DEFAULT '',
    ADD COLUMN triggered        boolean NOT NULL DEFAULT false,
    ADD COLUMN held             boolean NOT NULL DEFAULT false;

-- At most one run per (schedule, fire time), triggered runs aside: two
-- engines racing, or a leader change, can never double-fire. It is the
-- arbiter of ScheduleFire's INSERT ... ON CONFLICT DO NOTHING.
CREATE UNIQUE INDEX tasks_schedule_fire ON tasks (schedule_id, fire_time) WHERE schedule_id <> '' AND NOT triggered;
-- Unfinished runs of a schedule (the live state of a fire, held-run
-- release and cancel, ScheduleOpenRuns), oldest fire first.
CREATE INDEX tasks_schedule_open ON tasks (schedule_id, fire_time, id) WHERE schedule_id <> '' AND NOT done;
-- A schedule's runs newest first (ScheduleRuns pages by fire time, then
-- id): replaces 0001's tasks_schedule, which lacked the id.
DROP INDEX tasks_schedule;
CREATE INDEX tasks_schedule_runs ON tasks (schedule_id, fire_time, id) WHERE schedule_id <> '';
