package httpapi

import (
	"bytes"
	"strconv"

	"github.com/rotahq/rota"
)

// maxQuickKeys bounds the keys quickKeys tracks (more: checkKeys decides).
const maxQuickKeys = 32

// quickKeys reports whether data, valid JSON (json.Valid), is what
// checkKeys accepts: one object whose keys are each given once, spelled as
// in known, and whose values checkText accepts. It allocates nothing.
// false means "not shown": checkKeys then decides, and names the error
// (keys written with escapes, for one, are left to it).
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
// written as digits, true or false, and any value for "task". It reports
// false for anything else (an escape, null, a number with a fraction or an
// exponent, an array, a key checkKeys would refuse), leaving s to be reset
// and decoded by decodeValid, which also names the error. A batch's items
// are decoded this way: encoding/json's reflection was most of what an
// item cost the server. It may leave s partly set when it reports false.
func quickSubmit(data []byte, s *submitRequest, known map[string]bool) bool {
	if !quickKeys(data, known) {
		return false
	}
	i := skipSpace(data, 0) + 1 // after '{' (quickKeys checked the shape)
	if i = skipSpace(data, i); data[i] == '}' {
		return true
	}
	for {
		key, end, _ := plainString(data, i)
		i = skipSpace(data, skipSpace(data, end)+1) // after ':'
		j, _ := skipValue(data, i)
		if !quickField(s, string(key), data[i:j]) {
			return false
		}
		if i = skipSpace(data, j); data[i] == '}' {
			return true
		}
		i = skipSpace(data, i+1) // after ','
	}
}

// quickDecode implements quickDecoder (POST /api/tasks, a batch's items).
func (s *submitRequest) quickDecode(data []byte, known map[string]bool) bool {
	if quickSubmit(data, s, known) {
		return true
	}
	*s = submitRequest{}
	return false
}

// quickField sets the field of s named key from the JSON value v, when v
// has the plain shape quickSubmit takes.
func quickField(s *submitRequest, key string, v []byte) bool {
	switch key {
	case "task":
		if string(v) == "null" {
			return false
		}
		s.Task = bytes.Clone(v)
		return true
	case "kind", "priority", "key", "ref":
		str, end, ok := plainString(v, 0)
		if !ok || end != len(v) {
			return false
		}
		switch key {
		case "kind":
			s.Kind = string(str)
		case "priority":
			p := rota.Priority(str)
			s.Priority = &p
		case "key":
			k := string(str)
			s.Key = &k
		case "ref":
			s.Ref = string(str)
		}
		return true
	case "rerun_if_finished":
		switch string(v) {
		case "true":
			s.RerunIfFinished = true
		case "false":
			s.RerunIfFinished = false
		default:
			return false
		}
		return true
	case "run_at", "run_at_ms", "delay_seconds":
		n, ok := plainInt(v, 64)
		if !ok {
			return false
		}
		switch key {
		case "run_at":
			s.RunAt = &n
		case "run_at_ms":
			s.RunAtMS = &n
		default:
			s.DelaySeconds = &n
		}
		return true
	case "max_retries", "timeout_seconds", "heartbeat_timeout_seconds", "workers":
		n64, ok := plainInt(v, strconv.IntSize)
		if !ok {
			return false
		}
		n := int(n64)
		switch key {
		case "max_retries":
			s.MaxRetries = &n
		case "timeout_seconds":
			s.TimeoutSeconds = &n
		case "heartbeat_timeout_seconds":
			s.HeartbeatTimeoutSeconds = &n
		default:
			s.Workers = &n
		}
		return true
	}
	return false // worker_ids, depends_on: left to encoding/json
}

// plainInt parses v, a JSON number, when it is an integer written as
// digits (with a minus sign) that fits in bits.
func plainInt(v []byte, bits int) (int64, bool) {
	for k, c := range v {
		if (c < '0' || c > '9') && (c != '-' || k > 0) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(v), 10, bits)
	return n, err == nil
}
