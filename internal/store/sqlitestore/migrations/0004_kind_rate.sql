-- Token bucket of a kind's rate limit: tokens left at rate_at (unix ms).
ALTER TABLE kinds ADD COLUMN rate_tokens REAL NOT NULL DEFAULT 0;
ALTER TABLE kinds ADD COLUMN rate_at INTEGER NOT NULL DEFAULT 0;
-- Retention cleanup: finished tasks by kind and end time.
CREATE INDEX tasks_done_end ON tasks (kind, end_time) WHERE done = 1;
