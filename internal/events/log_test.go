package events_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// openLog opens a fresh SQLite store: the event log of the hubs of a test.
func openLog(t *testing.T) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.New(t.Context(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Relaxed: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startHub starts a hub over log; it is woken only by its own appends and
// Wake (its poll is an hour), and stopped when the test ends.
func startHub(t *testing.T, log events.Log, cfg events.Config) *events.Hub {
	t.Helper()
	cfg.Log, cfg.Logger = log, slog.New(slog.DiscardHandler)
	if cfg.Poll == 0 {
		cfg.Poll = time.Hour
	}
	h, err := events.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		h.Stop(context.WithoutCancel(t.Context()))
	})
	return h
}

// receive reads n events from sub, failing after 10 s.
func receive(t *testing.T, sub *events.Subscription, n int) []rota.Event {
	t.Helper()
	var out []rota.Event
	for len(out) < n {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription closed: %v", sub.Err())
			}
			out = append(out, ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d events within 10 s, want %d", len(out), n)
		}
	}
	return out
}

// quiet fails when sub delivers an event within a short while.
func quiet(t *testing.T, sub *events.Subscription) {
	t.Helper()
	select {
	case ev := <-sub.C():
		t.Fatalf("unexpected event %d %s", ev.ID, ev.TaskID)
	case <-time.After(50 * time.Millisecond):
	}
}

func subscribe(t *testing.T, h *events.Hub, f events.Filter, after uint64) (*events.Subscription, events.Replay) {
	t.Helper()
	sub, rep, err := h.Subscribe(t.Context(), f, after)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return sub, rep
}

func taskIDs(evs []rota.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.TaskID
	}
	return out
}

// TestAnIDFromAnotherNodeIsValid: two hubs share a log; a client that saw
// an event on A reconnects to B before B has read it: B takes the ID,
// replays nothing, and then sends only what follows it.
func TestAnIDFromAnotherNodeIsValid(t *testing.T) {
	t.Parallel()
	log := openLog(t)
	a := startHub(t, log, events.Config{})
	b := startHub(t, log, events.Config{})
	onA, _ := subscribe(t, a, events.Filter{}, 0)
	onB, _ := subscribe(t, b, events.Filter{}, 0)
	for i := range 3 {
		a.Publish(taskEvent(i))
	}
	got := receive(t, onA, 3)
	quiet(t, onB) // B has not read the log: it was not woken

	late, rep := subscribe(t, b, events.Filter{}, got[1].ID)
	if rep.Reset || len(rep.Events) != 0 || rep.LastID != got[1].ID {
		t.Fatalf("replay of B after A's id: %+v; want no reset, no events, position %d", rep, got[1].ID)
	}
	b.Wake() // as a notification from A would
	if evs := receive(t, late, 1); evs[0].ID != got[2].ID {
		t.Fatalf("after A's id %d B sent %d, want %d", got[1].ID, evs[0].ID, got[2].ID)
	}
	quiet(t, late)
	if evs := receive(t, onB, 3); evs[0].ID != got[0].ID || evs[2].ID != got[2].ID {
		t.Fatalf("B's stream: ids %d..%d, want A's %d..%d", evs[0].ID, evs[2].ID, got[0].ID, got[2].ID)
	}
}

// TestReplayFromTheLog: a client further behind than the node's buffer
// gets the rest from the log, filtered; once the log no longer keeps it,
// or for an id no one issued, it is told to reload.
func TestReplayFromTheLog(t *testing.T) {
	t.Parallel()
	log := openLog(t)
	h := startHub(t, log, events.Config{MaxEvents: 2})
	all, _ := subscribe(t, h, events.Filter{}, 0)
	for i := range 10 {
		ev := taskEvent(i)
		if i%2 == 1 {
			ev.Kind = "odd"
		}
		h.Publish(ev)
	}
	got := receive(t, all, 10)
	if oldest, _ := h.Oldest(); oldest != got[8].ID {
		t.Fatalf("buffer starts at %d, want %d (2 events)", oldest, got[8].ID)
	}
	_, rep := subscribe(t, h, events.Filter{Kinds: []string{"odd"}}, got[0].ID)
	if rep.Reset || rep.LastID != got[9].ID {
		t.Fatalf("replay: reset %v, position %d; want none, %d", rep.Reset, rep.LastID, got[9].ID)
	}
	want := []string{got[1].TaskID, got[3].TaskID, got[5].TaskID, got[7].TaskID, got[9].TaskID}
	if g := taskIDs(rep.Events); len(g) != len(want) || g[0] != want[0] || g[4] != want[4] {
		t.Fatalf("replay from the log: %v, want %v", g, want)
	}

	if _, err := log.EventCleanup(t.Context(), time.Now().Add(time.Hour), 5); err != nil {
		t.Fatal(err)
	}
	if _, rep := subscribe(t, h, events.Filter{}, got[0].ID); !rep.Reset || rep.LastID != got[9].ID {
		t.Fatalf("after cleanup: %+v; want a reset at %d", rep, got[9].ID)
	}
	if _, rep := subscribe(t, h, events.Filter{}, got[9].ID+100); !rep.Reset {
		t.Fatalf("unknown id: %+v; want a reset", rep)
	}
	if _, rep := subscribe(t, h, events.Filter{}, got[5].ID); rep.Reset || len(rep.Events) != 4 {
		t.Fatalf("after id %d (still kept): %+v; want 4 events", got[5].ID, rep)
	}
	// One task's events: an id older than the log replays what is kept.
	_, rep = subscribe(t, h, events.Filter{TaskID: got[7].TaskID}, 1)
	if rep.Reset || len(rep.Events) != 1 || rep.Events[0].ID != got[7].ID {
		t.Fatalf("one task's kept events: %+v", rep)
	}
}

// TestStopWritesWhatIsPending: events published just before Stop reach
// the log.
func TestStopWritesWhatIsPending(t *testing.T) {
	t.Parallel()
	log := openLog(t)
	b0, err := log.EventBounds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, log, events.Config{})
	for i := range 100 {
		h.Publish(taskEvent(i))
	}
	h.Stop(t.Context())
	evs, err := log.EventList(t.Context(), store.EventListParams{After: b0.Last, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 100 || evs[99].TaskID != taskEvent(99).TaskID {
		t.Fatalf("log has %d events after Stop, want 100 in order", len(evs))
	}
}

// TestTypesFilter: types keeps events by type or by name.
func TestTypesFilter(t *testing.T) {
	t.Parallel()
	h, err := events.New(events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := h.Subscribe(t.Context(), events.Filter{Types: []string{"task.succeeded", "kind"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	h.Publish(rota.Event{Type: rota.EventTask, TaskID: "a", Status: rota.StatusFailed})
	h.Publish(rota.Event{Type: rota.EventRun, TaskID: "b", Status: rota.StatusSuccess})
	h.Publish(rota.Event{Type: rota.EventTask, TaskID: "c", Status: rota.StatusSuccess})
	h.Publish(rota.Event{Type: rota.EventKind, Kind: "k", Message: "updated"})
	got := receive(t, sub, 2)
	if got[0].TaskID != "c" || got[1].Type != rota.EventKind {
		t.Fatalf("filtered: %+v", got)
	}
}
