-- Schedules, complete: failure policies BACKOFF and HALF_OPEN, jitter
-- (options, JSON), their state and a plan's end reason (ext_state, JSON),
-- and the error state (error_message, filtered on by state=error).
ALTER TABLE schedules ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
ALTER TABLE schedules ADD COLUMN ext_state TEXT NOT NULL DEFAULT '{}';
ALTER TABLE schedules ADD COLUMN error_message TEXT NOT NULL DEFAULT '';
