-- tasks_status_id (status, id) moved every task twice on the hot path: a
-- claim (SCHEDULED to RUNNING) and a report (RUNNING to SUCCESS) each
-- deleted and inserted its entry, on the single writer. tasks_kind_status
-- (kind, status, and the id that completes every index of a WITHOUT ROWID
-- table) serves its readers: a list by status is a merge of seeks, one
-- per kind and status, and a count by status groups by kind first (see
-- statuslist.go).
DROP INDEX tasks_status_id;
