-- Event chunks compress with lz4 where the server has it (PostgreSQL 14
-- and later, built --with-lz4, as the Debian and official images are): a
-- chunk carries the events of many tasks, so it is TOASTed, and pglz's
-- compression of it was ~4% of the PostgreSQL CPU of an end-to-end run;
-- lz4 compresses the same JSON in a fraction of that. Chunks written
-- before keep pglz (each datum records its method). A server without lz4
-- keeps pglz.
DO $$
BEGIN
	EXECUTE 'ALTER TABLE events ALTER COLUMN data SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
	NULL;
END
$$;
