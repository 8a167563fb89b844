package mongotest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // FerretDB's own SQLite driver, to read its files
)

// FerretDB v1.24's SQLite backend indexes a collection's _id as the
// expression _ferretdb_sjson->"_id" but reads a document by _id with
// WHERE _ferretdb_sjson->'$._id' = ?: SQLite matches an expression index
// only on the same expression, so every read, update and delete by _id
// scans the whole table and parses each document's JSON (the
// EXPLAIN QUERY PLAN of the two forms: SCAN against SEARCH USING INDEX).
// On a collection of N tasks each task write then costs O(N) and a run
// of N tasks O(N²): 2,000 tasks did not finish.
//
// indexIDs works around it for the embedded server of the tests: every
// interval it gives each table of each database of dir (the tables that
// _ferretdb_collections lists) the index FerretDB's query can use. The
// index is FerretDB's own _id index under the expression its queries
// say; FerretDB does not know of it (listIndexes does not show it) and a
// collection's drop drops it with the table. It changes no result, only
// the plan.
func indexIDs(ctx context.Context, dir string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.sqlite"))
		for _, f := range files {
			if err := indexIDsOf(ctx, f); err != nil && ctx.Err() == nil {
				ferretLogger().Warn("mongotest: _id index", "file", f, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// indexIDsOf adds the missing _id indexes of one database file (opened
// read-write but never created: a database FerretDB just dropped stays
// gone).
func indexIDsOf(ctx context.Context, file string) error {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file)+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, `SELECT c.table_name FROM _ferretdb_collections c
		WHERE NOT EXISTS (SELECT 1 FROM sqlite_master m WHERE m.type = 'index' AND m.name = c.table_name || '_rota_id')
		AND EXISTS (SELECT 1 FROM sqlite_master m WHERE m.type = 'table' AND m.name = c.table_name)`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil // a database FerretDB is still creating
		}
		return fmt.Errorf("tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return fmt.Errorf("tables: %w", err)
		}
		tables = append(tables, t)
	}
	rows.Close()
	for _, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (_ferretdb_sjson->'$._id')`, t+"_rota_id", t)
		if _, err := db.ExecContext(ctx, q); err != nil && !strings.Contains(err.Error(), "no such table") {
			return fmt.Errorf("index %s: %w", t, err)
		}
	}
	return nil
}
