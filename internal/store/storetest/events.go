package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// testEvents covers the cluster's event log (EventStore).
func testEvents(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "AppendListRoundTrip", eventsAppendListRoundTrip)
	parallel(t, ns, "Cleanup", eventsCleanup)
	parallel(t, ns, "ConcurrentAppendsReadInOrder", eventsConcurrentAppendsReadInOrder)
}

// eventsAppendListRoundTrip is the AppendListRoundTrip subtest of testEvents.
func eventsAppendListRoundTrip(t *testing.T, f *Fixture) {
	ctx := f.Ctx()
	b0, err := f.Store.EventBounds(ctx)
	if err != nil {
		t.Fatalf("EventBounds: %v", err)
	}
	if b0.Oldest != 0 {
		t.Fatalf("EventBounds of a new store: Oldest = %d, want 0", b0.Oldest)
	}
	// IDs of a new store start above any of an older one: at its
	// creation time in unix microseconds.
	if min := uint64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()); b0.Last < min {
		t.Fatalf("EventBounds of a new store: Last = %d, want at least %d", b0.Last, min)
	}
	var truncated rota.Event
	truncated.SetResult(json.RawMessage(`"` + strings.Repeat("é", rota.MaxEventResult) + `"`))
	want := []rota.Event{
		{Time: f.At(time.Second), Type: rota.EventTask, Kind: "k", TaskID: "t1", Status: rota.StatusScheduled,
			RunAt: f.At(2 * time.Second)},
		{Time: f.At(2 * time.Second), Type: rota.EventRun, Kind: "k", TaskID: "t1", RunID: "r1", WorkerID: "w",
			Status: rota.StatusSuccess, Attempt: 1, Message: "done", Result: json.RawMessage(`{"n":1}`)},
		{Time: f.At(3 * time.Second), Type: rota.EventRun, Kind: "k", TaskID: "t2", Status: rota.StatusSuccess,
			Result: truncated.Result, ResultTruncated: true},
		{Time: f.At(4 * time.Second), Type: rota.EventScheduleFired, Kind: "k", TaskID: "t3", ScheduleID: "s1",
			FireTime: f.At(5 * time.Second)},
	}
	last, err := f.Store.EventAppend(ctx, want[:1])
	if err != nil {
		t.Fatalf("EventAppend: %v", err)
	}
	if last != b0.Last+1 {
		t.Fatalf("EventAppend: last ID %d, want %d", last, b0.Last+1)
	}
	if last, err = f.Store.EventAppend(ctx, want[1:]); err != nil {
		t.Fatalf("EventAppend: %v", err)
	}
	if last != b0.Last+4 {
		t.Fatalf("EventAppend: last ID %d, want %d (consecutive)", last, b0.Last+4)
	}
	if n, err := f.Store.EventAppend(ctx, nil); err != nil || n != 0 {
		t.Fatalf("EventAppend(nothing) = %d, %v; want 0, nil", n, err)
	}
	for i := range want {
		want[i].ID = b0.Last + 1 + uint64(i)
	}
	got, err := f.Store.EventList(ctx, store.EventListParams{After: b0.Last, Limit: 10})
	if err != nil {
		t.Fatalf("EventList: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("EventList (-want +got):\n%s", diff)
	}
	got, err = f.Store.EventList(ctx, store.EventListParams{After: b0.Last + 1, Limit: 2})
	if err != nil {
		t.Fatalf("EventList: %v", err)
	}
	if diff := cmp.Diff(want[1:3], got); diff != "" {
		t.Fatalf("EventList(after the first, limit 2) (-want +got):\n%s", diff)
	}
	b, err := f.Store.EventBounds(ctx)
	if err != nil {
		t.Fatalf("EventBounds: %v", err)
	}
	if diff := cmp.Diff(store.EventBounds{Oldest: b0.Last + 1, Last: b0.Last + 4}, b); diff != "" {
		t.Fatalf("EventBounds (-want +got):\n%s", diff)
	}
}

// eventsCleanup is the Cleanup subtest of testEvents.
func eventsCleanup(t *testing.T, f *Fixture) {
	ctx := f.Ctx()
	var evs []rota.Event
	for i := range 5 {
		evs = append(evs, rota.Event{Time: f.At(time.Duration(i) * time.Minute), Type: rota.EventTask, TaskID: fmt.Sprint(i)})
	}
	last, err := f.Store.EventAppend(ctx, evs)
	if err != nil {
		t.Fatalf("EventAppend: %v", err)
	}
	first := last - 4
	// Older than 3 minutes: the first three, two per call.
	if n, err := f.Store.EventCleanup(ctx, f.At(3*time.Minute), 2); err != nil || n != 2 {
		t.Fatalf("EventCleanup = %d, %v; want 2, nil", n, err)
	}
	if n, err := f.Store.EventCleanup(ctx, f.At(3*time.Minute), 2); err != nil || n != 1 {
		t.Fatalf("EventCleanup = %d, %v; want 1, nil", n, err)
	}
	if n, err := f.Store.EventCleanup(ctx, f.At(3*time.Minute), 2); err != nil || n != 0 {
		t.Fatalf("EventCleanup (nothing left to delete) = %d, %v; want 0, nil", n, err)
	}
	b, err := f.Store.EventBounds(ctx)
	if err != nil {
		t.Fatalf("EventBounds: %v", err)
	}
	if diff := cmp.Diff(store.EventBounds{Oldest: first + 3, Last: last}, b); diff != "" {
		t.Fatalf("EventBounds after cleanup (-want +got):\n%s", diff)
	}
	// Everything gone: Last stays, so the next IDs go on from it.
	if n, err := f.Store.EventCleanup(ctx, f.At(time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("EventCleanup(all) = %d, %v; want 2, nil", n, err)
	}
	if b, err = f.Store.EventBounds(ctx); err != nil || b != (store.EventBounds{Last: last}) {
		t.Fatalf("EventBounds of an emptied log = %+v, %v; want Last %d only", b, err, last)
	}
	if next, err := f.Store.EventAppend(ctx, evs[:1]); err != nil || next != last+1 {
		t.Fatalf("EventAppend after cleanup = %d, %v; want %d", next, err, last+1)
	}
}

// eventsConcurrentAppendsReadInOrder is the ConcurrentAppendsReadInOrder subtest of testEvents.
func eventsConcurrentAppendsReadInOrder(t *testing.T, f *Fixture) {
	// Appenders race while a reader follows the log by its last ID:
	// the reader must see every event exactly once, in ID order, with
	// no ID skipped (IDs become visible in commit order).
	ctx := f.Ctx()
	b0, err := f.Store.EventBounds(ctx)
	if err != nil {
		t.Fatalf("EventBounds: %v", err)
	}
	const writers, batches, per = 4, 10, 3
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				batch := make([]rota.Event, per)
				for i := range batch {
					batch[i] = rota.Event{Time: f.Base, Type: rota.EventTask, TaskID: fmt.Sprintf("w%d-%d-%d", w, b, i)}
				}
				if _, err := f.Store.EventAppend(ctx, batch); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[string]bool{}
	after := b0.Last
	for total := writers * batches * per; len(seen) < total; {
		finished := false // every append had returned before this read
		select {
		case <-done:
			finished = true
		default:
		}
		evs, err := f.Store.EventList(ctx, store.EventListParams{After: after, Limit: 7})
		if err != nil {
			t.Fatalf("EventList: %v", err)
		}
		for _, ev := range evs {
			if ev.ID != after+1 {
				t.Fatalf("read event %d after %d: an ID was skipped", ev.ID, after)
			}
			if seen[ev.TaskID] {
				t.Fatalf("event of %s read twice", ev.TaskID)
			}
			seen[ev.TaskID] = true
			after = ev.ID
		}
		select {
		case err := <-errc:
			t.Fatalf("EventAppend: %v", err)
		default:
		}
		if finished && len(evs) == 0 && len(seen) < total {
			t.Fatalf("appends done, %d events read, want %d", len(seen), total)
		}
	}
}
