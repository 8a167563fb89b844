package store

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
)

// jsonEncodeEvent is EncodeEvent as encoding/json wrote it before
// AppendEvent: the reference AppendEvent is checked against.
func jsonEncodeEvent(ev rota.Event) []byte {
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
		d.Result, _ = json.Marshal(string(d.Result))
	}
	b, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// TestAppendEventMatchesJSON checks that what AppendEvent writes is valid
// JSON that DecodeEvent reads back as it reads encoding/json's form, for
// events with every field empty or set, strings that need escaping, and
// results valid, invalid and truncated.
func TestAppendEventMatchesJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "plain", "with \"quotes\" and \\ back", "<html> & más ✓", "line\nbreak\ttab\x01", "\xff\xfe bad utf-8"}
	results := []json.RawMessage{nil, json.RawMessage(`{"ok": true, "n": [1, 2]}`), json.RawMessage(`"s"`),
		json.RawMessage(`not json <>`), json.RawMessage(" 42 ")}
	pick := func() string { return strs[r.IntN(len(strs))] }
	at := time.UnixMilli(1_780_000_000_123).UTC()
	for i := range 2000 {
		ev := rota.Event{
			Type: rota.EventType(pick()), Kind: pick(), TaskID: pick(), RunID: pick(), WorkerID: pick(),
			Status: rota.Status(pick()), Message: pick(), ScheduleID: pick(), Result: results[r.IntN(len(results))],
			ResultTruncated: r.IntN(2) == 0,
		}
		if r.IntN(2) == 0 {
			ev.Attempt = r.IntN(5) - 1
		}
		if r.IntN(2) == 0 {
			ev.RunAt = at.Add(time.Duration(r.IntN(1e6)) * time.Millisecond)
		}
		if r.IntN(2) == 0 {
			ev.FireTime = at.Add(-time.Duration(r.IntN(1e6)) * time.Millisecond)
		}
		got := AppendEvent([]byte("prefix"), ev)
		if !strings.HasPrefix(string(got), "prefix") || !json.Valid(got[len("prefix"):]) {
			t.Fatalf("event %d: AppendEvent wrote invalid JSON: %s", i, got)
		}
		a, err := DecodeEvent(7, 99, got[len("prefix"):])
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeEvent(7, 99, jsonEncodeEvent(ev))
		if err != nil {
			t.Fatal(err)
		}
		// Results compare as values: whitespace and escaping may differ.
		ra, rb := a.Result, b.Result
		a.Result, b.Result = nil, nil
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("event %d: AppendEvent decodes to\n%+v\nencoding/json's to\n%+v", i, a, b)
		}
		var va, vb any
		if (len(ra) == 0) != (len(rb) == 0) || (len(ra) > 0 && (json.Unmarshal(ra, &va) != nil || json.Unmarshal(rb, &vb) != nil || !reflect.DeepEqual(va, vb))) {
			t.Fatalf("event %d: result %s, encoding/json's %s", i, ra, rb)
		}
	}
}

func BenchmarkEncodeEvent(b *testing.B) {
	ev := rota.Event{Type: rota.EventRun, Kind: "email.send", TaskID: "0190a1b2c3d4e5f60718293a4b5c6d7e",
		RunID: "0190a1b2c3d4e5f60718293a4b5c6d7f", WorkerID: "worker-1", Status: rota.StatusSuccess, Attempt: 1,
		RunAt: time.UnixMilli(1_780_000_000_123)}
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			jsonEncodeEvent(ev)
		}
	})
	b.Run("append", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf = AppendEvent(buf[:0], ev)
		}
	})
}
