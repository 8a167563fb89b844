package rotaclient

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// TestAppendSubmitMatches: a batch item is written byte for byte as
// json.Marshal writes it (strings without HTML characters), a raw payload
// compacted, and a payload that is not JSON refused with json.Marshal's
// error.
func TestAppendSubmitMatches(t *testing.T) {
	t.Parallel()
	for _, p := range []TaskParams{
		{Kind: "k", Payload: map[string]any{"a": 1}},
		{Kind: "k"},
		{Kind: "k", Payload: json.RawMessage("{ \"a\" : [1, \"x y\"] ,\n\"b\":null}")},
		{Kind: "k\"é\u2028", Priority: rota.PriorityHigh, Payload: "s", Key: "key", RerunIfFinished: true,
			RunAt: time.UnixMilli(1764000000123), MaxRetries: new(0), TimeoutSeconds: 60, HeartbeatTimeoutSeconds: 9,
			Workers: 2, WorkerIDs: []string{"w1", "w2"}, DependsOn: []string{"ref:a"}, Ref: "b"},
		{Kind: "k", Delay: 1500 * time.Millisecond, Payload: []int{1, 2}},
	} {
		w, compact, err := p.wireCompact()
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendSubmit(nil, &w, compact)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("appendSubmit(%+v):\n got %s\nwant %s", p, got, want)
		}
	}
	bad := TaskParams{Kind: "k", Payload: json.RawMessage(`{"a":`)}
	w, compact, err := bad.wireCompact()
	if err != nil {
		t.Fatal(err)
	}
	_, want := json.Marshal(w)
	if _, err := appendSubmit(nil, &w, compact); err == nil || want == nil || err.Error() != want.Error() {
		t.Errorf("appendSubmit of a payload that is not JSON: %v, want %v", err, want)
	}
}

// TestBatchDecodeFast: a plain answer reads as decodeResponse reads it;
// anything else is left to decodeResponse.
func TestBatchDecodeFast(t *testing.T) {
	t.Parallel()
	plain := `{"code":0,"message":"ok","data":{"results":[{"task_id":"t1","existing":false,"rerun":false},` +
		`{"task_id":"t2","existing":true,"rerun":true},{"task_id":"t3"}]}}` + "\n"
	got, ok := decodeBatchFast([]byte(plain))
	if !ok {
		t.Fatal("decodeBatchFast refused a plain answer")
	}
	var want rotaapi.BatchSubmitResponse
	if err := decodeResponse(http.MethodPost, "/api/tasks/batch", 200, []byte(plain), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want.Results) {
		t.Errorf("decodeBatchFast = %+v, decodeResponse %+v", got, want.Results)
	}
	for _, in := range []string{
		`{"code":0,"message":"ok","data":{"results":null}}`,
		`{"code":0,"message":"ok","data":{}}`,
		`{"code":0,"message":"ok","data":{"results":[{"task_id":"t1","task_id":"t2"}]}}`,
		`{"code":0,"message":"ok","data":{"results":[{"task_id":"t\u0031"}]}}`,
		`{"code":0,"message":"ok","data":{"results":[{"Task_ID":"t1"}]}}`,
		`{"code":40001,"message":"bad","data":{"field":"tasks[0].kind"}}`,
	} {
		if _, ok := decodeBatchFast([]byte(in)); ok {
			t.Errorf("decodeBatchFast took %s, which decodeResponse should read", in)
		}
	}
}
