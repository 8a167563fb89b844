-- Rota schema for MySQL 8 / MariaDB 10.6+, version 1: the lean model (docs
-- LEAN.md). Instants are unix milliseconds (UTC); 0 = unset. Statements are
-- separated by a line holding only ";".
--
-- A task with one worker carries its current run in its own row (the run_*
-- columns): a claim, a heartbeat and a report each write that row once. The
-- finished run stays there until a newer attempt replaces it; only then is
-- it moved to run_history. Tasks with several workers keep their runs in
-- run_history. The view runs reads both as one table of runs.
CREATE TABLE kinds (
    name              VARCHAR(256) NOT NULL PRIMARY KEY,
    priority_factor   INT          NOT NULL DEFAULT 2,
    paused            TINYINT      NOT NULL DEFAULT 0,
    max_running       INT          NOT NULL DEFAULT 0,
    rate              DOUBLE       NOT NULL DEFAULT 0,
    retention_seconds BIGINT       NOT NULL DEFAULT 0,
    round_pos         INT          NOT NULL DEFAULT 0,
    rate_tokens       DOUBLE       NOT NULL DEFAULT 0,
    rate_at           BIGINT       NOT NULL DEFAULT 0
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE tasks (
    id               VARCHAR(128) NOT NULL PRIMARY KEY,
    kind             VARCHAR(256) NOT NULL,
    level            TINYINT      NOT NULL,
    payload          LONGTEXT     NOT NULL,
    "key"            VARCHAR(256),
    key_held         TINYINT      NOT NULL DEFAULT 1,
    held_key         VARCHAR(256) AS (CASE WHEN key_held = 1 THEN "key" END) STORED,
    status           VARCHAR(16)  NOT NULL,
    done             TINYINT      NOT NULL DEFAULT 0,
    avail            TINYINT      NOT NULL DEFAULT 1,
    attempt          INT          NOT NULL DEFAULT 0,
    failures         INT          NOT NULL DEFAULT 0,
    successes        INT          NOT NULL DEFAULT 0,
    running          INT          NOT NULL DEFAULT 0,
    max_retries      INT          NOT NULL,
    workers          INT          NOT NULL,
    worker_ids       TEXT,
    pinned           TINYINT      NOT NULL DEFAULT 0,
    timeout_s        INT          NOT NULL,
    hb_timeout_s     INT          NOT NULL,
    stop_requested   TINYINT      NOT NULL DEFAULT 0,
    created_at       BIGINT       NOT NULL,
    run_at           BIGINT       NOT NULL,
    start_time       BIGINT       NOT NULL DEFAULT 0,
    end_time         BIGINT       NOT NULL DEFAULT 0,
    worker_address   VARCHAR(256) NOT NULL DEFAULT '',
    message          MEDIUMTEXT   NOT NULL,
    result           LONGTEXT,
    schedule_id      VARCHAR(128) NOT NULL DEFAULT '',
    fire_time        BIGINT       NOT NULL DEFAULT 0,
    schedule_attempt INT          NOT NULL DEFAULT 0,
    skip_reason      VARCHAR(64)  NOT NULL DEFAULT '',
    triggered        TINYINT      NOT NULL DEFAULT 0,
    held             TINYINT      NOT NULL DEFAULT 0,
    fire_key         BIGINT AS (CASE WHEN schedule_id <> '' AND triggered = 0 THEN fire_time END) STORED,
    deps_waiting     INT          NOT NULL DEFAULT 0,
    dependents       INT          NOT NULL DEFAULT 0,
    updated_at       BIGINT       NOT NULL,
    -- The current run of a one-worker task ('' when none).
    run_id           VARCHAR(128) NOT NULL DEFAULT '',
    run_worker       VARCHAR(256) NOT NULL DEFAULT '',
    run_status       VARCHAR(16)  NOT NULL DEFAULT '',
    run_start        BIGINT       NOT NULL DEFAULT 0,
    run_end          BIGINT       NOT NULL DEFAULT 0,
    run_lease        BIGINT       NOT NULL DEFAULT 0,
    run_deadline     BIGINT       NOT NULL DEFAULT 0,
    run_stop         TINYINT      NOT NULL DEFAULT 0,
    run_message      MEDIUMTEXT   NOT NULL,
    -- 1 while the row's run is RUNNING, else NULL: the reaper's index holds
    -- running tasks only.
    run_live         TINYINT      NULL,
    -- Idempotency: one task holds each kind and key, finished or not.
    UNIQUE KEY tasks_held_key (kind, held_key),
    -- At most one run per (schedule, fire time), triggered runs aside.
    UNIQUE KEY tasks_schedule_fire (schedule_id, fire_key),
    -- Claims: per kind and level, pinned or not, oldest first.
    KEY tasks_ready (kind, avail, level, pinned, run_at, id),
    -- The next due time of delayed tasks (TaskNextRunAt), the oldest waiting.
    KEY tasks_due (kind, avail, run_at),
    -- Reports find their task by run id (changed by claims only).
    KEY tasks_run (run_id),
    KEY tasks_live (run_live),
    KEY tasks_status_id (status, id),
    KEY tasks_kind_status (kind, status),
    KEY tasks_schedule_open (schedule_id, done, fire_time),
    KEY tasks_done_end (done, kind, end_time)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE run_history (
    id               VARCHAR(128) NOT NULL PRIMARY KEY,
    task_id          VARCHAR(128) NOT NULL,
    kind             VARCHAR(256) NOT NULL,
    worker_id        VARCHAR(256) NOT NULL,
    worker_address   VARCHAR(256) NOT NULL DEFAULT '',
    attempt          INT          NOT NULL,
    status           VARCHAR(16)  NOT NULL,
    start_time       BIGINT       NOT NULL,
    end_time         BIGINT       NOT NULL DEFAULT 0,
    lease_expires_at BIGINT       NOT NULL DEFAULT 0,
    deadline         BIGINT       NOT NULL DEFAULT 0,
    stop_requested   TINYINT      NOT NULL DEFAULT 0,
    message          MEDIUMTEXT   NOT NULL,
    run_live         TINYINT      NULL,
    KEY run_history_task (task_id, id),
    KEY run_history_live (run_live, worker_id),
    KEY run_history_worker (worker_id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE VIEW runs AS
    SELECT id, task_id, kind, worker_id, worker_address, attempt, status, start_time, end_time,
        lease_expires_at, deadline, stop_requested, message
    FROM run_history
    UNION ALL
    SELECT run_id, id, kind, run_worker, worker_address, attempt, run_status, run_start, run_end,
        run_lease, run_deadline, run_stop, run_message
    FROM tasks WHERE run_id <> ''
;
CREATE TABLE task_deps (
    task_id VARCHAR(128) NOT NULL,
    dep_id  VARCHAR(128) NOT NULL,
    PRIMARY KEY (task_id, dep_id),
    KEY task_deps_dep (dep_id, task_id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE workers (
    id             VARCHAR(256) NOT NULL PRIMARY KEY,
    address        VARCHAR(256) NOT NULL DEFAULT '',
    kinds          TEXT         NOT NULL,
    first_seen     BIGINT       NOT NULL,
    last_seen      BIGINT       NOT NULL,
    last_wait_ms   BIGINT       NOT NULL DEFAULT 0,
    stop_requested TINYINT      NOT NULL DEFAULT 0,
    deregistered   TINYINT      NOT NULL DEFAULT 0,
    KEY workers_last_seen (last_seen)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE leader (
    id         INT          NOT NULL PRIMARY KEY,
    node_id    VARCHAR(256) NOT NULL,
    term       BIGINT       NOT NULL,
    expires_at BIGINT       NOT NULL
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE nodes (
    id             VARCHAR(256) NOT NULL PRIMARY KEY,
    address        VARCHAR(256) NOT NULL DEFAULT '',
    version        VARCHAR(256) NOT NULL DEFAULT '',
    started_at     BIGINT       NOT NULL,
    last_heartbeat BIGINT       NOT NULL
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
-- Cross-node wake-ups: each change that makes tasks claimable appends a row
-- in its own transaction; every node polls the rows above the last id it
-- read. Pollers delete rows older than a minute.
CREATE TABLE changes (
    id     BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at     BIGINT       NOT NULL,
    node   VARCHAR(256) NOT NULL,
    self   TINYINT      NOT NULL DEFAULT 0,
    kind   VARCHAR(256) NOT NULL,
    run_at BIGINT       NOT NULL DEFAULT 0,
    events TINYINT      NOT NULL DEFAULT 0
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE schedules (
    id                 VARCHAR(128) NOT NULL PRIMARY KEY,
    name               VARCHAR(256) NOT NULL,
    kind               VARCHAR(256) NOT NULL,
    level              TINYINT      NOT NULL,
    payload            LONGTEXT     NOT NULL,
    cron_expr          VARCHAR(1024) NOT NULL DEFAULT '',
    timezone           VARCHAR(128) NOT NULL DEFAULT '',
    plan               LONGTEXT,
    enabled            TINYINT      NOT NULL,
    max_concurrency    INT          NOT NULL,
    concurrency_policy VARCHAR(32)  NOT NULL,
    overlap_action     VARCHAR(32)  NOT NULL,
    failure_action     VARCHAR(32)  NOT NULL,
    misfire_policy     VARCHAR(32)  NOT NULL,
    catchup_limit      INT          NOT NULL,
    timeout_s          INT          NOT NULL,
    target             LONGTEXT,
    version            BIGINT       NOT NULL,
    rev                BIGINT       NOT NULL,
    deleted            TINYINT      NOT NULL DEFAULT 0,
    live_name          VARCHAR(256) AS (CASE WHEN deleted = 0 THEN name END) STORED,
    created_at         BIGINT       NOT NULL,
    updated_at         BIGINT       NOT NULL,
    high_water         BIGINT       NOT NULL DEFAULT 0,
    next_fire          BIGINT       NOT NULL DEFAULT 0,
    last_run_id        VARCHAR(128) NOT NULL DEFAULT '',
    plan_seq           BIGINT       NOT NULL DEFAULT 0,
    plan_at            BIGINT       NOT NULL DEFAULT 0,
    plan_run_id        VARCHAR(128) NOT NULL DEFAULT '',
    plan_retry         INT          NOT NULL DEFAULT 0,
    real_repet         BIGINT       NOT NULL DEFAULT 0,
    ended              TINYINT      NOT NULL DEFAULT 0,
    ended_at           BIGINT       NOT NULL DEFAULT 0,
    misfire_dropped    BIGINT       NOT NULL DEFAULT 0,
    options            TEXT         NOT NULL,
    ext_state          TEXT         NOT NULL,
    error_message      TEXT         NOT NULL,
    UNIQUE KEY schedules_name (live_name),
    KEY schedules_rev (rev)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE schedule_rev (
    one INT    NOT NULL PRIMARY KEY,
    rev BIGINT NOT NULL
)
;
INSERT INTO schedule_rev (one, rev) VALUES (1, 0)
;
CREATE TABLE tokens (
    id         VARCHAR(128) NOT NULL PRIMARY KEY,
    name       VARCHAR(256) NOT NULL,
    role       VARCHAR(32)  NOT NULL,
    kinds      TEXT         NOT NULL,
    hash       VARCHAR(128) NOT NULL,
    created_at BIGINT       NOT NULL,
    revoked_at BIGINT       NOT NULL DEFAULT 0,
    live_name  VARCHAR(256) AS (CASE WHEN revoked_at = 0 THEN name END) STORED,
    UNIQUE KEY tokens_hash (hash),
    UNIQUE KEY tokens_live_name (live_name)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
CREATE TABLE audit_log (
    id          VARCHAR(128) NOT NULL PRIMARY KEY,
    at          BIGINT       NOT NULL,
    actor       VARCHAR(256) NOT NULL,
    role        VARCHAR(32)  NOT NULL,
    action      VARCHAR(128) NOT NULL,
    target      VARCHAR(512) NOT NULL,
    request_id  VARCHAR(128) NOT NULL,
    remote_addr VARCHAR(256) NOT NULL,
    before_json LONGTEXT,
    after_json  LONGTEXT,
    KEY audit_log_at (at)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
-- The event log: IDs from the one-row counter event_seq, whose row lock
-- (held to commit) hands them out in commit order; the first is the
-- creation time in unix microseconds.
CREATE TABLE events (
    id   BIGINT   NOT NULL PRIMARY KEY,
    at   BIGINT   NOT NULL,
    data LONGTEXT NOT NULL,
    KEY events_at (at)
)
;
CREATE TABLE event_seq (
    one     INT    NOT NULL PRIMARY KEY,
    last_id BIGINT NOT NULL
)
;
INSERT INTO event_seq (one, last_id) VALUES (1, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED))
