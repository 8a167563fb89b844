package rotaclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/internal/httpapi"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/rotaclient"
)

// eventServer serves a Hub's stream alone.
func eventServer(t *testing.T, cfg events.Config) (*events.Hub, *httptest.Server, *rotaclient.Client) {
	t.Helper()
	hub, err := events.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/events", hub.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		hub.Close()
		srv.Close()
	})
	c, err := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return hub, srv, c
}

// TestSubscribeThousandEventsAcrossReconnects: 1,000 state changes arrive
// in order, none missing and none twice, while the server drops every
// connection twice along the way.
func TestSubscribeThousandEventsAcrossReconnects(t *testing.T) {
	t.Parallel()
	hub, srv, c := eventServer(t, events.Config{Retry: 20 * time.Millisecond, FirstID: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const total = 1000
	go func() {
		for i := range total {
			hub.Publish(rota.Event{Type: rota.EventTask, Kind: "k", TaskID: fmt.Sprint(i), Attempt: i, Status: rota.StatusScheduled})
			if i%50 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	var got []rota.Event
	// After ID 1: from the first event on, however late the stream opens.
	for ev, err := range c.Subscribe(ctx, []string{"k"}, 1) {
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		got = append(got, ev)
		if len(got) == 300 || len(got) == 700 {
			srv.CloseClientConnections()
		}
		if len(got) == total {
			break
		}
	}
	if len(got) != total {
		for i := 1; i < len(got); i++ {
			if got[i].ID != got[i-1].ID+1 {
				t.Logf("gap at %d: %d -> %d", i, got[i-1].ID, got[i].ID)
			}
		}
		t.Fatalf("got %d events (ctx: %v)", len(got), ctx.Err())
	}
	for i, ev := range got {
		if ev.Attempt != i || ev.ID != uint64(2+i) || ev.Time.IsZero() || ev.Kind != "k" {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
}

func TestSubscribeResetAndRefusal(t *testing.T) {
	t.Parallel()
	hub, _, c := eventServer(t, events.Config{FirstID: 1000, Retry: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hub.Publish(rota.Event{Type: rota.EventTask, Kind: "k"})
	next, stop := iterPull(c.Subscribe(ctx, nil, 5), cancel)
	defer stop()
	if _, err := next(); !errors.Is(err, rotaclient.ErrEventsReset) {
		t.Fatalf("first = %v, want ErrEventsReset", err)
	}
	hub.Publish(rota.Event{Type: rota.EventTask, Kind: "k", Message: "after"})
	if ev, err := next(); err != nil || ev.Message != "after" || ev.ID != 1001 {
		t.Fatalf("after the reset: %+v, %v", ev, err)
	}

	stop()
	n := 0
	for _, err := range c.Subscribe(context.Background(), []string{"bad kind"}, 0) {
		n++
		if !errors.Is(err, rota.ErrInvalid) {
			t.Fatalf("err = %v, want invalid", err)
		}
	}
	if n != 1 {
		t.Fatalf("%d values for a refused subscription, want 1", n)
	}
}

// iterPull adapts a sequence for step-by-step reading; stop cancels the
// sequence's context and waits for it to end.
func iterPull(seq func(func(rota.Event, error) bool), cancel context.CancelFunc) (next func() (rota.Event, error), stop func()) {
	type item struct {
		ev  rota.Event
		err error
	}
	ch := make(chan item)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		seq(func(ev rota.Event, err error) bool {
			select {
			case ch <- item{ev, err}:
				return true
			case <-done:
				return false
			}
		})
	}()
	return func() (rota.Event, error) {
			it, ok := <-ch
			if !ok {
				return rota.Event{}, errors.New("sequence ended")
			}
			return it.ev, it.err
		}, sync.OnceFunc(func() {
			cancel()
			close(done)
			for range ch {
			}
		})
}

// TestSubscribeSeesTaskLifecycle wires the stream as the server does
// (dispatcher events into the Hub) and follows a task through the client.
func TestSubscribeSeesTaskLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Relaxed: true})
	if err != nil {
		t.Fatal(err)
	}
	// Subscribing after ID 1 replays everything from the first event: no
	// race between opening the stream and the submit below.
	hub, err := events.New(events.Config{FirstID: 2})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := dispatch.New(dispatch.Config{Store: st, Events: hub.Publish, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Store: st, Dispatcher: disp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api.Handler())
	mux.Handle("GET /api/events", hub.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		hub.Close()
		srv.Close()
		disp.Stop()
		st.Close()
	})
	c, err := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	next, stop := iterPull(c.Subscribe(ctx, []string{"mail"}, 1), cancel)
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	sub, err := c.Submit(ctx, rotaclient.TaskParams{Kind: "mail", Payload: map[string]string{"to": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	id := sub.TaskID
	want := []struct {
		typ    rota.EventType
		status rota.Status
	}{
		{rota.EventTask, rota.StatusScheduled},
		{rota.EventRun, rota.StatusRunning},
		{rota.EventTask, rota.StatusRunning},
		{rota.EventRun, rota.StatusSuccess},
		{rota.EventTask, rota.StatusSuccess},
	}
	worked := make(chan struct{})
	defer func() { <-worked }() // runs before stop (which cancels ctx): the reports finish first
	go func() {
		defer close(worked)
		ctx := context.Background()
		runs, err := c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"mail"}, Wait: 5 * time.Second})
		if err != nil || len(runs.Runs) != 1 {
			t.Errorf("claim: %+v, %v", runs, err)
			return
		}
		if err := c.Succeed(ctx, runs.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1"}); err != nil {
			t.Errorf("succeed: %v", err)
		}
	}()
	for i := 0; i < len(want); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %d events", i)
		}
		ev, err := next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.TaskID != id {
			continue
		}
		if ev.Type != want[i].typ || ev.Status != want[i].status {
			t.Fatalf("event %d = %s %s, want %s %s", i, ev.Type, ev.Status, want[i].typ, want[i].status)
		}
		if ev.Type == rota.EventRun && ev.Status == rota.StatusRunning && (ev.WorkerID != "w1" || ev.RunAt.IsZero() || ev.RunID == "") {
			t.Fatalf("run start = %+v", ev)
		}
		i++
	}
}

// TestSubscribeCarriesEveryField: an event crosses the stream with every
// field the server sends (both sides use rotaapi.Event), the schedule's
// and the result's included.
func TestSubscribeCarriesEveryField(t *testing.T) {
	t.Parallel()
	hub, _, c := eventServer(t, events.Config{FirstID: 500, Retry: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fire := time.Unix(1_800_000_000, 0).UTC()
	at := time.UnixMilli(1_800_000_000_123).UTC()
	want := rota.Event{Type: rota.EventRun, Kind: "report", TaskID: "t1", RunID: "r1", WorkerID: "w1",
		Status: rota.StatusSuccess, Attempt: 2, Message: "done", ScheduleID: "s1", FireTime: fire,
		Result: json.RawMessage(`{"rows":3}`), Time: at}
	hub.Publish(want)
	// Resume after 499: the stream replays the event published as 500.
	next, stop := iterPull(c.Subscribe(ctx, nil, 499), cancel)
	defer stop()
	got, err := next()
	if err != nil {
		t.Fatal(err)
	}
	want.ID = got.ID
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event (-published +received):\n%s", diff)
	}
}
