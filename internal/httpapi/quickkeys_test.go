package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestQuickKeys checks quickKeys against checkKeys: it may only accept what
// checkKeys accepts, and it must accept the plain objects of the hot path.
func TestQuickKeys(t *testing.T) {
	t.Parallel()
	known := jsonFields(reflect.TypeFor[*submitRequest]())
	for _, tc := range []struct {
		in   string
		want bool // quickKeys's answer
	}{
		{`{}`, true},
		{` { } `, true},
		{`{"kind":"a","task":{"x":[1,2,{"y":"}"}]}}`, true},
		{`{"kind":"a","task":"x\"y","priority":"high","worker_ids":["a","b"],"max_retries":3}`, true},
		{"{\n\t\"kind\" : \"a\" ,\r\n \"task\" : null\n}", true},
		{`{"kind":"a","task":1.5e3,"rerun_if_finished":true}`, true},
		{`{"kind":"a","kind":"b"}`, false}, // given twice
		{`{"Kind":"a"}`, false},            // case differs
		{`{"nope":1}`, false},              // unknown
		{`{"k\u0069nd":"a"}`, false},       // escaped key: left to checkKeys
		{`{"kind":"a\u0000"}`, false},      // NUL
		{`{"kind":"a\ud800"}`, false},      // unpaired surrogate
		{"{\"kind\":\"\xff\"}", false},     // not UTF-8
		{`[{"kind":"a"}]`, false},          // not an object
		{`"kind"`, false},
	} {
		got := quickKeys([]byte(tc.in), known)
		if got != tc.want {
			t.Errorf("quickKeys(%s) = %v, want %v", tc.in, got, tc.want)
		}
		if got && json.Valid([]byte(tc.in)) {
			if err := checkKeys([]byte(tc.in), known, ""); err != nil {
				t.Errorf("quickKeys(%s) accepted what checkKeys refuses: %v", tc.in, err)
			}
		}
	}
}

// FuzzQuickKeys: whatever valid JSON quickKeys accepts, checkKeys accepts.
func FuzzQuickKeys(f *testing.F) {
	for _, s := range []string{`{}`, `{"kind":"a","task":{"b":[1,"}"]}}`, `{"kind":"a","kind":"a"}`, `{"task":"\\\""}`} {
		f.Add(s)
	}
	known := jsonFields(reflect.TypeFor[*submitRequest]())
	f.Fuzz(func(t *testing.T, s string) {
		data := []byte(s)
		if !json.Valid(data) || !quickKeys(data, known) {
			return
		}
		if err := checkKeys(data, known, ""); err != nil {
			t.Fatalf("quickKeys(%q) accepted what checkKeys refuses: %v", s, err)
		}
	})
}
