package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/jsonwire"
)

// EventStore is the cluster's event log: every node appends the events of
// the changes it makes, and every node's event stream reads them all back
// in one order. It is part of Store (every backend implements it), kept
// apart so that the event hub asks only for what it uses.
//
// IDs come from one ordered source per database and are handed out in
// commit order: once an event with ID n can be read, every event with a
// smaller ID that will ever be readable already is. A reader that remembers
// the last ID it read therefore never skips an event that commits late.
// IDs are consecutive (no gaps) and start far above those of any older
// database (the first ID of a new database is its creation time in unix
// microseconds), so an ID from another database is recognized as unknown.
type EventStore interface {
	// EventAppend appends evs (their ID fields are ignored), in order, in
	// one transaction, with consecutive IDs, and returns the ID of the last
	// one (0 when evs is empty). On stores that notify, the other nodes
	// then hear a Notification with Events set.
	EventAppend(ctx context.Context, evs []rota.Event) (uint64, error)
	// EventList returns up to p.Limit events with an ID above p.After,
	// in ID order.
	EventList(ctx context.Context, p EventListParams) ([]rota.Event, error)
	// EventBounds returns the ID of the oldest event kept and of the last
	// one ever appended.
	EventBounds(ctx context.Context) (EventBounds, error)
	// EventCleanup deletes up to limit of the oldest events, those older
	// than before, and returns how many it deleted. A leader duty; it is
	// idempotent, so it needs no fencing.
	EventCleanup(ctx context.Context, before time.Time, limit int) (int, error)
}

// EventListParams select events to read.
type EventListParams struct {
	// After is the ID of the last event the reader has: events above it
	// are returned.
	After uint64
	// Limit is the most events returned (at least 1).
	Limit int
}

// EventBounds are the limits of the event log.
type EventBounds struct {
	// Oldest is the ID of the oldest event kept; 0 when none is.
	Oldest uint64
	// Last is the ID of the last event appended, kept or not (the log's
	// first ID − 1 when none ever was).
	Last uint64
}

// eventData is the stored form of an event: what the ID and the time
// columns do not hold.
type eventData struct {
	Type            rota.EventType  `json:"type,omitempty"`
	Kind            string          `json:"kind,omitempty"`
	TaskID          string          `json:"task,omitempty"`
	RunID           string          `json:"run,omitempty"`
	WorkerID        string          `json:"worker,omitempty"`
	Status          rota.Status     `json:"status,omitempty"`
	Attempt         int             `json:"attempt,omitempty"`
	Message         string          `json:"message,omitempty"`
	RunAt           int64           `json:"run_at,omitempty"` // unix ms
	ScheduleID      string          `json:"schedule,omitempty"`
	FireTime        int64           `json:"fire_time,omitempty"` // unix ms
	Result          json.RawMessage `json:"result,omitempty"`
	ResultTruncated bool            `json:"result_truncated,omitempty"`
}

// EncodeEvent returns the stored form of ev apart from its ID and Time: a
// JSON object, so that new fields need no migration (AppendEvent).
func EncodeEvent(ev rota.Event) ([]byte, error) {
	return AppendEvent(nil, ev), nil
}

// AppendEvent appends the stored form of ev (EncodeEvent's) to dst: the
// fields of eventData, empty ones left out, written by hand. Every task
// makes about five events, and encoding/json's reflection over eventData
// was ~9% of the process CPU of the in-process e2e benchmark on
// PostgreSQL. Strings are written as an Encoder without HTML escaping
// writes them (DecodeEvent reads either form the same);
// TestAppendEventMatchesJSON checks the two decode alike.
func AppendEvent(dst []byte, ev rota.Event) []byte {
	dst = append(dst, '{')
	first := true
	key := func(k string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, '"', ':')
	}
	str := func(k, v string) {
		if v != "" {
			key(k)
			dst = jsonwire.AppendString(dst, v)
		}
	}
	num := func(k string, v int64) {
		if v != 0 {
			key(k)
			dst = jsonwire.AppendInt(dst, v)
		}
	}
	str("type", string(ev.Type))
	str("kind", ev.Kind)
	str("task", ev.TaskID)
	str("run", ev.RunID)
	str("worker", ev.WorkerID)
	str("status", string(ev.Status))
	num("attempt", int64(ev.Attempt))
	str("message", ev.Message)
	if !ev.RunAt.IsZero() {
		num("run_at", ev.RunAt.UnixMilli())
	}
	str("schedule", ev.ScheduleID)
	if !ev.FireTime.IsZero() {
		num("fire_time", ev.FireTime.UnixMilli())
	}
	if len(ev.Result) > 0 {
		key("result")
		if json.Valid(ev.Result) {
			dst = jsonwire.AppendCompact(dst, ev.Result)
		} else {
			dst = jsonwire.AppendString(dst, string(ev.Result)) // kept readable, as a string
		}
	}
	if ev.ResultTruncated {
		key("result_truncated")
		dst = append(dst, "true"...)
	}
	return append(dst, '}')
}

// DecodeEvent returns the event stored with id, time (unix ms) and data
// (EncodeEvent's).
func DecodeEvent(id uint64, atMs int64, data []byte) (rota.Event, error) {
	var d eventData
	if err := json.Unmarshal(data, &d); err != nil {
		return rota.Event{}, fmt.Errorf("decode event %d: %w", id, err)
	}
	ev := rota.Event{
		ID: id, Time: time.UnixMilli(atMs).UTC(), Type: d.Type, Kind: d.Kind, TaskID: d.TaskID, RunID: d.RunID,
		WorkerID: d.WorkerID, Status: d.Status, Attempt: d.Attempt, Message: d.Message, ScheduleID: d.ScheduleID,
		Result: d.Result, ResultTruncated: d.ResultTruncated,
	}
	if d.RunAt != 0 {
		ev.RunAt = time.UnixMilli(d.RunAt).UTC()
	}
	if d.FireTime != 0 {
		ev.FireTime = time.UnixMilli(d.FireTime).UTC()
	}
	return ev, nil
}
