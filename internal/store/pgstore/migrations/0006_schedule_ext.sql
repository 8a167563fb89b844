-- Schedules, complete: failure policies BACKOFF and HALF_OPEN, jitter
-- (options, JSON), their state and a plan's end reason (ext_state, JSON),
-- and the error state (error_message, filtered on by state=error). As
-- sqlitestore's 0008_schedule_ext.sql.
ALTER TABLE schedules
    ADD COLUMN options       text NOT NULL DEFAULT '{}',
    ADD COLUMN ext_state     text NOT NULL DEFAULT '{}',
    ADD COLUMN error_message text NOT NULL DEFAULT '';
