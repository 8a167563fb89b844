package httpapi

import "testing"

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
