-- The no-worker alarm (TaskPinnedWaiting) groups the pinned tasks waiting
-- now by kind and worker ids. It read them through tasks_ready, whose
-- pinned column comes after kind and level, so it walked every available
-- task: 170–285 ms of PostgreSQL CPU a call with 1,000,000 waiting (the
-- scale benchmark, auto_explain), every few seconds. This index holds only
-- available pinned tasks, so a task that names no worker (nearly all)
-- never writes an entry in it. (sqlitestore's migration 0014 is the same.)
CREATE INDEX tasks_pinned_waiting ON tasks (kind, worker_ids, run_at) WHERE avail AND pinned;
