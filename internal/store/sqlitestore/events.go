package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// EventAppend implements store.EventStore. The single writer orders the
// IDs; the append rides in the writer's group commit with other writes.
// The rows go in one INSERT whatever their number, passed as one JSON
// array of [at, data] pairs.
func (s *Store) EventAppend(ctx context.Context, evs []rota.Event) (uint64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	rows := make([][2]any, len(evs)) // [at, data]
	for i, ev := range evs {
		b, err := store.EncodeEvent(ev)
		if err != nil {
			return 0, err
		}
		rows[i] = [2]any{ms(ev.Time), string(b)}
	}
	rowsJSON, err := json.Marshal(rows)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: append events: %w", err)
	}
	var last int64
	err = s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if err := tx.QueryRowContext(ctx, `UPDATE event_seq SET last_id = last_id + ? RETURNING last_id`, len(evs)).Scan(&last); err != nil {
			return fmt.Errorf("sqlitestore: append events: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, at, data)
			SELECT ? + key, json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)`,
			last-int64(len(evs))+1, string(rowsJSON)); err != nil {
			return fmt.Errorf("sqlitestore: append events: %w", err)
		}
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
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list events: %w", err)
	}
	defer rows.Close()
	var evs []rota.Event
	for rows.Next() {
		var (
			id, at int64
			data   string
		)
		if err := rows.Scan(&id, &at, &data); err != nil {
			return nil, fmt.Errorf("sqlitestore: list events: %w", err)
		}
		ev, err := store.DecodeEvent(uint64(id), at, []byte(data))
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list events: %w", err)
	}
	return evs, nil
}

// EventBounds implements store.EventStore.
func (s *Store) EventBounds(ctx context.Context) (store.EventBounds, error) {
	var (
		oldest sql.NullInt64
		last   int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT min(id) FROM events), (SELECT last_id FROM event_seq)`).Scan(&oldest, &last)
	if err != nil {
		return store.EventBounds{}, fmt.Errorf("sqlitestore: event bounds: %w", err)
	}
	return store.EventBounds{Oldest: uint64(oldest.Int64), Last: uint64(last)}, nil
}

// EventCleanup implements store.EventStore: as pgstore's, by ID below the
// first event not older than before.
func (s *Store) EventCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (
				SELECT id FROM events
				WHERE id < coalesce((SELECT id FROM events WHERE at >= ? ORDER BY id LIMIT 1), 9223372036854775807)
				ORDER BY id LIMIT ?)`, ms(before), max(limit, 1))
		if err != nil {
			return fmt.Errorf("sqlitestore: clean events: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
