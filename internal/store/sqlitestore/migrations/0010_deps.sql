-- Task dependencies. deps_waiting counts a task's dependencies that have
-- not succeeded yet: a WAITING task (deps_waiting > 0) is not avail, so the
-- claim path never sees it. The triggers settle dependents in the
-- transaction that settles the parent, set-based: a parent's SUCCESS
-- releases the dependents it was the last wait of; a parent ending any
-- other terminal status cancels its WAITING dependents, whose own
-- cancelation fires the trigger again down the chain (recursive_triggers).
ALTER TABLE tasks ADD COLUMN deps_waiting INTEGER NOT NULL DEFAULT 0;

CREATE TABLE task_deps (
    task_id TEXT NOT NULL, -- the dependent (child)
    dep_id  TEXT NOT NULL, -- the dependency (parent)
    PRIMARY KEY (task_id, dep_id)
) WITHOUT ROWID;
CREATE INDEX task_deps_dep ON task_deps (dep_id, task_id);

CREATE TRIGGER tasks_deps_succeeded AFTER UPDATE OF status ON tasks
WHEN new.status = 'SUCCESS' AND old.status <> 'SUCCESS'
BEGIN
    UPDATE tasks SET deps_waiting = deps_waiting - 1,
        status = CASE WHEN deps_waiting = 1 THEN 'SCHEDULED' ELSE status END,
        avail = CASE WHEN deps_waiting = 1 THEN 1 ELSE 0 END,
        updated_at = new.updated_at
    WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = new.id) AND status = 'WAITING';
END;

CREATE TRIGGER tasks_deps_failed AFTER UPDATE OF status ON tasks
WHEN new.status IN ('FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED') AND old.status NOT IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')
BEGIN
    UPDATE tasks SET status = 'CANCELED', done = 1, avail = 0, end_time = new.end_time,
        message = 'dependency_failed: task ' || new.id || ' ended ' || new.status,
        updated_at = new.updated_at
    WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = new.id) AND status = 'WAITING';
END;

-- A deleted task (cleanup) takes its links along.
CREATE TRIGGER tasks_deps_deleted AFTER DELETE ON tasks
BEGIN
    DELETE FROM task_deps WHERE task_id = old.id;
    DELETE FROM task_deps WHERE dep_id = old.id;
END;
