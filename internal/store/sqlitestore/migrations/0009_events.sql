-- The event log (the event stream reads it). The single writer orders the
-- IDs, taken from the one-row counter event_seq: consecutive, starting at
-- the creation time in unix microseconds, so IDs of an older database are
-- not mistaken for these.
CREATE TABLE events (
	id   INTEGER PRIMARY KEY,
	at   INTEGER NOT NULL, -- unix ms
	data TEXT    NOT NULL  -- store.EncodeEvent
);
CREATE TABLE event_seq (
	one     INTEGER PRIMARY KEY CHECK (one = 1),
	last_id INTEGER NOT NULL
);
INSERT INTO event_seq (one, last_id) VALUES (1, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
