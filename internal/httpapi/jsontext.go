package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/rotahq/rota"
)

// checkText refuses a JSON value (already known to be valid JSON syntax)
// that not every store can hold and give back: bytes that are not UTF-8,
// a \u0000 escape (PostgreSQL's jsonb and text refuse NUL) or an unpaired
// surrogate escape. The error is invalid and names the deepest field at
// fault under path.
func checkText(raw []byte, path string) error {
	why := textProblem(raw)
	if why == "" {
		return nil
	}
	path = badTextPath(raw, path)
	if path == "" {
		return rota.Errorf(rota.CodeInvalid, "the request body %s", why)
	}
	return rota.Invalid(path, "%s", why)
}

// textProblem says what is wrong with the strings of raw, or "".
func textProblem(raw []byte) string {
	in := false
	for i := 0; i < len(raw); {
		c := raw[i]
		if !in {
			if c == '"' {
				in = true
			}
			if c >= utf8.RuneSelf {
				return "is not valid UTF-8"
			}
			i++
			continue
		}
		switch {
		case c == '"':
			in = false
			i++
		case c == '\\':
			if i+1 < len(raw) && raw[i+1] == 'u' {
				r, ok := hex4(raw, i+2)
				if !ok {
					return "holds a bad \\u escape"
				}
				switch {
				case r == 0:
					return `holds a NUL character (\u0000), which the store cannot keep`
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), false
					if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
						lo, ok = hex4(raw, i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return "holds an unpaired UTF-16 surrogate escape"
					}
					i += 12
					continue
				case r >= 0xDC00 && r <= 0xDFFF:
					return "holds an unpaired UTF-16 surrogate escape"
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n <= 1 {
				return "is not valid UTF-8"
			}
			i += n
		}
	}
	return ""
}

// hex4 reads 4 hex digits at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// badTextPath descends into raw, which textProblem refused, to the
// deepest value whose text is at fault (an object's key at fault names
// the object).
func badTextPath(raw []byte, path string) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
		return path
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return path
	}
	for i := 0; dec.More(); i++ {
		sub := fmt.Sprintf("%s[%d]", path, i)
		if raw[0] == '{' {
			tok, err := dec.Token()
			if err != nil {
				return path
			}
			key, _ := tok.(string)
			sub = joinPath(path, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return path
		}
		if textProblem(v) != "" {
			return badTextPath(v, sub)
		}
	}
	return path
}
