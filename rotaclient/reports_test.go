package rotaclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// reportsServer answers every request with status and body and records the
// method, path and body of each.
type reportsServer struct {
	method, path string
	body         []byte
	n            int
}

func newReportsServer(t *testing.T, status int, body string) (*reportsServer, *rotaclient.Client) {
	t.Helper()
	rec := &reportsServer{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.n++
		rec.method, rec.path = r.Method, r.URL.Path
		rec.body, _ = io.ReadAll(r.Body)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(hs.Close)
	c, err := rotaclient.New(rotaclient.Config{BaseURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	return rec, c
}

func TestReportsRequestAndMixedResults(t *testing.T) {
	t.Parallel()
	rec, c := newReportsServer(t, 200, `{"code":0,"message":"ok","data":{"results":[
		{"run_id":"r1","task_id":"t1","status":"SUCCESS","run_status":"SUCCESS"},
		{"run_id":"r2","error":{"code":40901,"message":"run r2 is no longer held by this worker","field":""}},
		{"run_id":"r3","task_id":"t3","status":"SCHEDULED","run_status":"FAILED"},
		{"run_id":"r4","error":{"code":40400,"message":"no run r4"}},
		{"run_id":"r5","task_id":"t5","status":"SCHEDULED","run_status":"CANCELED"}]}}`)
	got, err := c.Reports(context.Background(), "w1", []rotaclient.Report{
		{RunID: "r1", Outcome: rotaclient.OutcomeSucceed, Message: "done", Result: map[string]int{"n": 3}},
		{RunID: "r2", Outcome: rotaclient.OutcomeSucceed, Result: json.RawMessage(`[1,2]`)},
		{RunID: "r3", Outcome: rotaclient.OutcomeFail, Message: "boom"},
		{RunID: "r4", Outcome: rotaclient.OutcomeFail, Message: "fatal", NoRetry: true},
		{RunID: "r5", Outcome: rotaclient.OutcomeRelease, Message: "stopping"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.method != "POST" || rec.path != "/api/runs/reports" {
		t.Errorf("request %s %s", rec.method, rec.path)
	}
	var body any
	if err := json.Unmarshal(rec.body, &body); err != nil {
		t.Fatal(err)
	}
	var wantBody any
	json.Unmarshal([]byte(`{"worker_id":"w1","reports":[
		{"run_id":"r1","outcome":"succeed","message":"done","result":{"n":3}},
		{"run_id":"r2","outcome":"succeed","result":[1,2]},
		{"run_id":"r3","outcome":"fail","message":"boom","retry":true},
		{"run_id":"r4","outcome":"fail","message":"fatal","retry":false},
		{"run_id":"r5","outcome":"release","message":"stopping"}]}`), &wantBody)
	if diff := cmp.Diff(wantBody, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	want := []rotaclient.ReportResult{
		{RunID: "r1", TaskID: "t1", Status: rota.StatusSuccess, RunStatus: rota.StatusSuccess},
		{RunID: "r2", Err: &rota.Error{Code: rota.CodeLeaseLost, Message: "run r2 is no longer held by this worker"}},
		{RunID: "r3", TaskID: "t3", Status: rota.StatusScheduled, RunStatus: rota.StatusFailed},
		{RunID: "r4", Err: &rota.Error{Code: rota.CodeNotFound, Message: "no run r4"}},
		{RunID: "r5", TaskID: "t5", Status: rota.StatusScheduled, RunStatus: rota.StatusCanceled},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b error) bool {
		var ea, eb *rota.Error
		return errors.As(a, &ea) == errors.As(b, &eb) && (ea == nil || *ea == *eb)
	})); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if !errors.Is(got[1].Err, rota.ErrLeaseLost) || !errors.Is(got[3].Err, rota.ErrNotFound) {
		t.Errorf("errors.Is: %v, %v", got[1].Err, got[3].Err)
	}
}

func TestReportsWholeRequestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		want   *rota.Error
		is     error
	}{
		{"invalid item", 400, `{"code":40001,"message":"field \"reports[3].run_id\": required","data":{"field":"reports[3].run_id"}}`,
			&rota.Error{Code: rota.CodeInvalid, Message: `field "reports[3].run_id": required`, Field: "reports[3].run_id"}, rota.ErrInvalid},
		{"unavailable", 503, `{"code":50300,"message":"shutting down","data":null}`,
			&rota.Error{Code: rota.CodeUnavailable, Message: "shutting down"}, rota.ErrUnavailable},
		{"old server", 404, `{"code":40400,"message":"no route POST /api/runs/reports","data":null}`,
			&rota.Error{Code: rota.CodeNotFound, Message: "no route POST /api/runs/reports"}, rota.ErrNotFound},
		{"result count mismatch", 200, `{"code":0,"message":"ok","data":{"results":[]}}`,
			&rota.Error{Code: rota.CodeInternal, Message: "rotaclient: POST /api/runs/reports: 0 results for 1 reports"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, c := newReportsServer(t, tt.status, tt.body)
			res, err := c.Reports(context.Background(), "w", []rotaclient.Report{{RunID: "r", Outcome: rotaclient.OutcomeRelease}})
			var re *rota.Error
			if res != nil || !errors.As(err, &re) {
				t.Fatalf("Reports = %v, %v (%T); want a *rota.Error", res, err, err)
			}
			if diff := cmp.Diff(tt.want, re); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func TestReportsRejectsBadInputLocally(t *testing.T) {
	t.Parallel()
	rec, c := newReportsServer(t, 200, `{"code":0,"message":"ok","data":{"results":[]}}`)
	tests := []struct {
		name    string
		reports []rotaclient.Report
		field   string
	}{
		{"none", nil, "reports"},
		{"too many", make([]rotaclient.Report, rotaclient.MaxReports+1), "reports"},
		{"result with fail", []rotaclient.Report{{RunID: "a", Outcome: rotaclient.OutcomeSucceed},
			{RunID: "b", Outcome: rotaclient.OutcomeFail, Result: 1}}, "reports[1].result"},
		{"no retry with release", []rotaclient.Report{{RunID: "a", Outcome: rotaclient.OutcomeRelease, NoRetry: true}}, "reports[0].retry"},
		{"unencodable result", []rotaclient.Report{{RunID: "a", Outcome: rotaclient.OutcomeSucceed, Result: func() {}}}, "reports[0].result"},
	}
	for _, tt := range tests {
		_, err := c.Reports(context.Background(), "w", tt.reports)
		var re *rota.Error
		if !errors.As(err, &re) || re.Code != rota.CodeInvalid || re.Field != tt.field {
			t.Errorf("%s: err = %v, want invalid %s", tt.name, err, tt.field)
		}
	}
	if rec.n != 0 {
		t.Errorf("%d requests sent for invalid input", rec.n)
	}
}

func TestReportsTransportError(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.NotFoundHandler())
	hs.Close()
	c, _ := rotaclient.New(rotaclient.Config{BaseURL: hs.URL})
	_, err := c.Reports(context.Background(), "w", []rotaclient.Report{{RunID: "r", Outcome: rotaclient.OutcomeSucceed}})
	var re *rota.Error
	if err == nil || errors.As(err, &re) || !strings.Contains(err.Error(), "/api/runs/reports") {
		t.Fatalf("err = %v, want a transport error", err)
	}
}
