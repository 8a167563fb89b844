-- Indexes that every task moved through on the hot path, for lists only.
--
-- A claim and a report change a task's status, so neither is a HOT update:
-- each new row version gets an entry in every index of tasks. tasks_kind_id
-- (kind, id) and tasks_status_id (status, id) served only lists and counts,
-- yet took six of a task's fourteen index entries (insert, claim, report:
-- two each). Dropped, in the e2e benchmark the PostgreSQL CPU per task fell
-- by ~15%.
--
-- Lists are served so:
--   - by a status other than SUCCESS and RUNNING (SCHEDULED, WAITING and
--     the rare ends): tasks_status_list below, which a task enters when it
--     is submitted (SCHEDULED) and leaves at its claim, so it costs one
--     entry per task; the list statement repeats its predicate (see
--     listStatusHint) so that a generic plan may use it;
--   - RUNNING: the tasks of the RUNNING runs (tasks_running and run_log's
--     partial indexes), few by nature;
--   - SUCCESS, a kind alone, or no filter: the primary key read backwards
--     (ids are time-ordered), which finds the tasks of a common kind or
--     status at once; a rare kind in a large table costs a longer read.
--   - counts by status read the table, as Stats' counts already did.
DROP INDEX tasks_kind_id;
DROP INDEX tasks_status_id;
CREATE INDEX tasks_status_list ON tasks (status, id) WHERE status <> 'SUCCESS' AND status <> 'RUNNING';
