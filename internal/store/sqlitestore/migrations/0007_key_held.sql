-- Republish by key: a key keeps answering its task after the task finished,
-- until the task is cleaned. The task that holds a key is marked key_held;
-- of the tasks that share a kind and key today (finished ones freed their
-- key), the unfinished one holds it, or else the newest. The others keep
-- their key for listing but hold it no more, so existing data stays valid.
ALTER TABLE tasks ADD COLUMN key_held INTEGER NOT NULL DEFAULT 1;
UPDATE tasks SET key_held = 0 WHERE key IS NOT NULL AND id IN (
    SELECT id FROM (
        SELECT id, row_number() OVER (PARTITION BY kind, key ORDER BY done, created_at DESC, id DESC) AS n
        FROM tasks WHERE key IS NOT NULL
    ) WHERE n > 1
);
DROP INDEX tasks_open_key;
-- Idempotency: one task holding each kind and key, finished or not.
CREATE UNIQUE INDEX tasks_held_key ON tasks (kind, key) WHERE key IS NOT NULL AND key_held = 1;
