package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// eventsNote is the notes key of "events were appended": not a kind name
// (rota.KindPattern has no '!'), so older nodes ignore it harmlessly.
const eventsNote = "!events"

// EventAppend implements store.EventStore in one statement: it takes
// len(evs) IDs from the counter row (whose lock it holds until it commits,
// so that IDs become visible in order), inserts the events and notifies
// the other nodes. The notification is sent inside the statement, not by
// the notifier after it (as the kinds' are): appends are serialized by the
// counter row anyway, so the commit-time lock on the notification queue
// costs them nothing more, and a separate statement would cost each
// append a round trip.
//
// It commits asynchronously (synchronous_commit off for its transaction):
// it does not wait for its WAL flush, which the next synchronous commit of
// any session, or the WAL writer within wal_writer_delay, does. A crash of
// the database server can lose the events of that window — as a node's
// crash loses the events it had not appended — and then issue their IDs
// again; task state is never at stake.
func (s *Store) EventAppend(ctx context.Context, evs []rota.Event) (uint64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	ats := make([]int64, len(evs))
	data := make([]string, len(evs))
	for i, ev := range evs {
		b, err := store.EncodeEvent(ev)
		if err != nil {
			return 0, err
		}
		ats[i], data[i] = ms(ev.Time), string(b)
	}
	var last int64
	err := s.pool.QueryRow(ctx, `WITH seq AS (
			UPDATE event_seq SET last_id = last_id + $1 RETURNING last_id
		), ins AS (
			INSERT INTO events (id, at, data)
			SELECT seq.last_id - $1 + e.n, e.at, e.data
			FROM seq, unnest($2::bigint[], $3::text[]) WITH ORDINALITY AS e(at, data, n)
		)
		SELECT seq.last_id FROM seq, (SELECT pg_notify($4, $5)) AS note,
			(SELECT set_config('synchronous_commit', 'off', true)) AS async`,
		len(evs), ats, data, s.channel, encodePayload(eventsNote, 0, s.cfg.NodeID)).Scan(&last)
	if err != nil {
		return 0, s.translate("append events", err)
	}
	return uint64(last), nil
}

// EventList implements store.EventStore.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]rota.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, at, data FROM events WHERE id > $1 ORDER BY id LIMIT $2`,
		int64(p.After), max(p.Limit, 1))
	if err != nil {
		return nil, s.translate("list events", err)
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Event, error) {
		var (
			id, at int64
			data   string
		)
		if err := row.Scan(&id, &at, &data); err != nil {
			return rota.Event{}, err
		}
		return store.DecodeEvent(uint64(id), at, []byte(data))
	})
	if err != nil {
		return nil, s.translate("list events", err)
	}
	return evs, nil
}

// EventBounds implements store.EventStore.
func (s *Store) EventBounds(ctx context.Context) (store.EventBounds, error) {
	var oldest *int64
	var last int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT min(id) FROM events), (SELECT last_id FROM event_seq)`).Scan(&oldest, &last)
	if err != nil {
		return store.EventBounds{}, s.translate("event bounds", err)
	}
	b := store.EventBounds{Last: uint64(last)}
	if oldest != nil {
		b.Oldest = uint64(*oldest)
	}
	return b, nil
}

// EventCleanup implements store.EventStore. It deletes by ID, below the
// first event not older than before (found by walking the primary key
// from the oldest), so that it needs no index on the time: times of
// different nodes are not quite in ID order, and an event a little older
// than a newer one's neighbour waits for the next round.
func (s *Store) EventCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM events WHERE id IN (
			SELECT id FROM events
			WHERE id < coalesce((SELECT id FROM events WHERE at >= $1 ORDER BY id LIMIT 1), 9223372036854775807)
			ORDER BY id LIMIT $2)`, ms(before), max(limit, 1))
	if err != nil {
		return 0, s.translate("clean events", err)
	}
	return int(tag.RowsAffected()), nil
}
