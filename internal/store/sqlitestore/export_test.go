package sqlitestore

import (
	"context"
	"database/sql"
	"strconv"
)

// SetSchemaVersionForTest overwrites the recorded schema version of the
// database at path.
func SetSchemaVersionForTest(ctx context.Context, path string, v int) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE rota_meta SET value = ? WHERE key = 'schema_version'`, strconv.Itoa(v))
	return err
}

// ExecForTest runs statements on the database at path, outside the store.
func ExecForTest(ctx context.Context, path, stmts string) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmts)
	return err
}
