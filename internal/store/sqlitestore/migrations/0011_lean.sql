-- The lean store (issue 13): a task row carries its current run.
--
-- A single-worker task (workers = 1) keeps its latest run in its own row
-- (run_* columns; its attempt is the task's attempt, its worker address the
-- task's worker_address): a claim writes the task row only, a heartbeat
-- and a report rewrite it. Only when a newer attempt replaces the run is it
-- written to run_log, the history. Runs of multi-worker tasks live in
-- run_log from their claim on, as do the runs of a database written before
-- this version: nothing is moved, so a run running at the upgrade reports,
-- heartbeats and expires as before.
--
-- runs is now a view: the runs of run_log and those kept in task rows, with
-- the columns of the old table, so that every reader (TaskGet, worker
-- listings, MaxRunning counts, the reaper, Check) reads both. Writers write
-- the table that holds the run (in_row).
ALTER TABLE runs RENAME TO run_log;

ALTER TABLE tasks ADD COLUMN run_id TEXT;                             -- NULL: no run in the row
ALTER TABLE tasks ADD COLUMN run_worker TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN run_status TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN run_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN run_end INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN run_lease INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN run_deadline INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN run_stop INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN run_message TEXT NOT NULL DEFAULT '';
-- Dependency bookkeeping runs only for tasks that have some: the number of
-- tasks that depend on this one, and of those it depends on.
ALTER TABLE tasks ADD COLUMN dependents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN parents INTEGER NOT NULL DEFAULT 0;
-- The end of a task as its dependents see it: the store copies status here
-- when a task with dependents ends ('' until then), and the dependency
-- triggers watch this column, not status. A statement of a table with
-- triggers on the columns it sets pays for a statement journal (a copy of
-- every page it touches), so the claims and reports of tasks without
-- dependents, which set status, must not set off any trigger.
ALTER TABLE tasks ADD COLUMN dep_status TEXT NOT NULL DEFAULT '';

-- A report or heartbeat finds the task row of its run by the run id: run
-- ids are opaque ids of 32 hex characters in the API, as task ids are, so
-- they cannot also spell their task.
CREATE INDEX tasks_run ON tasks (run_id) WHERE run_id IS NOT NULL;
-- Running runs kept in task rows: MaxRunning counts, the reaper (lease read
-- in the row), a worker's runs. RUNNING rows are few.
CREATE INDEX tasks_running ON tasks (kind, run_worker) WHERE run_status = 'RUNNING';

-- An index no hot statement needs, an index write on every insert and two
-- on every claim: the next due time and Stats' oldest waiting task read
-- tasks_ready (one probe per level and pinned-or-not). tasks_kind_status
-- stays: without it Stats (every 5 s, the no-worker alarm) reads the whole
-- table, 4 s for 200,000 tasks against 0.1 s.
DROP INDEX tasks_due;

CREATE VIEW runs AS
    SELECT id, task_id, kind, worker_id, worker_address, attempt, status, start_time, end_time,
        lease_expires_at, deadline, expires_at, stop_requested, message, 0 AS in_row
    FROM run_log
    UNION ALL
    SELECT run_id, id, kind, run_worker, worker_address, attempt, run_status, run_start, run_end,
        run_lease, run_deadline,
        CASE WHEN run_status <> 'RUNNING' THEN 0
            WHEN run_deadline <> 0 AND run_deadline < run_lease THEN run_deadline ELSE run_lease END,
        run_stop, run_message, 1
    FROM tasks WHERE run_status <> '';

UPDATE tasks SET dependents = (SELECT count(*) FROM task_deps d WHERE d.dep_id = tasks.id)
    WHERE id IN (SELECT dep_id FROM task_deps);
UPDATE tasks SET parents = (SELECT count(*) FROM task_deps d WHERE d.task_id = tasks.id)
    WHERE id IN (SELECT task_id FROM task_deps);
UPDATE tasks SET dep_status = status WHERE done = 1;

-- The dependency triggers fire only for tasks with dependents (or, on
-- delete, with links at all), on dep_status: a task without pays nothing.
DROP TRIGGER tasks_deps_succeeded;
DROP TRIGGER tasks_deps_failed;
DROP TRIGGER tasks_deps_deleted;

CREATE TRIGGER tasks_deps_succeeded AFTER UPDATE OF dep_status ON tasks
WHEN new.dependents > 0 AND new.dep_status = 'SUCCESS' AND old.dep_status <> 'SUCCESS'
BEGIN
    UPDATE tasks SET deps_waiting = deps_waiting - 1,
        status = CASE WHEN deps_waiting = 1 THEN 'SCHEDULED' ELSE status END,
        avail = CASE WHEN deps_waiting = 1 THEN 1 ELSE 0 END,
        updated_at = new.updated_at
    WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = new.id) AND status = 'WAITING';
END;

CREATE TRIGGER tasks_deps_failed AFTER UPDATE OF dep_status ON tasks
WHEN new.dependents > 0 AND new.dep_status IN ('FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')
    AND old.dep_status NOT IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')
BEGIN
    UPDATE tasks SET status = 'CANCELED', dep_status = 'CANCELED', done = 1, avail = 0, end_time = new.end_time,
        message = 'dependency_failed: task ' || new.id || ' ended ' || new.dep_status,
        updated_at = new.updated_at
    WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = new.id) AND status = 'WAITING';
END;

CREATE TRIGGER tasks_deps_deleted AFTER DELETE ON tasks
WHEN old.dependents > 0 OR old.parents > 0
BEGIN
    DELETE FROM task_deps WHERE task_id = old.id;
    DELETE FROM task_deps WHERE dep_id = old.id;
END;
