package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// The event log is a sorted set scored by id whose members are
// "id:unix ms:json" (store.EncodeEvent), and a counter of the last id,
// created at the first open with the creation time in unix microseconds
// (minus one), so that ids of another log are recognized as unknown.

func (s *Store) kEvents() string  { return s.p + "events" }
func (s *Store) kEventID() string { return s.p + "events:last" }

// initEvents creates the last-id counter of a new log.
func (s *Store) initEvents(ctx context.Context, now time.Time) error {
	return s.rdb.SetNX(ctx, s.kEventID(), now.UnixMicro()-1, 0).Err()
}

// EventAppend implements store.EventStore with events.lua.
func (s *Store) EventAppend(ctx context.Context, evs []rota.Event) (uint64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	args := []any{time.Now().UnixMicro() - 1, s.channel, encodeNote(s.cfg.NodeID, store.Notification{Events: true}, false)}
	for _, ev := range evs {
		b, err := store.EncodeEvent(ev)
		if err != nil {
			return 0, err
		}
		args = append(args, ms(ev.Time), b)
	}
	id, err := eventsScript.Run(ctx, s.rdb, []string{s.kEventID(), s.kEvents()}, args...).Int64()
	if err != nil {
		return 0, s.wrap("append events", err)
	}
	return uint64(id), nil
}

// parseEvent reads a member of the log.
func parseEvent(m string) (rota.Event, error) {
	id, rest, _ := strings.Cut(m, ":")
	at, data, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return rota.Event{}, fmt.Errorf("event %q: %w", m, err)
	}
	t, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return rota.Event{}, fmt.Errorf("event %q: %w", m, err)
	}
	return store.DecodeEvent(n, t, []byte(data))
}

// EventList implements store.EventStore.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]rota.Event, error) {
	ms, err := s.rdb.ZRangeByScore(ctx, s.kEvents(), &redis.ZRangeBy{Min: "(" + strconv.FormatUint(p.After, 10),
		Max: "+inf", Count: int64(max(p.Limit, 1))}).Result()
	if err != nil {
		return nil, s.wrap("list events", err)
	}
	out := make([]rota.Event, 0, len(ms))
	for _, m := range ms {
		ev, err := parseEvent(m)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// EventBounds implements store.EventStore.
func (s *Store) EventBounds(ctx context.Context) (store.EventBounds, error) {
	var first *redis.ZSliceCmd
	var last *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		first = p.ZRangeWithScores(ctx, s.kEvents(), 0, 0)
		last = p.Get(ctx, s.kEventID())
		return nil
	})
	if err != nil && err != redis.Nil {
		return store.EventBounds{}, s.wrap("event bounds", err)
	}
	var b store.EventBounds
	if z := first.Val(); len(z) > 0 {
		b.Oldest = uint64(z[0].Score)
	}
	b.Last, _ = strconv.ParseUint(last.Val(), 10, 64)
	return b, nil
}

// EventCleanup implements store.EventStore: the oldest events, while
// older than before.
func (s *Store) EventCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	n := 0
	err := s.update(ctx, "clean events", func(t *tx) error {
		n = 0
		ms, err := s.rdb.ZRange(ctx, s.kEvents(), 0, int64(max(limit, 1))-1).Result()
		if err != nil {
			return err
		}
		for _, m := range ms {
			ev, err := parseEvent(m)
			if err != nil {
				return err
			}
			if !ev.Time.Before(before) {
				break
			}
			t.zrem(s.kEvents(), m)
			n++
		}
		return nil
	})
	return n, err
}
