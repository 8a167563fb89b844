package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// twoNodes starts two servers on one fresh PostgreSQL schema and returns
// a client of each, and the ID of the event log's last event.
func twoNodes(t *testing.T) (a, b *rotaclient.Client, last uint64) {
	t.Helper()
	url := os.Getenv("ROTA_TEST_POSTGRES")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test"
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	schema := "events_" + hex.EncodeToString(r[:])
	t.Cleanup(func() { // registered first: runs after the servers stop
		ctx := context.WithoutCancel(t.Context())
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	var clients []*rotaclient.Client
	for _, node := range []string{"a", "b"} {
		s := startServer(t, Config{Store: url, PGSchema: schema, NodeID: node})
		bounds, err := s.store.EventBounds(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		last = bounds.Last
		c, err := rotaclient.New(rotaclient.Config{BaseURL: "http://" + s.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	return clients[0], clients[1], last
}

// streamed is what a subscription delivered, read by its own goroutine.
type streamed struct {
	evs  chan rota.Event
	errs chan error
}

// follow subscribes to c's stream after lastID (kinds: all) in the
// background until the test ends.
func follow(t *testing.T, c *rotaclient.Client, f rotaclient.EventFilter, lastID uint64) *streamed {
	ctx, cancel := context.WithCancel(t.Context())
	s := &streamed{evs: make(chan rota.Event, 1000), errs: make(chan error, 10)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range c.SubscribeFilter(ctx, f, lastID) {
			if err != nil {
				s.errs <- err
				continue
			}
			s.evs <- ev
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// next returns the next event, failing the test after 10 s or on an error
// of the stream.
func (s *streamed) next(t *testing.T) rota.Event {
	t.Helper()
	select {
	case ev := <-s.evs:
		return ev
	case err := <-s.errs:
		t.Fatalf("stream: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return rota.Event{}
}

// until returns the events up to and including the first that matches ok.
func (s *streamed) until(t *testing.T, ok func(rota.Event) bool) []rota.Event {
	t.Helper()
	var out []rota.Event
	for {
		ev := s.next(t)
		out = append(out, ev)
		if ok(ev) {
			return out
		}
	}
}

// TestEventsCoverTheCluster: a stream on node B carries what is done on
// node A, with A's ids; a client that saw an id on A and reconnects to B
// with it misses nothing and gets nothing twice; a finished run's event
// carries its result; the types filter is applied by the server.
func TestEventsCoverTheCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b, start := twoNodes(t)
	// The streams start after the log's last event: whenever they connect,
	// they see everything done from here on.
	onA := follow(t, a, rotaclient.EventFilter{}, start)
	onB := follow(t, b, rotaclient.EventFilter{}, start)
	succeededOnB := follow(t, b, rotaclient.EventFilter{Types: []string{"task.succeeded"}}, start)

	// Submitted on A: B's stream hears it, with the same id as A's.
	first, err := a.Submit(ctx, rotaclient.TaskParams{Kind: "email"})
	if err != nil {
		t.Fatal(err)
	}
	isFirst := func(ev rota.Event) bool { return ev.TaskID == first.TaskID && ev.Type == rota.EventTask }
	evA := onA.until(t, isFirst)
	evB := onB.until(t, isFirst)
	idA, idB := evA[len(evA)-1].ID, evB[len(evB)-1].ID
	if idA != idB || evB[len(evB)-1].Status != rota.StatusScheduled {
		t.Fatalf("the submit on A: id %d on A, %d (%s) on B; want one id, SCHEDULED", idA, idB, evB[len(evB)-1].Status)
	}

	// More work on both nodes, with a result, then a client that last saw
	// idA on A reconnects to B: it gets exactly what A's stream had after
	// idA.
	var ids []string
	for i, c := range []*rotaclient.Client{a, b, a} {
		res, err := c.Submit(ctx, rotaclient.TaskParams{Kind: "email", Payload: map[string]int{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.TaskID)
	}
	claim, err := b.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"email"}, Max: 10})
	if err != nil || len(claim.Runs) != 4 {
		t.Fatalf("claim: %d runs, %v; want 4", len(claim.Runs), err)
	}
	big := strings.Repeat("x", rota.MaxEventResult+100)
	for i, r := range claim.Runs {
		var result any = map[string]int{"n": i}
		if r.TaskID == first.TaskID {
			result = big
		}
		c := []*rotaclient.Client{a, b}[i%2]
		if err := c.Succeed(ctx, r.RunID, rotaclient.SucceedParams{WorkerID: "w1", Result: result}); err != nil {
			t.Fatal(err)
		}
	}
	last := ids[len(ids)-1]
	isLastDone := func(ev rota.Event) bool {
		return ev.TaskID == last && ev.Type == rota.EventTask && ev.Status == rota.StatusSuccess
	}
	afterA := onA.until(t, isLastDone)
	again := follow(t, b, rotaclient.EventFilter{}, idA)
	afterB := again.until(t, isLastDone)
	if len(afterA) != len(afterB) {
		t.Fatalf("after id %d: %d events on A, %d on B after reconnecting", idA, len(afterA), len(afterB))
	}
	for i := range afterA {
		if afterA[i].ID != afterB[i].ID || afterA[i].TaskID != afterB[i].TaskID || afterA[i].Status != afterB[i].Status {
			t.Fatalf("event %d: %+v on A, %+v on B", i, afterA[i], afterB[i])
		}
		if want := idA + 1 + uint64(i); afterA[i].ID != want {
			t.Fatalf("event %d has id %d, want %d: ids are consecutive", i, afterA[i].ID, want)
		}
	}

	// The server kept only task.succeeded events for the filtered stream,
	// with their results; the large one is cut at 4 KiB and says so.
	results := map[string]rota.Event{}
	for len(results) < 4 {
		ev := succeededOnB.next(t)
		if ev.Type != rota.EventTask || ev.Status != rota.StatusSuccess {
			t.Fatalf("filtered stream sent %s %s", ev.Type, ev.Status)
		}
		results[ev.TaskID] = ev
	}
	var cut string
	if ev := results[first.TaskID]; !ev.ResultTruncated || json.Unmarshal(ev.Result, &cut) != nil || cut != `"`+big[:rota.MaxEventResult-1] {
		t.Fatalf("large result: truncated %v, %d bytes", ev.ResultTruncated, len(ev.Result))
	}
	for _, id := range ids {
		if ev := results[id]; ev.ResultTruncated || !strings.HasPrefix(string(ev.Result), `{"n":`) {
			t.Fatalf("result of %s: %s (truncated %v)", id, ev.Result, ev.ResultTruncated)
		}
	}

	// An id no database issued is told to reload.
	unknown := follow(t, b, rotaclient.EventFilter{}, idA+1_000_000_000)
	select {
	case err := <-unknown.errs:
		if !errors.Is(err, rotaclient.ErrEventsReset) {
			t.Fatalf("unknown id: %v, want ErrEventsReset", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("unknown id: no reset")
	}
}
