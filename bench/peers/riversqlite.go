package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // the driver of Rota's embedded store too
)

// sqliteDSN is the database/sql name of a SQLite file as River's cases
// open it: WAL mode and synchronous=FULL (the durability of Rota's
// embedded store: a commit is on disk when it returns), a busy timeout.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"
}

// openRiverSQLite makes a fresh SQLite file for a River case (River's
// riversqlite driver) in a temporary directory, removed by the returned
// close. The pool has one connection, as the driver's documentation
// advises (SQLite allows one writer; more connections fail with
// SQLITE_BUSY under River's concurrent maintenance).
func openRiverSQLite(ctx context.Context, spec caseSpec) (*riverDB, func() error, error) {
	dir, err := os.MkdirTemp("", "peers-river-sqlite")
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "river.db")))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	closeDB := func() error { return errors.Join(db.Close(), os.RemoveAll(dir)) }
	migrator, err := rivermigrate.New(riversqlite.New(db), nil)
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("river migrate (sqlite): %w", err), closeDB())
	}
	return &riverDB{
		newClient: func(cfg *river.Config) (riverClient, error) {
			c, err := river.NewClient(riversqlite.New(db), cfg)
			return clientOf[*sql.Tx]{c}, err
		},
		scalar:   func(ctx context.Context, q string, dst any) error { return db.QueryRowContext(ctx, q).Scan(dst) },
		backends: func() []int { return nil },
	}, closeDB, nil
}
