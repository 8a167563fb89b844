-- The lean store (issue 13): a task row carries its current run.
--
-- A single-worker task (workers = 1) keeps its latest run in its own row
-- (run_* columns; its attempt is the task's attempt, its worker address the
-- task's worker_address): a claim writes the task row only, a heartbeat
-- rewrites it in place (HOT: no index covers run_lease or run_message, and
-- the fillfactor leaves room on the page), a report settles run and task in
-- one update. Only when a newer attempt replaces the run is it written to
-- run_log, the history. Runs of multi-worker tasks live in run_log from
-- their claim on, as do the runs of a database written before this
-- version: nothing is moved, so a run running at the upgrade reports,
-- heartbeats and expires as before.
--
-- runs is now a view: the runs of run_log and those kept in task rows,
-- with the columns of the old table, so that every reader (TaskGet, worker
-- listings, MaxRunning counts, the reaper) reads both. Writers write the
-- table that holds the run (in_row).
ALTER TABLE runs RENAME TO run_log;

ALTER TABLE tasks
    ADD COLUMN run_id       text COLLATE "C",                  -- NULL: no run in the row
    ADD COLUMN run_worker   text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN run_status   text NOT NULL DEFAULT '',
    ADD COLUMN run_start    bigint NOT NULL DEFAULT 0,
    ADD COLUMN run_end      bigint NOT NULL DEFAULT 0,
    ADD COLUMN run_lease    bigint NOT NULL DEFAULT 0,
    ADD COLUMN run_deadline bigint NOT NULL DEFAULT 0,
    ADD COLUMN run_stop     boolean NOT NULL DEFAULT false,
    ADD COLUMN run_message  text NOT NULL DEFAULT '',
    -- Dependency bookkeeping runs only for tasks that have some: the
    -- number of tasks depending on this one, and of those it depends on.
    ADD COLUMN dependents   integer NOT NULL DEFAULT 0,
    ADD COLUMN parents      integer NOT NULL DEFAULT 0;

-- Room on each page for the new versions of its rows: heartbeats are HOT.
ALTER TABLE tasks SET (fillfactor = 80);

-- A report or heartbeat finds the task row of its run by the run id (run
-- ids are made by the caller and do not name their task). Claims and
-- reports write a new index entry anyway (they change indexed columns);
-- heartbeats change no run_id and stay HOT.
CREATE INDEX tasks_run ON tasks (run_id) WHERE run_id IS NOT NULL;
-- Running runs kept in task rows, per kind and worker: MaxRunning counts,
-- the reaper (lease in the heap), a worker's runs. RUNNING rows are few.
CREATE INDEX tasks_running ON tasks (kind, run_worker) WHERE run_status = 'RUNNING';

-- Indexes no hot statement needs: the next due time and Stats' oldest
-- waiting task read tasks_ready (one probe per level and pinned-or-not);
-- Stats' counts read the table.
DROP INDEX tasks_due;
DROP INDEX tasks_kind_status;

CREATE VIEW runs AS
    SELECT id, task_id, kind, worker_id, worker_address, attempt, status, start_time, end_time,
        lease_expires_at, deadline, expires_at, stop_requested, message, false AS in_row
    FROM run_log
    UNION ALL
    SELECT run_id, id, kind, run_worker, worker_address, attempt, run_status, run_start, run_end,
        run_lease, run_deadline,
        CASE WHEN run_status <> 'RUNNING' THEN 0
            WHEN run_deadline <> 0 AND run_deadline < run_lease THEN run_deadline ELSE run_lease END,
        run_stop, run_message, true
    FROM tasks WHERE run_id IS NOT NULL;

UPDATE tasks SET dependents = d.n FROM (SELECT dep_id, count(*) AS n FROM task_deps GROUP BY dep_id) d
    WHERE tasks.id = d.dep_id;
UPDATE tasks SET parents = d.n FROM (SELECT task_id, count(*) AS n FROM task_deps GROUP BY task_id) d
    WHERE tasks.id = d.task_id;

DROP TRIGGER tasks_deps_settle ON tasks;
CREATE TRIGGER tasks_deps_settle AFTER UPDATE OF status ON tasks
FOR EACH ROW WHEN (NEW.done AND NOT OLD.done AND NEW.dependents > 0)
EXECUTE FUNCTION tasks_deps_settle();

DROP TRIGGER tasks_deps_deleted ON tasks;
CREATE TRIGGER tasks_deps_deleted AFTER DELETE ON tasks
FOR EACH ROW WHEN (OLD.dependents > 0 OR OLD.parents > 0)
EXECUTE FUNCTION tasks_deps_deleted();

-- The event log in chunks: an append writes one row for all its events
-- (ids first_id..id; data a JSON array of [at, event] pairs), not one row
-- each. Existing events become chunks of one.
ALTER TABLE events ADD COLUMN first_id bigint;
UPDATE events SET first_id = id, data = '[[' || at || ',' || data || ']]';
ALTER TABLE events ALTER COLUMN first_id SET NOT NULL;
