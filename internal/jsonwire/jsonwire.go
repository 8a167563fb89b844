// Package jsonwire reads and writes the few JSON shapes of the worker
// protocol's hot path (a claim's answer, a batch of reports and its
// answer) by hand, without reflection: encoding/json was a fifth of the
// CPU of an end-to-end run, client and server together.
//
// The Reader accepts only a plain subset of JSON (strings without escapes,
// integers, booleans; raw values validated) and says so when it meets
// anything else: its callers then decode with encoding/json as before, so
// that what they accept and the errors they give never change.
package jsonwire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Reader reads JSON values from a byte slice. Each method returns false
// when the input is not what it reads (or not in the plain subset): the
// Reader is then of no further use.
type Reader struct {
	b     []byte
	i     int
	valid bool // b is known to be valid JSON: Raw need not check its values
}

// NewReader returns a Reader of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// NewValidReader returns a Reader of b, which the caller knows to be valid
// JSON (json.Valid took it): Raw then returns each value without checking
// it again, which would be a second scan of every byte.
func NewValidReader(b []byte) *Reader { return &Reader{b: b, valid: true} }

func (r *Reader) ws() {
	for r.i < len(r.b) && isSpace(r.b[r.i]) {
		r.i++
	}
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Peek returns the next byte after whitespace, 0 at the end.
func (r *Reader) Peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

func (r *Reader) expect(c byte) bool {
	if r.Peek() != c {
		return false
	}
	r.i++
	return true
}

// Offset returns the index in the input of the next byte to read (after
// Peek: of the next value), for a caller that keeps the bytes of a value
// it read piece by piece.
func (r *Reader) Offset() int { return r.i }

// End reports whether nothing but whitespace is left.
func (r *Reader) End() bool {
	r.ws()
	return r.i == len(r.b)
}

// Object reads an object, calling f with each key (valid until the next
// read) once the Reader stands at its value; f must read the value.
func (r *Reader) Object(f func(key []byte) bool) bool {
	if !r.expect('{') {
		return false
	}
	if r.Peek() == '}' {
		r.i++
		return true
	}
	for {
		k, ok := r.rawString()
		if !ok || !r.expect(':') || !f(k) {
			return false
		}
		switch r.Peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return true
		default:
			return false
		}
	}
}

// Array reads an array, calling f to read each element.
func (r *Reader) Array(f func() bool) bool {
	if !r.expect('[') {
		return false
	}
	if r.Peek() == ']' {
		r.i++
		return true
	}
	for {
		if !f() {
			return false
		}
		switch r.Peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return true
		default:
			return false
		}
	}
}

// rawString reads a string without escapes and returns its bytes: valid
// UTF-8 (which encoding/json keeps as it is), no control characters.
func (r *Reader) rawString() ([]byte, bool) {
	if !r.expect('"') {
		return nil, false
	}
	start, ascii := r.i, true
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		r.i++
	}
	return nil, false
}

// String reads a string without escapes.
func (r *Reader) String() (string, bool) {
	b, ok := r.rawString()
	return string(b), ok
}

// StringReuse reads a string without escapes, returning *prev (no
// allocation) when it is the same, else the new string, kept in *prev.
func (r *Reader) StringReuse(prev *string) (string, bool) {
	b, ok := r.rawString()
	if !ok {
		return "", false
	}
	if string(b) != *prev {
		*prev = string(b)
	}
	return *prev, true
}

// Int reads an integer of at most 18 digits.
func (r *Reader) Int() (int64, bool) {
	r.ws()
	neg := r.i < len(r.b) && r.b[r.i] == '-'
	if neg {
		r.i++
	}
	start := r.i
	var n int64
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		n = n*10 + int64(r.b[r.i]-'0')
		r.i++
	}
	digits := r.i - start
	if digits == 0 || digits > 18 || (digits > 1 && r.b[start] == '0') {
		return 0, false
	}
	if r.i < len(r.b) {
		switch r.b[r.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

// Bool reads true or false.
func (r *Reader) Bool() (bool, bool) {
	r.ws()
	switch {
	case bytes.HasPrefix(r.b[r.i:], []byte("true")):
		r.i += 4
		return true, true
	case bytes.HasPrefix(r.b[r.i:], []byte("false")):
		r.i += 5
		return false, true
	}
	return false, false
}

// Raw reads any JSON value and returns its bytes (a sub-slice of the
// input), checked to be valid JSON (unless the whole input is known to be:
// NewValidReader).
func (r *Reader) Raw() ([]byte, bool) {
	r.ws()
	start, depth := r.i, 0
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch c {
		case '"':
			r.i++
			for r.i < len(r.b) && r.b[r.i] != '"' {
				if r.b[r.i] == '\\' {
					r.i++
				}
				r.i++
			}
			if r.i >= len(r.b) {
				return nil, false
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return r.raw(start)
			}
			depth--
		case ',':
			if depth == 0 {
				return r.raw(start)
			}
		}
		r.i++
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return r.raw(start)
		}
	}
	return r.raw(start)
}

func (r *Reader) raw(start int) ([]byte, bool) {
	// Drop the whitespace before a ',' or a closing bracket (by hand:
	// bytes.TrimRight was a sixth of the CPU of httpapi's quickKeys).
	end := r.i
	for end > start && isSpace(r.b[end-1]) {
		end--
	}
	v := r.b[start:end]
	if len(v) == 0 || (!r.valid && !json.Valid(v)) {
		return nil, false
	}
	return v, true
}

// AppendString appends s as a JSON string, as an encoding/json Encoder
// with SetEscapeHTML(false) writes it.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return appendStringSlow(dst, s)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func appendStringSlow(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimRight(buf.Bytes(), "\n")...)
}

// AppendCompact appends src, a JSON value the caller knows to be valid
// (a payload the store checked on its way in), without its insignificant
// whitespace: what json.Compact writes of valid JSON, without its check.
func AppendCompact(dst, src []byte) []byte {
	in := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case in:
			switch c {
			case '\\':
				if i+1 < len(src) {
					dst = append(dst, c)
					i++
					c = src[i]
				}
			case '"':
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// AppendInt appends n.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// AppendBool appends true or false.
func AppendBool(dst []byte, v bool) []byte { return strconv.AppendBool(dst, v) }
