-- tasks_kind_status leaves out the tasks whose row holds a running run.
--
-- A claim moved a task's entry from (kind, SCHEDULED) to (kind, RUNNING)
-- and its report from (kind, RUNNING) to (kind, SUCCESS): a delete and an
-- insert each, on the single writer. Now a claim only deletes the entry
-- and a report only inserts it. The tasks left out (RUNNING, their run in
-- their row) are those of tasks_running; lists and counts by status read
-- both indexes (statuslist.go).
--
-- The index's condition is run_lease = 0, not run_status <> 'RUNNING': a
-- task row holds a lease (run_lease <> 0) exactly while its run runs
-- (Check verifies it), and only a condition col = value lets SQLite answer
-- a count from the index alone (a covering index), as Stats and
-- TaskCountByStatus do; with run_status <> 'RUNNING' each count read every
-- task row.
DROP INDEX tasks_kind_status;
CREATE INDEX tasks_kind_status ON tasks (kind, status) WHERE run_lease = 0;
