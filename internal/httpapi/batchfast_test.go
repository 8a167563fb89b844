package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/rotahq/rota"
)

// batchBoth reads a batch body as the route does (decodeFast, else the
// strict decoder) and as the strict decoder alone does, and checks both.
func batchBoth(t testing.TB, body string) (fast, slow *batchRequest, fastErr, slowErr error, tookFast bool) {
	a := &API{maxPayload: 1 << 20}
	fast, slow = &batchRequest{}, &batchRequest{}
	tookFast = fast.decodeFast([]byte(body))
	if !tookFast {
		fast = &batchRequest{}
		fastErr = decodeStrict([]byte(body), fast, "")
	}
	if fastErr == nil {
		fastErr = fast.checkItems(a, fuzzNow)
	}
	slowErr = decodeStrict([]byte(body), slow, "")
	if slowErr == nil {
		slowErr = slow.checkItems(a, fuzzNow)
	}
	return fast, slow, fastErr, slowErr, tookFast
}

// errField is the field an error names ("" for none, or no error).
func errField(err error) string {
	var re *rota.Error
	if errors.As(err, &re) {
		return re.Field
	}
	return ""
}

// TestBatchDecodeFast: a plain batch reads in one pass to the inserts the
// strict decoder gives; any other body, or an item that fails its checks,
// gives the strict decoder's error, naming the item.
func TestBatchDecodeFast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		fast     bool   // decodeFast takes it
		errField string // the field the error names, "" for none
	}{
		{`{"tasks":[{"kind":"a","task":{"x":1}},{"kind":"a","task":[1,"y"],"priority":"low"}]}`, true, ""},
		{" {\n\"tasks\" : [ {\"kind\":\"a\",\"task\":1} , {\"kind\":\"b\",\"task\":2,\"ref\":\"r\",\"max_retries\":3} ] } ", true, ""},
		{`{"tasks":[{"kind":"a","task":1,"priority":"high","key":"k","delay_seconds":5,"workers":2,"timeout_seconds":9}]}`, true, ""},
		{`{"tasks":[{"kind":"a","task":"ü","ref":"é"}]}`, true, ""},
		{`{"tasks":[]}`, true, "tasks"},
		{`{}`, false, "tasks"},
		{`{"tasks":null}`, false, "tasks"},
		{`{"tasks":[{"kind":"a","task":1}],"tasks":[]}`, false, "tasks"},
		{`{"tasks":[{"kind":"a","task":1}],"nope":1}`, false, "nope"},
		{`{"tasks":[{"kind":"a","task":1}]} x`, false, ""},
		{`{"tasks":[{"kind":"a","task":1},]}`, false, ""},
		{`{"tasks":[{"kind":"a","task":1}]`, false, ""},
		{`{"tasks":[1]}`, false, "tasks[0]"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"a","task":1,"nope":2}]}`, false, "tasks[1].nope"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"a","task":1,"kind":"b"}]}`, false, "tasks[1].kind"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":7,"task":1}]}`, false, "tasks[1].kind"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"a","task":null}]}`, false, "tasks[1].task"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"a","task":"\u0000"}]}`, false, "tasks[1].task"},
		{"{\"tasks\":[{\"kind\":\"a\",\"task\":\"\xff\"}]}", false, "tasks[0].task"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"a","task":1,"worker_ids":["w"]}]}`, false, ""},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"","task":1}]}`, true, "tasks[1].kind"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"a","task":1,"priority":"urgent"}]}`, true, "tasks[1].priority"},
		{`{"tasks":[{"kind":"a","task":1},{"kind":"a","task":1,"workers":0}]}`, true, "tasks[1].workers"},
		{`{"tasks":[{"kind":"a","task":1,"ref":"r"},{"kind":"a","task":1,"ref":"r"}]}`, true, "tasks[1].ref"},
		{`{"tasks":[{"kind":"a","task":{"x":[1,2}}]}`, false, ""},
	} {
		fast, slow, fastErr, slowErr, took := batchBoth(t, tc.in)
		if took != tc.fast {
			t.Errorf("%s: decodeFast took it: %v, want %v", tc.in, took, tc.fast)
		}
		if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) {
			t.Errorf("%s: error %v, the strict decoder's %v", tc.in, fastErr, slowErr)
			continue
		}
		if field := errField(fastErr); field != tc.errField {
			t.Errorf("%s: error %v names %q, want %q", tc.in, fastErr, field, tc.errField)
		}
		if fastErr == nil && !reflect.DeepEqual(fast.params, slow.params) {
			t.Errorf("%s: inserts %+v, the strict decoder's %+v", tc.in, fast.params, slow.params)
		}
	}
}

// FuzzBatchDecodeFast: whatever the body, the route's way and the strict
// decoder's give the same error or the same inserts.
func FuzzBatchDecodeFast(f *testing.F) {
	f.Add(`{"tasks":[{"kind":"a","task":{"x":1}},{"kind":"a","task":[1,"y"],"priority":"low","ref":"r"}]}`)
	f.Add(`{"tasks":[{"kind":"a","task":1,"delay_seconds":5,"key":"k","rerun_if_finished":true}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		fast, slow, fastErr, slowErr, _ := batchBoth(t, in)
		if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) {
			t.Fatalf("%q: error %v, the strict decoder's %v", in, fastErr, slowErr)
		}
		if fastErr == nil && !reflect.DeepEqual(fast.params, slow.params) {
			t.Fatalf("%q: inserts %+v, the strict decoder's %+v", in, fast.params, slow.params)
		}
	})
}

// BenchmarkBatchSubmitDecode reads and checks a batch of 100 small tasks
// as the route does (fast: decodeFast) and as the strict decoder alone
// does (strict, the way before decodeFast).
func BenchmarkBatchSubmitDecode(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"tasks":[`)
	for i := range 100 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"kind":"peers-noop","task":{"sent_ns":%d}}`, 1764000000000000000+i)
	}
	buf.WriteString(`]}`)
	data := buf.Bytes()
	a := &API{maxPayload: 1 << 20}
	for _, fast := range []bool{true, false} {
		b.Run(map[bool]string{true: "fast", false: "strict"}[fast], func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var req batchRequest
				if !fast || !req.decodeFast(data) {
					if fast {
						b.Fatal("decodeFast refused the batch")
					}
					if err := decodeStrict(data, &req, ""); err != nil {
						b.Fatal(err)
					}
				}
				if err := req.checkItems(a, fuzzNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReadAll: the body is read whole whatever the announced length
// (exact, short, unknown), as io.ReadAll reads it.
func TestReadAll(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789"), 1000)
	for _, size := range []int64{int64(len(body)), 10, -1, 0} {
		got, err := readAll(iotest.OneByteReader(bytes.NewReader(body)), size)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("readAll(size %d) = %d bytes, %v; want the %d bytes", size, len(got), err, len(body))
		}
	}
	if _, err := readAll(iotest.ErrReader(errors.New("boom")), 10); err == nil || err.Error() != "boom" {
		t.Errorf("readAll of a failing reader: %v, want its error", err)
	}
}
