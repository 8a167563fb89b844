package events_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/rotaapi"
)

// message is one server-sent message as a client sees it.
type message struct {
	id    string // the id field, "" when absent
	event string
	data  string
}

// reader parses a text/event-stream body.
type reader struct {
	sc      *bufio.Scanner
	comment int // comment lines seen
	retry   string
}

func newReader(r io.Reader) *reader { return &reader{sc: bufio.NewScanner(r)} }

// next returns the next block (dispatched message or id-only block).
func (r *reader) next() (message, error) {
	var m message
	var seen bool
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if seen {
				return m, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			r.comment++
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			m.id, seen = value, true
		case "event":
			m.event, seen = value, true
		case "data":
			m.data, seen = value, true
		case "retry":
			r.retry = value
		}
	}
	if err := r.sc.Err(); err != nil {
		return m, err
	}
	return m, io.EOF
}

// nextEvent skips id-only blocks and returns the next message with data.
func (r *reader) nextEvent() (message, error) {
	for {
		m, err := r.next()
		if err != nil || m.data != "" {
			return m, err
		}
	}
}

type bundle struct {
	hub *events.Hub
	srv *httptest.Server
}

func setup(t *testing.T, cfg events.Config) *bundle {
	t.Helper()
	hub, err := events.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/events", hub.Handler())
	mux.Handle("/api/stats/throughput", hub.ThroughputHandler())
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.RegisterOnShutdown(hub.Close)
	srv.Start()
	t.Cleanup(func() {
		hub.Close()
		srv.Close()
	})
	return &bundle{hub: hub, srv: srv}
}

// open starts a stream; lastID "" sends no Last-Event-ID.
func (b *bundle) open(t *testing.T, ctx context.Context, query, lastID string) (*http.Response, *reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/api/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /api/events%s: %d %s", query, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, newReader(resp.Body)
}

func decode(t *testing.T, m message) rotaapi.Event {
	t.Helper()
	var ev rotaapi.Event
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
		t.Fatalf("data %q: %v", m.data, err)
	}
	if m.id != strconv.FormatUint(ev.ID, 10) {
		t.Fatalf("id line %q, data id %d", m.id, ev.ID)
	}
	return ev
}

func taskEvent(i int) rota.Event {
	return rota.Event{Type: rota.EventTask, Kind: "k", TaskID: fmt.Sprintf("%032x", i), Status: rota.StatusScheduled, Attempt: i}
}

// TestThousandEventsInOrderAcrossReconnect publishes 1,000 state changes
// while a client reads them, drops the connection half-way and reconnects
// with Last-Event-ID: every event arrives once, in order.
func TestThousandEventsInOrderAcrossReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Config{})
	const total = 1000
	ctx, cancel := context.WithCancel(context.Background())
	resp, rd := b.open(t, ctx, "", "")
	if rd.retry != "" {
		t.Fatalf("retry before the first read: %q", rd.retry)
	}

	publishing := make(chan struct{})
	go func() {
		defer close(publishing)
		for i := range total {
			b.hub.Publish(taskEvent(i))
			if i%100 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()

	var got []rotaapi.Event
	for len(got) < 400 {
		m, err := rd.nextEvent()
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		got = append(got, decode(t, m))
	}
	if rd.retry != "2000" {
		t.Fatalf("retry hint = %q, want 2000", rd.retry)
	}
	cancel() // the connection drops
	resp.Body.Close()
	<-publishing // events keep coming while the client is away

	last := strconv.FormatUint(got[len(got)-1].ID, 10)
	_, rd = b.open(t, context.Background(), "", last)
	for len(got) < total {
		m, err := rd.nextEvent()
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		if m.event != "" {
			t.Fatalf("unexpected %q message after reconnecting within the buffer", m.event)
		}
		got = append(got, decode(t, m))
	}
	for i, ev := range got {
		if ev.Attempt != i || ev.ID != got[0].ID+uint64(i) {
			t.Fatalf("event %d: attempt %d id %d; want attempt %d id %d", i, ev.Attempt, ev.ID, i, got[0].ID+uint64(i))
		}
		if ev.Time == 0 || ev.Type != "task" || ev.Kind != "k" || ev.Status != rota.StatusScheduled {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
}

func TestResetWhenTheIDIsOutOfTheBuffer(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Config{MaxEvents: 10, FirstID: 1000})
	for i := range 30 {
		b.hub.Publish(taskEvent(i))
	}
	oldest, ok := b.hub.Oldest()
	if !ok || oldest != 1020 {
		t.Fatalf("Oldest = %d, %v; want 1020", oldest, ok)
	}
	for _, tc := range []struct {
		name, last string
		reset      bool
		first      int // attempt of the first replayed event, -1 for none
	}{
		{"evicted", "1005", true, -1},
		{"just before the buffer", "1019", false, 20},
		{"inside the buffer", "1025", false, 26},
		{"latest", "1029", false, -1},
		{"from the future (another process)", "5000", true, -1},
		{"from before this hub", "17", true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, rd := b.open(t, ctx, "", tc.last)
			m, err := rd.next()
			if err != nil {
				t.Fatal(err)
			}
			if tc.reset {
				if m.event != "reset" || m.id != "1029" || m.data != `{"last_id":1029}` {
					t.Fatalf("first message = %+v, want a reset at 1029", m)
				}
				return
			}
			if tc.first < 0 {
				if m.id != "1029" || m.data != "" {
					t.Fatalf("first block = %+v, want the position 1029", m)
				}
				return
			}
			if ev := decode(t, m); ev.Attempt != tc.first {
				t.Fatalf("first replayed = %+v, want attempt %d", ev, tc.first)
			}
		})
	}
}

func TestRetentionDropsOldEvents(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	hub, err := events.New(events.Config{Now: clock, Retention: time.Minute, FirstID: 1})
	if err != nil {
		t.Fatal(err)
	}
	hub.Publish(taskEvent(0))
	hub.Publish(taskEvent(1))
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	hub.Publish(taskEvent(2))
	if oldest, _ := hub.Oldest(); oldest != 3 {
		t.Fatalf("oldest = %d, want 3", oldest)
	}
	sub, rep, err := hub.Subscribe(t.Context(), events.Filter{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !rep.Reset || rep.LastID != 3 {
		t.Fatalf("replay = %+v, want a reset at 3", rep)
	}
}

func TestSlowSubscriberIsDroppedWithoutBlocking(t *testing.T) {
	t.Parallel()
	hub, err := events.New(events.Config{SubscriberBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	slow, _, err := hub.Subscribe(t.Context(), events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	fast, _, err := hub.Subscribe(t.Context(), events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fastGot []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range fast.C() {
			fastGot = append(fastGot, ev.Attempt)
			if len(fastGot) == 100 {
				return
			}
		}
	}()
	published := make(chan struct{})
	go func() {
		for i := range 100 {
			hub.Publish(taskEvent(i))
			time.Sleep(100 * time.Microsecond)
		}
		close(published)
	}()
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish blocked on a slow subscriber")
	}
	<-done
	n := 0
	for range slow.C() {
		n++
	}
	if n != 4 || !errors.Is(slow.Err(), events.ErrSlow) {
		t.Fatalf("slow subscriber got %d events then %v; want 4 then ErrSlow", n, slow.Err())
	}
	if len(fastGot) != 100 {
		t.Fatalf("fast subscriber got %d events", len(fastGot))
	}
	fast.Close()
	fast.Close() // idempotent
	if err := fast.Err(); err != nil {
		t.Fatalf("Err after Close = %v", err)
	}
}

func TestKindsFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, rd := b.open(t, ctx, "?kinds=a,c", "")
	for _, k := range []string{"a", "b", "c", "", "a"} {
		b.hub.Publish(rota.Event{Type: rota.EventTask, Kind: k, Status: rota.StatusScheduled})
	}
	var kinds []string
	for range 3 {
		m, err := rd.nextEvent()
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, decode(t, m).Kind)
	}
	if diff := cmp.Diff([]string{"a", "c", "a"}, kinds); diff != "" {
		t.Fatalf("kinds (-want +got):\n%s", diff)
	}
}

// TestTaskIDFilter: task_id keeps one task's events, on the server.
func TestTaskIDFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	one, other := strings.Repeat("a", 32), strings.Repeat("b", 32)
	_, rd := b.open(t, ctx, "?task_id="+one, "")
	for i, id := range []string{other, one, other, one} {
		b.hub.Publish(rota.Event{Type: rota.EventRun, Kind: "k", TaskID: id, Attempt: i, Status: rota.StatusRunning})
	}
	var got []string
	for range 2 {
		m, err := rd.nextEvent()
		if err != nil {
			t.Fatal(err)
		}
		ev := decode(t, m)
		got = append(got, fmt.Sprintf("%s/%d", ev.TaskID[:1], ev.Attempt))
	}
	if diff := cmp.Diff([]string{"a/1", "a/3"}, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Config{})
	for _, tc := range []struct {
		method, query, lastID string
		status                int
		want                  string
	}{
		{"GET", "?kinds=no%20way", "", 400, `"field":"kinds"`},
		{"GET", "?color=red", "", 400, `"code":40003`},
		{"GET", "?types=Task.Succeeded", "", 400, `"field":"types"`},
		{"GET", "?types=task.succeeded.twice", "", 400, `"field":"types"`},
		{"GET", "", "abc", 400, `"field":"Last-Event-ID"`},
		{"GET", "?last_event_id=x", "", 400, `"field":"last_event_id"`},
		{"GET", "?task_id=xyz", "", 400, `"field":"task_id"`},
		{"GET", "?task_id=a&task_id=b", "", 400, `"field":"task_id"`},
		{"POST", "", "", 405, `"code":40500`},
	} {
		req, _ := http.NewRequest(tc.method, b.srv.URL+"/api/events"+tc.query, nil)
		if tc.lastID != "" {
			req.Header.Set("Last-Event-ID", tc.lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s (Last-Event-ID %q) = %d %s; want %d with %s", tc.method, tc.query, tc.lastID, resp.StatusCode, body, tc.status, tc.want)
		}
	}
}

func TestHeartbeatCarriesThePosition(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Config{Heartbeat: 20 * time.Millisecond, FirstID: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, rd := b.open(t, ctx, "?kinds=mine", "")
	m, err := rd.next()
	if err != nil || m.id != "0" {
		t.Fatalf("first block = %+v, %v; want the position 0", m, err)
	}
	b.hub.Publish(rota.Event{Kind: "other"})
	b.hub.Publish(rota.Event{Kind: "other"})
	for {
		m, err := rd.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.data != "" {
			t.Fatalf("got an event of another kind: %+v", m)
		}
		if m.id == "2" {
			break
		}
	}
	if rd.comment == 0 {
		t.Fatal("no heartbeat comment")
	}
}

// TestShutdownIsNotHeldUpByStreams: http.Server.Shutdown returns at once
// while streams are open, because the Hub closes them.
func TestShutdownIsNotHeldUpByStreams(t *testing.T) {
	t.Parallel()
	hub, err := events.New(events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: hub.Handler()}
	srv.RegisterOnShutdown(hub.Close)
	go srv.Serve(ln)
	resp, err := http.Get("http://" + ln.Addr().String() + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end")
	}
	if _, _, err := hub.Subscribe(t.Context(), events.Filter{}, 0); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Subscribe after Close = %v, want ErrClosed", err)
	}
	hub.Publish(taskEvent(1)) // no panic, no effect
}

func TestClientGoneEndsTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Config{SubscriberBuffer: 1})
	ctx, cancel := context.WithCancel(context.Background())
	_, rd := b.open(t, ctx, "", "")
	if _, err := rd.next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The handler unsubscribes: publishing many events never blocks, and a
	// new subscriber still gets them.
	_, rd2 := b.open(t, context.Background(), "", "")
	for i := range 50 {
		b.hub.Publish(taskEvent(i))
	}
	m, err := rd2.nextEvent()
	if err != nil || decode(t, m).Attempt != 0 {
		t.Fatalf("first event = %+v, %v", m, err)
	}
}

func TestThroughput(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 30, 20, 0, time.UTC)
	b := setup(t, events.Config{Now: func() time.Time { return now }})
	run := func(kind string, st rota.Status, ago time.Duration) {
		b.hub.Publish(rota.Event{Type: rota.EventRun, Kind: kind, Status: st, Time: now.Add(-ago)})
	}
	run("a", rota.StatusRunning, 0)
	run("a", rota.StatusSuccess, 0)
	run("b", rota.StatusRunning, 0)
	run("b", rota.StatusTimeout, 0)
	run("a", rota.StatusFailed, 5*time.Minute)
	run("a", rota.StatusCanceled, 5*time.Minute) // not counted
	run("a", rota.StatusRunning, 2*time.Hour)    // too old
	b.hub.Publish(rota.Event{Type: rota.EventTask, Kind: "a", Status: rota.StatusSuccess})

	all := b.hub.Throughput(nil)
	if len(all) != 60 || all[59].Time != now.Truncate(time.Minute).Unix() {
		t.Fatalf("%d buckets, last at %d", len(all), all[59].Time)
	}
	if diff := cmp.Diff(events.Bucket{Time: all[59].Time, Started: 2, Succeeded: 1, Failed: 1}, all[59]); diff != "" {
		t.Fatalf("current minute (-want +got):\n%s", diff)
	}
	if all[54].Failed != 1 || all[54].Time != all[59].Time-300 {
		t.Fatalf("5 minutes ago = %+v", all[54])
	}

	resp, err := http.Get(b.srv.URL + "/api/stats/throughput?kinds=b")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Code int
		Data struct{ Buckets []events.Bucket }
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if len(env.Data.Buckets) != 60 {
		t.Fatalf("%d buckets", len(env.Data.Buckets))
	}
	if got := env.Data.Buckets[59]; got.Started != 1 || got.Failed != 1 || got.Succeeded != 0 {
		t.Fatalf("kind b now = %+v", got)
	}
}
