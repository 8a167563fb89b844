package rotaclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// ErrEventsReset is yielded by Subscribe when the cluster no longer keeps
// the events after the last one seen (they are older than its event
// retention, or the id is another database's): some state changes were
// missed, so state built from events should be reloaded. The subscription goes on with the events
// that follow.
var ErrEventsReset = errors.New("rotaclient: events were missed: reload the state built from them")

// Reconnection delays of Subscribe: the server's retry hint (1 s until it
// sends one) after a stream ends, doubling after each failed attempt up to
// maxEventsBackoff.
const (
	defaultEventsRetry = time.Second
	maxEventsBackoff   = 30 * time.Second
)

func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// eventOf is the event w of the stream.
func eventOf(w *rotaapi.Event) rota.Event {
	ev := rota.Event{
		ID: w.ID, Time: fromUnixMilli(w.Time), Type: w.Type, Kind: w.Kind, TaskID: w.TaskID, RunID: w.RunID,
		WorkerID: w.WorkerID, Status: w.Status, Attempt: w.Attempt, Message: w.Message, RunAt: fromUnixMilli(w.RunAt),
		ScheduleID: w.ScheduleID, Result: w.Result, ResultTruncated: w.ResultTruncated,
	}
	if w.FireTime != 0 {
		ev.FireTime = time.Unix(w.FireTime, 0).UTC()
	}
	return ev
}

// EventFilter selects the events SubscribeFilter delivers; the server
// filters. Empty fields select everything.
type EventFilter struct {
	// Kinds keeps the events of these kinds.
	Kinds []string
	// Types keeps the events of these types ("task") or names
	// ("task.succeeded", see rota.Event.Name).
	Types []string
}

// Subscribe follows the server's event stream (GET /api/events): one
// event per task or run state change of the whole cluster, in order, for
// the given kinds (all kinds when empty). lastEventID is the ID of the
// last event already seen (0 for none), from any node of the cluster: the
// stream then starts with the events after it that the cluster still
// keeps (24 hours of them by default).
//
// Break out of the loop to stop, or cancel ctx. When the connection drops
// or the server stops, Subscribe reconnects on its own with the ID of the
// last event it delivered, so nothing is missed and nothing comes twice;
// the first attempt is made after the server's retry hint, the following
// ones back off up to 30 s. Errors are yielded only when the caller has
// something to do:
//
//   - ErrEventsReset: events were missed (see its doc); the sequence goes
//     on with the following events.
//   - a *rota.Error the server answered with instead of a stream (invalid
//     kinds, unauthorized, no such route...): the last value of the
//     sequence.
//
// The sequence ends without an error when ctx is done.
//
//	for ev, err := range c.Subscribe(ctx, []string{"email"}, 0) {
//		if errors.Is(err, rotaclient.ErrEventsReset) { reload(); continue }
//		if err != nil { return err }
//		handle(ev)
//	}
func (c *Client) Subscribe(ctx context.Context, kinds []string, lastEventID uint64) iter.Seq2[rota.Event, error] {
	return c.SubscribeFilter(ctx, EventFilter{Kinds: kinds}, lastEventID)
}

// SubscribeFilter is Subscribe with the server-side filter f (kinds and
// types).
func (c *Client) SubscribeFilter(ctx context.Context, f EventFilter, lastEventID uint64) iter.Seq2[rota.Event, error] {
	return func(yield func(rota.Event, error) bool) {
		s := &eventStream{c: c, kinds: f.Kinds, types: f.Types, last: lastEventID, retry: defaultEventsRetry, yield: yield}
		failures := 0
		for ctx.Err() == nil {
			got, err := s.run(ctx)
			if s.stopped {
				return
			}
			var re *rota.Error
			if errors.As(err, &re) && re.Code != rota.CodeUnavailable && re.Code != rota.CodeInternal {
				yield(rota.Event{}, err)
				return
			}
			if got {
				failures = 0
			} else {
				failures++
			}
			wait := s.retry
			for i := 1; i < failures && wait < maxEventsBackoff; i++ {
				wait *= 2
			}
			t := time.NewTimer(min(wait, maxEventsBackoff))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// eventStream is the state of one Subscribe across its connections.
type eventStream struct {
	c       *Client
	kinds   []string
	types   []string
	last    uint64        // the ID to resume after
	retry   time.Duration // the server's hint
	yield   func(rota.Event, error) bool
	stopped bool // the consumer broke out of the loop
}

// run makes one connection and delivers its events until it ends. got
// tells whether the server answered with a stream.
func (s *eventStream) run(ctx context.Context) (got bool, err error) {
	q := url.Values{}
	if len(s.kinds) > 0 {
		q.Set("kinds", strings.Join(s.kinds, ","))
	}
	if len(s.types) > 0 {
		q.Set("types", strings.Join(s.types, ","))
	}
	u := s.c.base.String() + "/api/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("rotaclient: GET /api/events: %w", err)
	}
	for k, vs := range s.c.header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", s.c.ua)
	if s.last != 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(s.last, 10))
	}
	resp, err := s.c.hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("rotaclient: GET /api/events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var env envelope
		if json.Unmarshal(raw, &env) == nil && env.Code != 0 {
			return false, envelopeError(env)
		}
		return false, statusError(resp.StatusCode, raw)
	}
	return true, s.read(resp.Body)
}

// read parses a text/event-stream body and yields its events.
func (s *eventStream) read(body io.Reader) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var (
		id, event string
		hasID     bool
		data      strings.Builder
		hasData   bool
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			// Dispatch the block: an id alone only moves the position.
			if hasID {
				if n, err := strconv.ParseUint(id, 10, 64); err == nil {
					s.last = n
				}
			}
			if hasData {
				if !s.dispatch(event, data.String()) {
					s.stopped = true
					return nil
				}
			}
			id, event, hasID, hasData = "", "", false, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue // a comment: heartbeat
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			id, hasID = value, true
		case "event":
			event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("rotaclient: event stream: %w", err)
	}
	return io.ErrUnexpectedEOF
}

// dispatch yields one message; false when the consumer stopped.
func (s *eventStream) dispatch(event, data string) bool {
	switch event {
	case "", "message":
		var w rotaapi.Event
		if err := json.Unmarshal([]byte(data), &w); err != nil {
			// Not an event this client understands: skip it.
			return true
		}
		return s.yield(eventOf(&w), nil)
	case "reset":
		return s.yield(rota.Event{}, ErrEventsReset)
	}
	return true
}
