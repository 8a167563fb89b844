package events_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/internal/store"
)

// echoLog keeps events in memory, and wakes the hub's tailer from inside
// each append, after its commit and some time before it returns: the
// notification of an append that PostgreSQL echoes to the node that made
// it. It counts the events its list returned.
type echoLog struct {
	mu   sync.Mutex
	evs  []rota.Event
	hub  atomic.Pointer[events.Hub]
	read atomic.Int64
}

func (l *echoLog) EventAppend(_ context.Context, evs []rota.Event) (uint64, error) {
	l.mu.Lock()
	for _, ev := range evs {
		ev.ID = uint64(len(l.evs) + 1)
		l.evs = append(l.evs, ev)
	}
	last := uint64(len(l.evs))
	l.mu.Unlock()
	if h := l.hub.Load(); h != nil {
		h.Wake()
		time.Sleep(20 * time.Millisecond) // the echo outruns the append's answer
	}
	return last, nil
}

func (l *echoLog) EventList(_ context.Context, p store.EventListParams) ([]rota.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []rota.Event
	for _, ev := range l.evs {
		if ev.ID > p.After && len(out) < p.Limit {
			out = append(out, ev)
		}
	}
	l.read.Add(int64(len(out)))
	return out, nil
}

func (l *echoLog) EventBounds(context.Context) (store.EventBounds, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return store.EventBounds{Last: uint64(len(l.evs))}, nil
}

// TestOwnAppendNotReadBack: the echo of the hub's own append wakes the
// tailer while the append is in progress; the tailer waits for it to be
// delivered instead of reading the chunk back from the log.
func TestOwnAppendNotReadBack(t *testing.T) {
	log := &echoLog{}
	h, err := events.New(events.Config{Log: log, Logger: slog.New(slog.DiscardHandler), Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop(context.WithoutCancel(t.Context()))
	defer h.Close()
	log.hub.Store(h)
	sub, _, err := h.Subscribe(t.Context(), events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 5
	for range n {
		h.Publish(rota.Event{Type: rota.EventTask, Kind: "k", TaskID: "t", Status: rota.StatusScheduled})
		receive(t, sub, 1)
	}
	time.Sleep(50 * time.Millisecond) // the tailer's last wake-up
	if got := log.read.Load(); got != 0 {
		t.Errorf("the tailer read %d of the hub's own %d events back from the log, want 0", got, n)
	}
}
