package httpapi

import (
	"bytes"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/jsonwire"
	"github.com/rotahq/rota/rotaapi"
)

// maxQuickKeys bounds the keys quickKeys tracks (more: checkKeys decides).
const maxQuickKeys = 32

// quickKeys reports whether data, valid JSON (json.Valid), is what
// checkKeys accepts: one object whose keys are each given once, spelled as
// in known, and whose values checkText accepts. It allocates nothing.
// false means "not shown": checkKeys then decides, and names the error
// (keys written with escapes, for one, are left to it).
//
// It keeps its own scanner rather than jsonwire.Reader's Object and Raw:
// on the Reader it measured a third slower (1.37 against 1.02 µs for a
// 130-byte submit body, medians of 10), the calls through Object's
// callback and Raw costing more than the straight loop here.
func quickKeys(data []byte, known map[string]bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	var seen [maxQuickKeys][]byte
	n := 0
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for n < maxQuickKeys {
		key, end, ok := plainString(data, i)
		if !ok || !known[string(key)] || hasKey(seen[:n], key) {
			return false
		}
		seen[n], n = key, n+1
		if i = skipSpace(data, end); i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		j, ok := skipValue(data, i)
		if !ok || textProblem(data[i:j]) != "" {
			return false
		}
		if i = skipSpace(data, j); i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
	return false
}

func hasKey(seen [][]byte, key []byte) bool {
	for _, k := range seen {
		if bytes.Equal(k, key) {
			return true
		}
	}
	return false
}

// plainString returns the bytes of the JSON string at data[i] when it has
// no escape, and the index after its closing quote.
func plainString(data []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			return nil, 0, false
		case '"':
			return data[i+1 : j], j + 1, true
		}
	}
	return nil, 0, false
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index just after the JSON value that starts at
// data[i] (valid JSON assumed).
func skipValue(data []byte, i int) (int, bool) {
	depth := 0
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(data) {
				return 0, false
			}
			i++
		case c == '{' || c == '[':
			depth++
			i++
			continue
		case c == '}' || c == ']':
			if depth == 0 { // the end of a scalar: its object closes
				return i, true
			}
			depth--
			i++
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			return i, true
		default:
			i++
			continue
		}
		if depth == 0 {
			return i, true
		}
	}
	return 0, false
}

// quickSubmit decodes data, valid JSON, into s as decodeValid would when
// every value of it is of a plain shape: strings without escapes, integers
// written as digits, true or false, and any value but null for "task". It
// reports false for anything else (an escape, null, a number with a
// fraction or an exponent, an array, a key checkKeys would refuse, a key
// given twice), leaving s to be reset and decoded by decodeValid, which
// also names the error. A batch's items are decoded this way:
// encoding/json's reflection was most of what an item cost the server. It
// may leave s partly set when it reports false.
//
// The keys it takes are fields of submitRequest, so checkKeys would accept
// them; the strings the Reader takes are valid UTF-8 without escapes, so
// checkText would accept them: only the raw task is checked for its text.
func quickSubmit(data []byte, s *submitRequest) bool {
	var q quickItems
	return q.item(jsonwire.NewValidReader(data), &s.SubmitRequest, false) && q.r.End()
}

// quickItems reads the plain submits of a request (one, or a batch's
// items) from one Reader. It keeps the strings that items of a batch
// mostly share (the kind, the priority), so that each is allocated once
// per request rather than once per item.
type quickItems struct {
	r        *jsonwire.Reader
	kind     string
	priority rota.Priority
}

// item reads one plain submit at r into s, as quickSubmit describes. The
// raw task aliases the Reader's input when alias is set (a batch read
// straight from the request body, which outlives the request's tasks in
// the server), else it is copied.
func (q *quickItems) item(r *jsonwire.Reader, s *rotaapi.SubmitRequest, alias bool) bool {
	q.r = r
	var seen uint16
	return r.Object(func(key []byte) bool {
		bit, ok := q.field(s, key, alias)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

// quickDecode implements quickDecoder (POST /api/tasks, a batch's items
// when the batch is not read by batchRequest.decodeFast).
func (s *submitRequest) quickDecode(data []byte) bool {
	if quickSubmit(data, s) {
		return true
	}
	*s = submitRequest{}
	return false
}

// field reads the value of the field of s named key, when it has the
// plain shape quickSubmit takes, and returns the field's bit (one per
// field, for quickSubmit to refuse a key given twice).
func (q *quickItems) field(s *rotaapi.SubmitRequest, key []byte, alias bool) (bit uint16, ok bool) {
	r := q.r
	switch string(key) {
	case "task":
		v, ok := r.Raw()
		if !ok || string(v) == "null" || textProblem(v) != "" {
			return 0, false
		}
		if !alias {
			v = bytes.Clone(v)
		}
		s.Task = v
		return 1 << 0, true
	case "kind":
		s.Kind, ok = r.StringReuse(&q.kind)
		return 1 << 1, ok
	case "priority":
		// Each item gets its own pointer (a check may not write through
		// it, but nothing should have to know that), to the shared string.
		p := new(rota.Priority)
		var v string
		v, ok = r.StringReuse((*string)(&q.priority))
		*p = rota.Priority(v)
		s.Priority = p
		return 1 << 2, ok
	case "key":
		var k string
		k, ok = r.String()
		s.Key = &k
		return 1 << 3, ok
	case "ref":
		s.Ref, ok = r.String()
		return 1 << 4, ok
	case "rerun_if_finished":
		s.RerunIfFinished, ok = r.Bool()
		return 1 << 5, ok
	case "run_at":
		s.RunAt, ok = quickInt64(r)
		return 1 << 6, ok
	case "run_at_ms":
		s.RunAtMS, ok = quickInt64(r)
		return 1 << 7, ok
	case "delay_seconds":
		s.DelaySeconds, ok = quickInt64(r)
		return 1 << 8, ok
	case "max_retries":
		s.MaxRetries, ok = quickInt(r)
		return 1 << 9, ok
	case "timeout_seconds":
		s.TimeoutSeconds, ok = quickInt(r)
		return 1 << 10, ok
	case "heartbeat_timeout_seconds":
		s.HeartbeatTimeoutSeconds, ok = quickInt(r)
		return 1 << 11, ok
	case "workers":
		s.Workers, ok = quickInt(r)
		return 1 << 12, ok
	}
	return 0, false // worker_ids, depends_on: left to encoding/json
}

// quickInt64 reads an integer into a new int64.
func quickInt64(r *jsonwire.Reader) (*int64, bool) {
	n, ok := r.Int()
	return &n, ok
}

// quickInt reads an integer that fits in an int into a new int.
func quickInt(r *jsonwire.Reader) (*int, bool) {
	n64, ok := r.Int()
	n := int(n64)
	return &n, ok && int64(n) == n64
}
