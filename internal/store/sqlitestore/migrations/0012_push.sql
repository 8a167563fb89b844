-- Push dispatch. A kind's dispatch mode ('pull' or 'push'), and the
-- registrations of push workers: the HTTP address Rota posts their tasks
-- to and how many they take at once. A registration belongs to the worker
-- row of the same id (which lists, stops and prunes as any worker's);
-- readers ignore a registration whose worker was pruned.
ALTER TABLE kinds ADD COLUMN dispatch TEXT NOT NULL DEFAULT 'pull';

CREATE TABLE push_workers (
    worker_id     TEXT PRIMARY KEY,
    address       TEXT    NOT NULL,
    capacity      INTEGER NOT NULL,
    registered_at INTEGER NOT NULL
) WITHOUT ROWID;
