-- Push dispatch. A kind's dispatch mode ('pull' or 'push'), and the
-- registrations of push workers: the HTTP address Rota posts their tasks
-- to and how many they take at once. A registration belongs to the worker
-- row of the same id (which lists, stops and prunes as any worker's);
-- readers ignore a registration whose worker was pruned.
ALTER TABLE kinds ADD COLUMN dispatch VARCHAR(8) NOT NULL DEFAULT 'pull'
;
CREATE TABLE push_workers (
    worker_id     VARCHAR(256)  NOT NULL PRIMARY KEY,
    address       VARCHAR(2048) NOT NULL,
    capacity      INT           NOT NULL,
    registered_at BIGINT        NOT NULL
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
;
