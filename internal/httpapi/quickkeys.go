package httpapi

import "bytes"

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
