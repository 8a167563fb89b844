package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rotahq/rota"
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
// JSON object, so that new fields need no migration.
func EncodeEvent(ev rota.Event) ([]byte, error) {
	d := eventData{
		Type: ev.Type, Kind: ev.Kind, TaskID: ev.TaskID, RunID: ev.RunID, WorkerID: ev.WorkerID, Status: ev.Status,
		Attempt: ev.Attempt, Message: ev.Message, ScheduleID: ev.ScheduleID, Result: ev.Result,
		ResultTruncated: ev.ResultTruncated,
	}
	if !ev.RunAt.IsZero() {
		d.RunAt = ev.RunAt.UnixMilli()
	}
	if !ev.FireTime.IsZero() {
		d.FireTime = ev.FireTime.UnixMilli()
	}
	if len(d.Result) > 0 && !json.Valid(d.Result) {
		d.Result, _ = json.Marshal(string(d.Result)) // kept readable, as a string
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return b, nil
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
