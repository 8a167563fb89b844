package jsonwire

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppendMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "tab\there", "<&>", "é", "\u2028", "bad\xffutf8", "\x00\x1f"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		if got, want := string(AppendString(nil, s)), string(bytes.TrimRight(buf.Bytes(), "\n")); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	for _, v := range []string{`{"a": 1, "b": [1, 2 , "x  y\" z"], "c": {"d" : null}}`, " \n[ true ,false ]\t", `"a\\"`, `1`} {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got := string(AppendCompact(nil, []byte(v))); got != buf.String() {
			t.Errorf("AppendCompact(%s) = %s, want %s", v, got, buf.String())
		}
	}
}

func TestReaderRaw(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":[1,{"b":"}"}]} ,`: `{"a":[1,{"b":"}"}]}`,
		`"x\"y",`:               `"x\"y"`,
		`12 }`:                  `12`,
		`null]`:                 `null`,
	} {
		r := NewReader([]byte(in))
		got, ok := r.Raw()
		if !ok || string(got) != want {
			t.Errorf("Raw(%s) = %s, %v; want %s", in, got, ok, want)
		}
		// Read as a field of a valid object, unchecked: the same value.
		data := []byte(`{"k": ` + want + ` , "z":0}`)
		r = NewValidReader(data)
		var fields []string
		if !r.Object(func(key []byte) bool {
			v, ok := r.Raw()
			fields = append(fields, string(key)+"="+string(v))
			return ok
		}) || !r.End() || len(fields) != 2 || fields[0] != "k="+want || fields[1] != "z=0" {
			t.Errorf("NewValidReader(%s): read %q", data, fields)
		}
	}
	for _, in := range []string{`{"a":}`, `tru`, `"open`, ``} {
		if _, ok := NewReader([]byte(in)).Raw(); ok {
			t.Errorf("Raw(%s) took it", in)
		}
	}
}

// TestReaderOffset: after Peek, Offset is where the next value starts;
// after a value, just past it.
func TestReaderOffset(t *testing.T) {
	in := []byte(`[ {"a":1} , {"b":2}]`)
	r := NewReader(in)
	var got []string
	ok := r.Array(func() bool {
		r.Peek()
		start := r.Offset()
		ok := r.Object(func([]byte) bool { _, ok := r.Int(); return ok })
		got = append(got, string(in[start:r.Offset()]))
		return ok
	})
	if !ok || len(got) != 2 || got[0] != `{"a":1}` || got[1] != `{"b":2}` {
		t.Errorf("items %q (ok %v), want {\"a\":1} and {\"b\":2}", got, ok)
	}
}
