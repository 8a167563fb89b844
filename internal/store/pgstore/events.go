package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
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
// so that IDs become visible in order), inserts the events as one chunk
// (one row: ids first_id..id, data a JSON array of [at, event] pairs;
// an append is one row version however many events it carries) and
// notifies the other nodes (if it knows of any: see alone). The notification is sent inside the
// statement, not by the notifier after it (as the kinds' are): appends are
// serialized by the counter row anyway, so the commit-time lock on the
// notification queue costs them nothing more, and a separate statement
// would cost each append a round trip.
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
	buf := chunkBufs.Get().(*[]byte)
	data := encodeChunk((*buf)[:0], evs)
	defer func() {
		// pgx has copied data into its message by the time the row is read.
		if cap(data) <= maxPooledChunk {
			*buf = data[:0]
			chunkBufs.Put(buf)
		}
	}()
	note := []string{encodePayload(eventsNote, 0, s.cfg.NodeID)}
	if s.alone() {
		note = note[:0] // no other node to tell (notify.go)
	}
	var last int64
	err := s.pool.QueryRow(ctx, eventAppendSQL, len(evs), ms(evs[0].Time), data, s.channel, note).Scan(&last)
	if err != nil {
		return 0, s.translate("append events", err)
	}
	return uint64(last), nil
}

// eventAppendSQL appends a chunk of $1 events at $2 (data $3) and
// notifies channel $4 with the payloads $5, without waiting for the WAL
// flush (see EventAppend).
const eventAppendSQL = `WITH seq AS (
			UPDATE event_seq SET last_id = last_id + $1 RETURNING last_id
		), ins AS (
			INSERT INTO events (id, first_id, at, data) SELECT seq.last_id, seq.last_id - $1 + 1, $2, $3 FROM seq
		)
		SELECT seq.last_id FROM seq, (SELECT count(pg_notify($4, p)) FROM unnest($5::text[]) AS p) AS note,
			(SELECT set_config('synchronous_commit', 'off', true)) AS async`

// chunkBufs holds the buffers EventAppend encodes chunks into (*[]byte):
// an append of the events of a busy second is hundreds of kilobytes, made
// anew each time it was a fifth of the server's allocations in the e2e
// benchmark. Buffers beyond maxPooledChunk are left to the collector.
var chunkBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledChunk = 4 << 20

// encodeChunk appends the data of a chunk of events to b: [[at, event], ...]
// (a text parameter sent as it is: no copy into a string).
func encodeChunk(b []byte, evs []rota.Event) []byte {
	b = append(b, '[')
	for i, ev := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, ms(ev.Time), 10)
		b = append(b, ',')
		b = store.AppendEvent(b, ev)
		b = append(b, ']')
	}
	return append(b, ']')
}

// chunk is a row of events: ids first..last.
type chunk struct {
	first, last int64
	data        string
}

// storedEvent is one [at, event] pair of a chunk's data.
type storedEvent struct {
	at   int64
	data json.RawMessage
}

// pairs decodes the chunk's [at, event] pairs, first's first.
func (c chunk) pairs() ([]storedEvent, error) {
	var raw [][2]json.RawMessage
	if err := json.Unmarshal([]byte(c.data), &raw); err != nil {
		return nil, fmt.Errorf("decode events %d..%d: %w", c.first, c.last, err)
	}
	if int64(len(raw)) != c.last-c.first+1 {
		return nil, fmt.Errorf("decode events %d..%d: %d stored", c.first, c.last, len(raw))
	}
	out := make([]storedEvent, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r[0], &out[i].at); err != nil {
			return nil, fmt.Errorf("decode event %d: time: %w", c.first+int64(i), err)
		}
		out[i].data = r[1]
	}
	return out, nil
}

// EventList implements store.EventStore. IDs are consecutive, so the
// events wanted are those of after+1..after+limit: the chunks from the one
// holding after+1 to the one holding after+limit (a bounded range of the
// primary key).
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]rota.Event, error) {
	after, limit := int64(p.After), int64(max(p.Limit, 1))
	rows, err := s.pool.Query(ctx, `SELECT first_id, id, data FROM events
		WHERE id > $1 AND id <= COALESCE((SELECT id FROM events WHERE id >= $1 + $2 ORDER BY id LIMIT 1), 9223372036854775807)
		ORDER BY id`, after, limit)
	if err != nil {
		return nil, s.translate("list events", err)
	}
	chunks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (c chunk, err error) {
		err = row.Scan(&c.first, &c.last, &c.data)
		return c, err
	})
	if err != nil {
		return nil, s.translate("list events", err)
	}
	var evs []rota.Event
	for _, c := range chunks {
		pairs, err := c.pairs()
		if err != nil {
			return nil, err
		}
		for i, pr := range pairs {
			id := c.first + int64(i)
			if id <= after || int64(len(evs)) >= limit {
				continue
			}
			ev, err := store.DecodeEvent(uint64(id), pr.at, pr.data)
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// EventBounds implements store.EventStore.
func (s *Store) EventBounds(ctx context.Context) (store.EventBounds, error) {
	var oldest *int64
	var last int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT first_id FROM events ORDER BY id LIMIT 1), (SELECT last_id FROM event_seq)`).
		Scan(&oldest, &last)
	if err != nil {
		return store.EventBounds{}, s.translate("event bounds", err)
	}
	b := store.EventBounds{Last: uint64(last)}
	if oldest != nil {
		b.Oldest = uint64(*oldest)
	}
	return b, nil
}

// cleanupPage is how many chunks EventCleanup reads at a time.
const cleanupPage = 64

// EventCleanup implements store.EventStore. It deletes by ID, from the
// oldest, the events below the first one not older than before (times of
// different nodes are not quite in ID order, and an event a little older
// than a newer one's neighbour waits for the next round), up to limit: the
// chunks wholly deleted go, the one deleted in part keeps its newer events
// (rewritten). The chunks it reads are locked, so two cleanups do not
// trim one chunk twice.
func (s *Store) EventCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	limit = max(limit, 1)
	deleted := 0
	err := s.tx(ctx, "clean events", func(t *txn) error {
		deleted = 0
		var from int64
		for deleted < limit {
			var chunks []chunk
			err := t.query(ctx, func(rows pgx.Rows) (err error) {
				chunks, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (c chunk, err error) {
					err = row.Scan(&c.first, &c.last, &c.data)
					return c, err
				})
				return err
			}, `SELECT first_id, id, data FROM events WHERE id > $1 ORDER BY id LIMIT $2 FOR UPDATE`, from, cleanupPage)
			if err != nil {
				return fmt.Errorf("read events: %w", err)
			}
			if len(chunks) == 0 {
				return nil
			}
			done, err := cleanChunks(t, chunks, ms(before), limit, &deleted)
			if err != nil || done {
				return err
			}
			from = chunks[len(chunks)-1].last
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// cleanChunks queues the deletion of the events of chunks (oldest first)
// older than before, counting them into *deleted up to limit, and reports
// whether it stopped (an event not older than before, or the limit).
func cleanChunks(t *txn, chunks []chunk, before int64, limit int, deleted *int) (bool, error) {
	for _, c := range chunks {
		pairs, err := c.pairs()
		if err != nil {
			return true, err
		}
		k := 0 // events of c to delete
		for k < len(pairs) && pairs[k].at < before && *deleted+k < limit {
			k++
		}
		*deleted += k
		switch {
		case k == len(pairs):
			t.queue(`DELETE FROM events WHERE id = $1`, c.last)
			continue
		case k > 0:
			rest, err := json.Marshal(pairsJSON(pairs[k:]))
			if err != nil {
				return true, err
			}
			t.queue(`UPDATE events SET first_id = $1, at = $2, data = $3 WHERE id = $4`,
				c.first+int64(k), pairs[k].at, string(rest), c.last)
		}
		return true, nil
	}
	return false, nil
}

// pairsJSON is pairs in their stored form.
func pairsJSON(pairs []storedEvent) [][2]json.RawMessage {
	out := make([][2]json.RawMessage, len(pairs))
	for i, p := range pairs {
		out[i] = [2]json.RawMessage{json.RawMessage(strconv.FormatInt(p.at, 10)), p.data}
	}
	return out
}
