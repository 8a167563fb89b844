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

// TestQuickSubmit checks quickSubmit against encoding/json (decodeStrict):
// what it decodes, it decodes to the same request, and it takes the plain
// items of the hot path.
func TestQuickSubmit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want bool // quickSubmit's answer
	}{
		{`{}`, true},
		{`{"kind":"a","task":{"sent_ns":1764000000000000000}}`, true},
		{` {"kind" : "a" , "task" : [1, "x\"y"] } `, true},
		{`{"kind":"a","task":1.5e3,"priority":"high","key":"k","rerun_if_finished":true,"ref":"r"}`, true},
		{`{"kind":"a","task":1,"rerun_if_finished":false}`, true},
		{`{"kind":"a","task":1,"run_at":1764000000,"run_at_ms":-5,"delay_seconds":0}`, true},
		{`{"kind":"a","task":1,"max_retries":3,"timeout_seconds":60,"heartbeat_timeout_seconds":10,"workers":2}`, true},
		{`{"kind":"a","task":null}`, false},
		{`{"kind":"a\u0062","task":1}`, false},
		{`{"kind":null,"task":1}`, false},
		{`{"kind":"a","task":1,"max_retries":1.0}`, false},
		{`{"kind":"a","task":1,"max_retries":1e2}`, false},
		{`{"kind":"a","task":1,"max_retries":"3"}`, false},
		{`{"kind":"a","task":1,"max_retries":99999999999999999999}`, false},
		{`{"kind":"a","task":1,"rerun_if_finished":1}`, false},
		{`{"kind":"a","task":1,"worker_ids":["a"]}`, false},
		{`{"kind":"a","task":1,"depends_on":["a"]}`, false},
		{`{"kind":1,"task":1}`, false},
		{`{"kind":"a","kind":"b"}`, false},
		{`{"kind":"a","task":1,"task":2}`, false},
		{`{"kind":"a","task":1,"workers":1,"workers":1}`, false},
		{`{"kind":"é","task":"ü","ref":"r"}`, true},
		{"{\"kind\":\"\xff\",\"task\":1}", false}, // not UTF-8
		{"{\"kind\":\"a\",\"task\":\"\xff\"}", false},
		{`{"kind":"a","task":"\u0000"}`, false}, // NUL: checkText refuses
		{`{"kind":"a","task":"\ud800"}`, false}, // unpaired surrogate
		{`{"kind":"a","task":1,"run_at_ms":123456789012345678}`, true},
		{`{"kind":"a","task":1,"workers":-0}`, true},
		{`{"Kind":"a"}`, false},
		{`{"nope":1}`, false},
		{`[1]`, false},
		{`5`, false},
	} {
		var quick submitRequest
		got := quickSubmit([]byte(tc.in), &quick)
		if got != tc.want {
			t.Errorf("quickSubmit(%s) = %v, want %v", tc.in, got, tc.want)
		}
		if !got {
			var z submitRequest
			if z.quickDecode([]byte(tc.in)) || !reflect.DeepEqual(z, submitRequest{}) {
				t.Errorf("quickDecode(%s) left %+v, want it untouched", tc.in, z)
			}
			continue
		}
		var slow submitRequest
		if err := decodeStrict([]byte(tc.in), &slow, ""); err != nil {
			t.Errorf("quickSubmit(%s) took what decodeStrict refuses: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(quick, slow) {
			t.Errorf("quickSubmit(%s) = %+v, decodeStrict %+v", tc.in, quick, slow)
		}
	}
}

// FuzzQuickSubmit checks quickSubmit against decodeStrict on any JSON.
func FuzzQuickSubmit(f *testing.F) {
	f.Add(`{"kind":"a","task":{"x":1},"priority":"low","max_retries":3,"run_at":-1,"rerun_if_finished":true}`)
	f.Add(`{"kind":"a","task":"\u00e9","workers":0,"key":"é"}`)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		var quick submitRequest
		if !quickSubmit([]byte(in), &quick) {
			return
		}
		var slow submitRequest
		if err := decodeStrict([]byte(in), &slow, ""); err != nil {
			t.Fatalf("quickSubmit(%s) took what decodeStrict refuses: %v", in, err)
		}
		if !reflect.DeepEqual(quick, slow) {
			t.Fatalf("quickSubmit(%s) = %+v, decodeStrict %+v", in, quick, slow)
		}
	})
}
