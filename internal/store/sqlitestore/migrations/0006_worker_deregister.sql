-- A worker that stopped gracefully deregisters: it lists as stopped until
-- it claims again. Workers not seen for the retention are pruned by
-- last sighting.
ALTER TABLE workers ADD COLUMN deregistered INTEGER NOT NULL DEFAULT 0;
CREATE INDEX workers_last_seen ON workers (last_seen);
