package mongotest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	open := map[string]*idIndexer{} // by file: a connection kept open (opening parses the schema)
	defer func() {
		for _, x := range open {
			_ = x.db.Close()
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.sqlite"))
		seen := map[string]bool{}
		for _, f := range files {
			seen[f] = true
			x, err := openIndexer(open[f], f)
			if err == nil {
				open[f] = x
				err = indexIDsOf(ctx, x.db)
			}
			if err != nil && ctx.Err() == nil {
				ferretLogger().Warn("mongotest: _id index", "file", f, "err", err)
			}
		}
		for f, x := range open {
			if !seen[f] {
				_ = x.db.Close()
				delete(open, f)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// idIndexer is a connection to one database file (the file's inode: a
// database dropped and created again is a new file).
type idIndexer struct {
	db    *sql.DB
	inode uint64
}

// openIndexer returns x when it is still on file's current inode, else a
// new connection (opened read-write but never created: a database
// FerretDB just dropped stays gone).
func openIndexer(x *idIndexer, file string) (*idIndexer, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	var inode uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		inode = st.Ino
	}
	if x != nil && x.inode == inode {
		return x, nil
	}
	if x != nil {
		_ = x.db.Close()
	}
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file)+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	db.SetMaxOpenConns(1)
	return &idIndexer{db: db, inode: inode}, nil
}

// indexIDsOf adds the missing _id indexes of one database.
func indexIDsOf(ctx context.Context, db *sql.DB) error {
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
