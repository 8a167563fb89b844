-- The no-worker alarm (TaskPinnedWaiting) groups the pinned tasks waiting
-- now by kind and worker ids. Without an index of them it read the whole
-- tasks table every few seconds (~0.15 s at 300,000 tasks, ~0.5 s at
-- 1,000,000). This index holds only available pinned tasks, so a task
-- that names no worker (nearly all) never writes an entry in it.
CREATE INDEX tasks_pinned_waiting ON tasks (kind, worker_ids, run_at) WHERE avail = 1 AND pinned = 1;
