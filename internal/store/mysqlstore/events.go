package mysqlstore

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// EventAppend implements store.EventStore. The row of event_seq, locked by
// its update until the commit, hands out the IDs in commit order; the
// events go in one INSERT.
func (s *Store) EventAppend(ctx context.Context, evs []rota.Event) (uint64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	data := make([]string, len(evs))
	for i, ev := range evs {
		b, err := store.EncodeEvent(ev)
		if err != nil {
			return 0, err
		}
		data[i] = string(b)
	}
	var last int64
	err := s.tx(ctx, "append events", func(t *txn) error {
		res, err := t.exec(`UPDATE event_seq SET last_id = LAST_INSERT_ID(last_id + ?) WHERE one = 1`, len(evs))
		if err != nil {
			return wrap("append events", err)
		}
		if last, err = res.LastInsertId(); err != nil {
			return wrap("append events", err)
		}
		first := last - int64(len(evs)) + 1
		args := make([]any, 0, 3*len(evs))
		for i, ev := range evs {
			args = append(args, first+int64(i), ms(ev.Time), data[i])
		}
		q := `INSERT INTO events (id, at, data) VALUES ` + strings.Repeat("(?, ?, ?), ", len(evs)-1) + `(?, ?, ?)`
		if _, err := t.exec(q, args...); err != nil {
			return wrap("append events", err)
		}
		t.event = true
		return nil
	})
	if err != nil {
		return 0, err
	}
	return uint64(last), nil
}

// EventList implements store.EventStore.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]rota.Event, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, at, data FROM events WHERE id > ? ORDER BY id LIMIT ?`,
		int64(p.After), max(p.Limit, 1))
	evs, err := collect(rows, err, "list events", func(sc scanner) (rota.Event, error) {
		var (
			id, at int64
			data   []byte
		)
		if err := sc.Scan(&id, &at, &data); err != nil {
			return rota.Event{}, err
		}
		return store.DecodeEvent(uint64(id), at, data)
	})
	return evs, unavailable(err)
}

// EventBounds implements store.EventStore.
func (s *Store) EventBounds(ctx context.Context) (store.EventBounds, error) {
	var (
		oldest sql.NullInt64
		last   int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT MIN(id) FROM events), (SELECT last_id FROM event_seq WHERE one = 1)`).Scan(&oldest, &last)
	if err != nil {
		return store.EventBounds{}, unavailable(wrap("event bounds", err))
	}
	return store.EventBounds{Oldest: uint64(oldest.Int64), Last: uint64(last)}, nil
}

// EventCleanup implements store.EventStore: by ID below the first event
// not older than before.
func (s *Store) EventCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	var keep sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT MIN(id) FROM events WHERE at >= ?`, ms(before)).Scan(&keep); err != nil {
		return 0, unavailable(wrap("clean events", err))
	}
	bound := int64(1<<63 - 1)
	if keep.Valid {
		bound = keep.Int64
	}
	res, err := s.r.ExecContext(ctx, `DELETE FROM events WHERE id < ? ORDER BY id LIMIT ?`, bound, max(limit, 1))
	if err != nil {
		return 0, unavailable(wrap("clean events", err))
	}
	n, err := res.RowsAffected()
	return int(n), err
}
