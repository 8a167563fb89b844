package httpapi

import (
	"bytes"
	"fmt"
	"testing"
)

func BenchmarkDecodeSubmit(b *testing.B) {
	data := []byte(`{"kind":"email","priority":"high","task":{"to":"a@b.c","body":"hello there"},"key":"k1","max_retries":2,"worker_ids":["a","b"]}`)
	b.ReportAllocs()
	for b.Loop() {
		var req submitRequest
		if err := decodeStrict(data, &req, ""); err != nil {
			b.Fatal(err)
		}
		if _, err := req.check(1<<20, "", fuzzNow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchSubmitValidate decodes and checks a batch of 1,000 small
// tasks, as POST /api/tasks/batch does before the store (issue 13: it
// allocated ~7 KB per task).
func BenchmarkBatchSubmitValidate(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"tasks":[`)
	for i := range 1000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"kind":"bench-e2e-1-1764000000000000000","task":{"s":%d}}`, 1764000000000000000+i)
	}
	buf.WriteString(`]}`)
	data := buf.Bytes()
	a := &API{maxPayload: 1 << 20}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var req batchRequest
		if err := decodeStrict(data, &req, ""); err != nil {
			b.Fatal(err)
		}
		if err := req.checkItems(a, fuzzNow); err != nil {
			b.Fatal(err)
		}
	}
}
