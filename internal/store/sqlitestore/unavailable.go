package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rotahq/rota"
)

// unavailable wraps err in a rota.ErrUnavailable error (HTTP 503) when
// it says the database cannot be written or read for now — a full disk,
// an I/O error, a file that cannot be opened, a lock held too long, no
// memory — so that clients retry instead of seeing a fault of the
// server. Other errors are returned as they are.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	var re *rota.Error
	if errors.As(err, &re) {
		return err
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	var why string
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		why = "the disk holding the database is full"
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PROTOCOL:
		why = "the database file cannot be written"
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		why = "the database is busy"
	case sqlite3.SQLITE_NOMEM:
		why = "the database is out of memory"
	default:
		return err
	}
	return fmt.Errorf("%w: %w", rota.Errorf(rota.CodeUnavailable, "the store is unavailable: %s", why), err)
}

// PingWrite implements store.Store: it records now in rota_meta through
// the writer, so it fails as any write would.
func (s *Store) PingWrite(ctx context.Context, now time.Time) error {
	return s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rota_meta (key, value) VALUES ('write_probe', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, now.UTC().Format(time.RFC3339Nano)); err != nil {
			return fmt.Errorf("sqlitestore: write probe: %w", err)
		}
		return nil
	})
}
