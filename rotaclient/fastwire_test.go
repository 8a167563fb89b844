package rotaclient

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/rotaapi"
)

func claimBody(t testing.TB, n int) []byte {
	data := rotaapi.ClaimResponse{Tasks: []rotaapi.ClaimedRun{}, ServerTimeMs: 1795872706293}
	for i := range n {
		data.Tasks = append(data.Tasks, rotaapi.ClaimedRun{
			TaskID: "t_0123456789abcdef", RunID: "r_0123456789abcdef", Kind: "noop", Priority: "normal",
			Task: json.RawMessage(`{"d":0,"s":"x\"y"}`), Attempt: i + 1, HeartbeatTimeoutSeconds: 30,
			LeaseExpiresAt: 1795872736, StartedAt: 1795872706, StartedAtMs: 1795872706293 + int64(i),
		})
	}
	if n > 1 {
		data.Tasks[1].Task = json.RawMessage("null")
		data.Tasks[1].ScheduleID, data.Tasks[1].FireTime, data.Tasks[1].StartedAtMs = "s_1", 1795872000, 0
	}
	b, err := json.Marshal(rotaapi.Envelope[any]{Message: "ok", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func claimSlow(t testing.TB, raw []byte) ClaimResult {
	var out claimResponseIn
	if err := decodeResponse("POST", "/api/workers/claim", 200, raw, &out); err != nil {
		t.Fatal(err)
	}
	res := ClaimResult{Drain: out.Drain}
	if out.ServerTimeMs > 0 {
		res.ServerTime = time.UnixMilli(out.ServerTimeMs).UTC()
	}
	for i := range out.Tasks {
		res.Runs = append(res.Runs, out.Tasks[i].claimed())
	}
	return res
}

// TestClaimDecodeFast: a plain claim's answer reads as encoding/json reads
// it; anything else is left to encoding/json.
func TestClaimDecodeFast(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		raw := claimBody(t, n)
		fast, ok := decodeClaimFast(raw)
		if !ok {
			t.Fatalf("%d runs: refused %s", n, raw)
		}
		if slow := claimSlow(t, raw); !reflect.DeepEqual(fast, slow) {
			t.Errorf("%d runs:\nfast %+v\nslow %+v", n, fast, slow)
		}
	}
	raw := string(claimBody(t, 1))
	for _, bad := range []string{
		strings.Replace(raw, `"code":0`, `"code":40401`, 1),
		strings.Replace(raw, `"kind":"noop"`, `"kind":"no\u006fp"`, 1),
		strings.Replace(raw, `"kind":"noop"`, `"Kind":"noop"`, 1),
		strings.Replace(raw, `"attempt":1`, `"attempt":1.0`, 1),
		strings.Replace(raw, `"attempt":1`, `"attempt":null`, 1),
		strings.Replace(raw, `"lease_expires_at":1795872736`, `"lease_expires_at":1795872736.5`, 1),
		strings.Replace(raw, `"task":{"d":0,"s":"x\"y"}`, `"task":{"d":}`, 1),
		strings.Replace(raw, `"drain":false`, `"drain":false,"extra":1`, 1),
		raw + "x",
		`{"code":0,"message":"ok"}`,
		`<html>`,
	} {
		if _, ok := decodeClaimFast([]byte(bad)); ok {
			t.Errorf("took %s", bad)
		}
	}
}

// TestReportsFast: the hand-written batch reads as the encoded
// rotaapi.ReportsRequest, and a plain answer as encoding/json reads it.
func TestReportsFast(t *testing.T) {
	reports := []Report{
		{RunID: "r1", Outcome: OutcomeSucceed},
		{RunID: "r2", Outcome: OutcomeFail, Message: `boom "<é>"`, NoRetry: true},
		{RunID: "r3", Outcome: OutcomeFail},
		{RunID: "r4", Outcome: OutcomeRelease, Message: "bye"},
		{RunID: "r5", Outcome: OutcomeSucceed, Result: map[string]int{"a": 1}},
	}
	body, err := reportsBody("w<1>", reports)
	if err != nil {
		t.Fatal(err)
	}
	in := rotaapi.ReportsRequest{WorkerID: "w<1>"}
	for i, r := range reports {
		raw, err := reportItem(i, r)
		if err != nil {
			t.Fatal(err)
		}
		in.Reports = append(in.Reports, raw)
	}
	want, _ := json.Marshal(in)
	var got, wantV any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	_ = json.Unmarshal(want, &wantV)
	if !reflect.DeepEqual(got, wantV) {
		t.Errorf("got %s\nwant %s", body, want)
	}
	if _, err := reportsBody("w", []Report{{RunID: "r", Outcome: OutcomeSucceed, NoRetry: true}}); err == nil {
		t.Error("NoRetry on succeed: no error")
	}

	resp := rotaapi.ReportsResponse{Results: []rotaapi.ReportResult{
		{RunID: "r1", TaskID: "t1", Status: "SUCCESS", RunStatus: "SUCCESS"},
		{RunID: "r2", TaskID: "t2", Status: "WAITING", RunStatus: "FAILED"},
	}}
	raw, _ := json.Marshal(rotaapi.Envelope[any]{Message: "ok", Data: resp})
	fast, ok := decodeReportsFast(raw, nil)
	if !ok || !reflect.DeepEqual(fast, resp.Results) {
		t.Errorf("decodeReportsFast = %+v, %v; want %+v", fast, ok, resp.Results)
	}
	resp.Results[1].Error = &rotaapi.ReportError{Code: 40901, Message: "lost"}
	raw, _ = json.Marshal(rotaapi.Envelope[any]{Message: "ok", Data: resp})
	if _, ok := decodeReportsFast(raw, nil); ok {
		t.Error("decodeReportsFast took a result with an error")
	}
}

func BenchmarkClaimDecode(b *testing.B) {
	raw := claimBody(b, 256)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeClaimFast(raw); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			claimSlow(b, bytes.Clone(raw))
		}
	})
}
