package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/rotahq/rota/rotaapi"
)

func claimSample(n int) *rotaapi.ClaimResponse {
	out := &rotaapi.ClaimResponse{Tasks: []rotaapi.ClaimedRun{}, ServerTimeMs: 1795872706293}
	for i := range n {
		out.Tasks = append(out.Tasks, rotaapi.ClaimedRun{
			TaskID: "t_0123456789abcdef", RunID: "r_0123456789abcdef", Kind: "noop", Priority: "normal",
			Task: json.RawMessage(`{"d": 0, "s": 1795872706293791649}`), Attempt: i + 1, HeartbeatTimeoutSeconds: 30,
			LeaseExpiresAt: 1795872736, StartedAt: 1795872706, StartedAtMs: 1795872706293,
		})
	}
	return out
}

func stdEnvelope(t testing.TB, data any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(envelope{Code: 0, Message: "ok", Data: data}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFastEncodeMatches: the hand-written answers are byte for byte what
// encoding/json writes.
func TestFastEncodeMatches(t *testing.T) {
	odd := claimSample(3)
	odd.Tasks[1].Kind = "k<é>\"\\\n\u2028&"
	odd.Tasks[1].Task = json.RawMessage("[1, \"a  b\",\n {\"x\": null}]")
	odd.Tasks[2].Task = nil
	odd.Tasks[2].ScheduleID, odd.Tasks[2].FireTime = "s_1", 1795872000
	odd.Drain = true
	for name, data := range map[string]any{
		"claim":      claimSample(2),
		"claim odd":  odd,
		"claim none": &rotaapi.ClaimResponse{Tasks: []rotaapi.ClaimedRun{}},
		"claim nil":  &rotaapi.ClaimResponse{},
		"reports": &rotaapi.ReportsResponse{Results: []rotaapi.ReportResult{
			{RunID: "r1", TaskID: "t1", Status: "SUCCESS", RunStatus: "SUCCESS"},
			{RunID: "r2", Error: &rotaapi.ReportError{Code: 40901, Message: `lease "lost" <x>`}},
			{RunID: "r3", Error: &rotaapi.ReportError{Code: 40001, Message: "bad", Field: "reports[2].run_id"}},
		}},
		"reports nil": &rotaapi.ReportsResponse{},
		"batch": &rotaapi.BatchSubmitResponse{Results: []rotaapi.SubmitResult{
			{TaskID: "0123456789abcdef0123456789abcdef"}, {TaskID: "t<2>", Existing: true}, {TaskID: "t3", Existing: true, Rerun: true},
		}},
		"batch none": &rotaapi.BatchSubmitResponse{Results: []rotaapi.SubmitResult{}},
		"batch nil":  &rotaapi.BatchSubmitResponse{},
	} {
		var buf bytes.Buffer
		if !encodeFast(&buf, data) {
			t.Fatalf("%s: encodeFast did not encode it", name)
		}
		if want := stdEnvelope(t, data); !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s:\n got %s\nwant %s", name, buf.Bytes(), want)
		}
	}
}

// TestReportsDecodeFast: a plain batch reads as the strict decoder reads
// it; anything else is left to the strict decoder.
func TestReportsDecodeFast(t *testing.T) {
	plain := `{"worker_id":"w1","reports":[{"run_id":"r1","outcome":"succeed","result":{"a": [1,"x"]}},` +
		` {"run_id":"r2","outcome":"fail","message":"é boom","retry":false}, {"outcome":"release","run_id":"r3"},` +
		`{"run_id":"r4","outcome":"succeed","result":null}]}`
	var fast reportsRequest
	if !fast.decodeFast([]byte(plain)) {
		t.Fatal("decodeFast refused a plain batch")
	}
	var slow reportsRequest
	if err := decodeStrict([]byte(plain), &slow, ""); err != nil {
		t.Fatal(err)
	}
	if fast.WorkerID != slow.WorkerID || len(fast.items) != len(slow.Reports) {
		t.Fatalf("fast %+v, slow %+v", fast, slow)
	}
	for i, raw := range slow.Reports {
		var it rotaapi.ReportItem
		if err := decodeStrict(raw, &it, ""); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast.items[i], it) {
			t.Errorf("reports[%d]: fast %+v, slow %+v", i, fast.items[i], it)
		}
	}
	for _, body := range []string{
		`{"worker_id":"w\u0031","reports":[]}`,
		`{"worker_id":"w1","reports":[{"run_id":"r1","outcome":"succeed","bogus":1}]}`,
		`{"worker_id":"w1","reports":[{"run_id":"r1","run_id":"r2","outcome":"succeed"}]}`,
		`{"worker_id":"w1","worker_id":"w2","reports":[]}`,
		`{"worker_id":"w1","reports":[{"run_id":null,"outcome":"succeed"}]}`,
		`{"worker_id":"w1","reports":[{"run_id":"r1","outcome":"succeed","result":"\u0000"}]}`,
		`{"worker_id":"w1","reports":[{"run_id":"r1","outcome":"succeed","result":{"a":}}]}`,
		`{"worker_id":"w1","reports":[{"run_id":"r1","outcome":"fail","retry":1}]}`,
		`{"worker_id":"w1","reports":[1]}`,
		`{"worker_id":"w1","reports":{}}`,
		`{"Worker_ID":"w1","reports":[]}`,
		`{"worker_id":"w1","reports":[]} x`,
		`{"worker_id":"w1","reports":[],}`,
		"{\"worker_id\":\"w\xff\",\"reports\":[]}",
	} {
		var r reportsRequest
		if r.decodeFast([]byte(body)) {
			t.Errorf("decodeFast took %s", body)
		}
	}
}

func BenchmarkClaimEncode(b *testing.B) {
	data := claimSample(256)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf bytes.Buffer
			if !encodeFast(&buf, data) {
				b.Fatal("encodeFast did not encode it")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			stdEnvelope(b, data)
		}
	})
}

func reportsSample(n int) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"worker_id":"bench-worker-1","reports":[`)
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"run_id":"r_0123456789abcdef","outcome":"succeed"}`)
	}
	buf.WriteString("]}")
	return buf.Bytes()
}

func BenchmarkReportsDecode(b *testing.B) {
	body := reportsSample(256)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r reportsRequest
			if !r.decodeFast(body) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r reportsRequest
			if err := decodeStrict(body, &r, ""); err != nil {
				b.Fatal(err)
			}
			for _, raw := range r.Reports {
				var it rotaapi.ReportItem
				if err := decodeKnown(raw, &it, "x", jsonFields(reflect.TypeFor[*rotaapi.ReportItem]())); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestSingleReportDecodeFast: a plain succeed or fail body reads as the
// strict decoder reads it; anything else is left to it.
func TestSingleReportDecodeFast(t *testing.T) {
	for _, body := range []string{`{"worker_id":"w1"}`, `{"worker_id":"w1","message":"m","result":{"a": 1}}`, `{"result":null,"worker_id":"w"}`} {
		var fast, slow succeedRequest
		if !fast.decodeFast([]byte(body)) {
			t.Fatalf("refused %s", body)
		}
		if err := decodeStrict([]byte(body), &slow, ""); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: fast %+v, slow %+v", body, fast, slow)
		}
	}
	for _, body := range []string{`{"worker_id":"w1","retry":false}`, `{"message":"m","retry":true,"worker_id":"w"}`} {
		var fast, slow failRequest
		if !fast.decodeFast([]byte(body)) {
			t.Fatalf("refused %s", body)
		}
		if err := decodeStrict([]byte(body), &slow, ""); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: fast %+v, slow %+v", body, fast, slow)
		}
	}
	for _, body := range []string{`{"worker_id":"w1","retry":false}`, `{"worker_id":"w1","worker_id":"w2"}`, `{"worker_id":"w\u0031"}`, `{"worker_id":null}`, `[]`, `{"worker_id":"w1","result":"\u0000"}`} {
		var s succeedRequest
		if s.decodeFast([]byte(body)) {
			t.Errorf("succeed took %s", body)
		}
	}
	var f failRequest
	if f.decodeFast([]byte(`{"worker_id":"w1","result":1}`)) {
		t.Error("fail took a result")
	}
}
