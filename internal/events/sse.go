package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// ToJSON returns the wire form of ev.
func ToJSON(ev rota.Event) rotaapi.Event {
	out := rotaapi.Event{
		ID: ev.ID, Time: unixMilli(ev.Time), Type: ev.Type, Kind: ev.Kind, TaskID: ev.TaskID, RunID: ev.RunID,
		WorkerID: ev.WorkerID, Status: ev.Status, Attempt: ev.Attempt, Message: ev.Message, Name: ev.Name(),
		Result: ev.Result, ResultTruncated: ev.ResultTruncated,
	}
	if ev.Type == rota.EventRun && ev.Status == rota.StatusRunning {
		out.RunAt = unixMilli(ev.RunAt)
	}
	if ev.ScheduleID != "" {
		out.ScheduleID, out.FireTime = ev.ScheduleID, ev.FireTime.Unix()
	}
	return out
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// maxBatch is how many queued events a stream writes before it flushes.
const maxBatch = 256

// Handler serves the event stream, GET /api/events, as server-sent events
// (text/event-stream).
//
// The stream is the cluster's when the Hub has a Log: every node sends
// every node's events, with the same IDs. Query: kinds=a,b keeps only
// those kinds' events; types=task,run.failed only the events of those
// types or names (rota.Event.Name); task_id=ID only the events of that
// task. A client that reconnects (to any node)
// names the last ID it saw in the Last-Event-ID header (browsers do it on
// their own) or the last_event_id parameter; it then first gets the events
// after it. When that ID is no longer kept or unknown, the stream begins
// with a "reset" message (its data {"last_id": N}): the client must reload
// its state.
//
// Each event is a message without an event name whose id is the event's ID
// and whose data is its rotaapi.Event. The stream begins with a retry hint and
// the current position (an id line with no data), repeats the position in
// a comment-and-id heartbeat every Config.Heartbeat, and ends when the
// client goes away, when the subscriber falls too far behind (the client
// reconnects with its last ID), or when the Hub is closed.
func (h *Hub) Handler() http.Handler {
	return http.HandlerFunc(h.serveEvents)
}

func (h *Hub) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, rota.Errorf(rota.CodeMethod, "method %s is not allowed on %s; allowed: GET", r.Method, r.URL.Path))
		return
	}
	filter, after, err := parseStreamRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	sub, rep, err := h.Subscribe(r.Context(), filter, after)
	switch {
	case errors.Is(err, ErrClosed):
		writeError(w, rota.Errorf(rota.CodeUnavailable, "the server is shutting down"))
		return
	case err != nil:
		h.cfg.Logger.Warn("events: read the event log for a stream", "err", err)
		writeError(w, rota.Errorf(rota.CodeUnavailable, "the event log cannot be read now; retry"))
		return
	}
	defer sub.Close()

	sw := startStream(w)
	sw.writeRetry(h.cfg.Retry)
	sw.writeReplay(rep)
	if !sw.flush() {
		return
	}
	h.stream(r.Context(), sw, sub)
}

// parseStreamRequest returns the stream's filter and the ID the client saw
// last: the Last-Event-ID header wins over the last_event_id parameter.
func parseStreamRequest(r *http.Request) (Filter, uint64, error) {
	f, after, err := parseQuery(r, true)
	if err != nil {
		return Filter{}, 0, err
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if after, err = parseID("Last-Event-ID", v); err != nil {
			return Filter{}, 0, err
		}
	}
	return f, after, nil
}

// stream writes sub's events to sw, in batches of up to maxBatch per
// flush, and a keepalive every Config.Heartbeat, until ctx ends, the
// subscription closes or a write fails.
func (h *Hub) stream(ctx context.Context, sw *sseWriter, sub *Subscription) {
	beat := time.NewTicker(h.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			id, ok := sub.position()
			sw.writeKeepalive(id, ok)
			if !sw.flush() {
				return
			}
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			sw.writeEvent(ev)
			if !sw.writeQueued(sub) {
				sw.flush()
				return
			}
			if !sw.flush() {
				return
			}
		}
	}
}

// sseWriter writes server-sent-event messages to a response through a
// buffer; owned by the one goroutine that serves the stream.
type sseWriter struct {
	bw  *bufio.Writer
	rc  *http.ResponseController
	enc bytes.Buffer // scratch for an event's JSON
}

// startStream clears the write deadline (a stream outlives any write
// timeout of the server), sends the stream's headers and returns the
// writer of its body.
func startStream(w http.ResponseWriter) *sseWriter {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // tell nginx not to buffer
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{bw: bufio.NewWriterSize(w, 32<<10), rc: rc}
}

// flush sends what is buffered to the client and reports whether it got
// there.
func (s *sseWriter) flush() bool {
	return s.bw.Flush() == nil && s.rc.Flush() == nil
}

// writeRetry writes the client's reconnection delay.
func (s *sseWriter) writeRetry(d time.Duration) {
	s.bw.WriteString("retry: ")
	s.bw.WriteString(strconv.FormatInt(d.Milliseconds(), 10))
	s.bw.WriteString("\n\n")
}

// writeReplay writes what a subscription starts with: a reset message when
// the client's last ID is lost, the buffered events after it, and else the
// position, since the client is then up to date with everything before the
// subscription, matching or not.
func (s *sseWriter) writeReplay(rep Replay) {
	if rep.Reset {
		data, _ := json.Marshal(rotaapi.EventReset{LastID: rep.LastID})
		s.bw.WriteString("event: reset\nid: ")
		s.bw.WriteString(strconv.FormatUint(rep.LastID, 10))
		s.bw.WriteString("\ndata: ")
		s.bw.Write(data)
		s.bw.WriteString("\n\n")
	}
	for _, ev := range rep.Events {
		s.writeEvent(ev)
	}
	if !rep.Reset {
		s.writePosition(rep.LastID)
	}
}

// writeEvent writes ev as a message whose id is its ID and whose data is
// its rotaapi.Event.
func (s *sseWriter) writeEvent(ev rota.Event) {
	s.enc.Reset()
	_ = json.NewEncoder(&s.enc).Encode(ToJSON(ev)) // cannot fail: plain fields
	s.bw.WriteString("id: ")
	s.bw.WriteString(strconv.FormatUint(ev.ID, 10))
	s.bw.WriteString("\ndata: ")
	s.bw.Write(bytes.TrimRight(s.enc.Bytes(), "\n"))
	s.bw.WriteString("\n\n")
}

// writePosition writes an id line with no data: the client's position.
func (s *sseWriter) writePosition(id uint64) {
	s.bw.WriteString("id: ")
	s.bw.WriteString(strconv.FormatUint(id, 10))
	s.bw.WriteString("\n\n")
}

// writeKeepalive writes a comment, with the position id when known.
func (s *sseWriter) writeKeepalive(id uint64, known bool) {
	s.bw.WriteString(": keepalive\n")
	if known {
		s.writePosition(id)
	} else {
		s.bw.WriteString("\n")
	}
}

// writeQueued writes up to maxBatch events already queued on sub, without
// waiting, and reports false when the subscription closed.
func (s *sseWriter) writeQueued(sub *Subscription) bool {
	for range maxBatch {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				return false
			}
			s.writeEvent(ev)
		default:
			return true
		}
	}
	return true
}

// position returns the ID of the latest published event when every event
// of the subscription's filter up to it has been taken from C (nothing is
// queued), and false otherwise. A stream sends it so that a client with a
// narrow filter reconnects from a recent ID.
func (s *Subscription) position() (uint64, bool) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if _, ok := s.hub.subs[s]; !ok || len(s.ch) > 0 {
		return 0, false
	}
	return max(s.hub.last, s.skip), true
}

// envelope is the API's response body.
type envelope struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// writeData answers 200 with data in a success envelope.
func writeData(w http.ResponseWriter, data any) {
	writeEnvelope(w, http.StatusOK, envelope{Message: "ok", Data: data})
}

// writeError answers with err's code (a *rota.Error; anything else is
// internal) in an error envelope, naming the field at fault.
func writeError(w http.ResponseWriter, err error) {
	code := rota.ErrorCode(err)
	env := envelope{Code: code.Number(), Message: string(code)}
	var re *rota.Error
	if errors.As(err, &re) {
		env.Message = re.Message
		if re.Field != "" {
			env.Data = map[string]string{"field": re.Field}
		}
	}
	writeEnvelope(w, code.HTTPStatus(), env)
}

func writeEnvelope(w http.ResponseWriter, status int, env envelope) {
	body, err := json.Marshal(env)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":50000,"message":"internal error","data":null}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
