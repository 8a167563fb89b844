package events_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/internal/store"
)

// nullLog is an event log that keeps nothing: it numbers the events
// appended, and lists none.
type nullLog struct{ last uint64 }

func (l *nullLog) EventAppend(_ context.Context, evs []rota.Event) (uint64, error) {
	l.last += uint64(len(evs))
	return l.last, nil
}

func (*nullLog) EventList(context.Context, store.EventListParams) ([]rota.Event, error) {
	return nil, nil
}

func (*nullLog) EventBounds(context.Context) (store.EventBounds, error) {
	return store.EventBounds{}, nil
}

// BenchmarkPublishFlush publishes batches of events of varying length (as
// the appender's 20 ms windows gather under a changing load) and appends
// each: once the two arrays of pending events are grown, publishing
// allocates nothing (each batch longer than the one before grew the spare
// again when the batch kept only its own length: 8% of the server's
// allocated bytes in an end-to-end run).
func BenchmarkPublishFlush(b *testing.B) {
	h, err := events.New(events.Config{Log: &nullLog{}, Logger: slog.New(slog.DiscardHandler), MaxEvents: 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	ev := rota.Event{Type: rota.EventTask, Kind: "k", TaskID: "t", Status: rota.StatusRunning, Time: time.Now()}
	sizes := []int{100, 300, 200, 400, 150, 350}
	round := func(n int) {
		for range n {
			h.Publish(ev)
		}
		if err := h.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range sizes { // both arrays grown to the largest
		round(n)
		round(n)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		n := sizes[i%len(sizes)]
		round(n)
	}
}
