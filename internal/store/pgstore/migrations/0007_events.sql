-- The cluster's event log (the event stream of every node reads it). IDs
-- come from the one-row counter event_seq, whose row lock is held until
-- the appending transaction commits: IDs are consecutive and become
-- visible in order. The first ID is the creation time in unix
-- microseconds, so IDs of an older database are not mistaken for these.
CREATE TABLE events (
	id   bigint PRIMARY KEY,
	at   bigint NOT NULL, -- unix ms
	data text   NOT NULL  -- store.EncodeEvent
);
CREATE TABLE event_seq (
	one     boolean PRIMARY KEY DEFAULT true CHECK (one),
	last_id bigint  NOT NULL
);
INSERT INTO event_seq (last_id) VALUES ((extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
