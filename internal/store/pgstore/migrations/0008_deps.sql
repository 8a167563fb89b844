-- Task dependencies. deps_waiting counts a task's dependencies that have
-- not succeeded yet: a WAITING task (deps_waiting > 0) is not avail, so the
-- claim path never sees it. The trigger settles dependents in the
-- transaction that settles the parent, set-based: a parent's SUCCESS
-- releases the dependents it was the last wait of; a parent ending any
-- other terminal status cancels its WAITING dependents, whose own
-- cancelation fires the trigger again down the chain.
ALTER TABLE tasks ADD COLUMN deps_waiting integer NOT NULL DEFAULT 0;

CREATE TABLE task_deps (
    task_id text COLLATE "C" NOT NULL, -- the dependent (child)
    dep_id  text COLLATE "C" NOT NULL, -- the dependency (parent)
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX task_deps_dep ON task_deps (dep_id, task_id);

CREATE FUNCTION tasks_deps_settle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'SUCCESS' THEN
        UPDATE tasks SET deps_waiting = deps_waiting - 1,
            status = CASE WHEN deps_waiting = 1 THEN 'SCHEDULED' ELSE status END,
            avail = deps_waiting = 1,
            updated_at = NEW.updated_at
        WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = NEW.id) AND status = 'WAITING';
    ELSE
        UPDATE tasks SET status = 'CANCELED', avail = false, end_time = NEW.end_time,
            message = 'dependency_failed: task ' || NEW.id || ' ended ' || NEW.status,
            updated_at = NEW.updated_at
        WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = NEW.id) AND status = 'WAITING';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tasks_deps_settle AFTER UPDATE OF status ON tasks
FOR EACH ROW WHEN (NEW.done AND NOT OLD.done)
EXECUTE FUNCTION tasks_deps_settle();

CREATE FUNCTION tasks_deps_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM task_deps WHERE task_id = OLD.id;
    DELETE FROM task_deps WHERE dep_id = OLD.id;
    RETURN NULL;
END $$;

CREATE TRIGGER tasks_deps_deleted AFTER DELETE ON tasks
FOR EACH ROW EXECUTE FUNCTION tasks_deps_deleted();
