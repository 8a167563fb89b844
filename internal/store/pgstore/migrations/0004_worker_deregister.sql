-- A worker that stopped gracefully deregisters: it lists as stopped until
-- it claims again. Workers not seen for the retention are pruned by
-- last sighting.
ALTER TABLE workers ADD COLUMN deregistered boolean NOT NULL DEFAULT false;
CREATE INDEX workers_last_seen ON workers (last_seen);
