package rotaworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaworker"
)

// fakeServer hands out one run, then answers every heartbeat with 409
// lease_lost, and records the paths it is asked.
type fakeServer struct {
	mu      sync.Mutex
	claimed bool
	paths   []string
	beatAt  []time.Time
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path)
	first := !f.claimed
	f.mu.Unlock()
	switch {
	case r.URL.Path == "/api/workers/claim" && first:
		f.mu.Lock()
		f.claimed = true
		f.mu.Unlock()
		io.WriteString(w, `{"code":0,"message":"ok","data":{"drain":false,"tasks":[{"task_id":"t1","run_id":"r1","kind":"k",
			"priority":"mid","task":{"x":1},"attempt":1,"heartbeat_timeout_seconds":3,"timeout_seconds":0}]}}`)
	case r.URL.Path == "/api/workers/claim":
		select { // an empty long poll
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		io.WriteString(w, `{"code":0,"message":"ok","data":{"drain":false,"tasks":[]}}`)
	case strings.HasSuffix(r.URL.Path, "/heartbeat"):
		f.mu.Lock()
		f.beatAt = append(f.beatAt, time.Now())
		f.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"code":40901,"message":"run r1 is no longer held by this worker: its lease expired","data":null}`)
	default:
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"code":50000,"message":"unexpected","data":null}`)
	}
}

func TestLeaseLost409CancelsWithinOneInterval(t *testing.T) {
	t.Parallel()
	f := &fakeServer{}
	hs := httptest.NewServer(f)
	defer hs.Close()
	w := rotaworker.New(rotaworker.Config{Server: hs.URL, ID: "w", Logger: slog.New(slog.DiscardHandler)})
	type seen struct {
		cause error
		at    time.Time
	}
	out := make(chan seen, 1)
	rotaworker.Handle(w, "k", func(ctx context.Context, task *rotaworker.Task[json.RawMessage]) error {
		<-ctx.Done()
		out <- seen{context.Cause(ctx), time.Now()}
		return ctx.Err()
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	var s seen
	select {
	case s = <-out:
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled")
	}
	var re *rota.Error
	if !errors.Is(s.cause, rota.ErrLeaseLost) || !errors.As(s.cause, &re) || !strings.Contains(re.Message, "lease expired") {
		t.Errorf("cause = %v", s.cause)
	}
	f.mu.Lock()
	first := f.beatAt[0]
	f.mu.Unlock()
	// The first heartbeat comes one interval (1 s) after the claim; its 409
	// cancels at once.
	if d := s.at.Sub(first); d < 0 || d > 300*time.Millisecond {
		t.Errorf("cancelled %v after the 409", d)
	}
	if err := w.StopAndCancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.paths {
		if strings.HasSuffix(p, "/succeed") || strings.HasSuffix(p, "/fail") || strings.HasSuffix(p, "/release") || p == "/api/runs/reports" {
			t.Errorf("a lost run was reported: %s", p)
		}
	}
}

// fakeRota is a fake server for the report protocol: it hands out runs
// r0..r{runs-1} of kind "k" (payload {"i": N}), acknowledges heartbeats, and
// serves both the single-report endpoints and POST /api/runs/reports (the
// contract of docs/api.md), recording every report it is sent.
type fakeRota struct {
	// Set before use.
	runs       int
	noBatch    bool            // answer the batch route 404, as an older server
	leaseLost  map[string]bool // runs whose reports get 40901 lease_lost
	failFirst  int             // answer the first N batch requests 503
	batchDelay time.Duration   // before answering a batch
	gate       chan struct{}   // if set, a batch waits for it to be closed
	batchSeen  chan struct{}   // if set, closed when the first batch arrives
	prefetch   int             // the worker's Config.Prefetch

	mu        sync.Mutex
	handed    int
	maxes     []int // the max of each claim
	batches   []int // the size of each batch request, 503s and 404s included
	singles   int   // single-report requests
	reports   map[string][]fakeReport
	seenBatch bool
}

// fakeReport is one report as the server got it.
type fakeReport struct {
	Outcome string          `json:"outcome"`
	Message string          `json:"message"`
	Result  json.RawMessage `json:"result"`
	Retry   *bool           `json:"retry"`
	Batched bool            `json:"-"`
}

func (f *fakeRota) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ok := func(data string) { io.WriteString(w, `{"code":0,"message":"ok","data":`+data+`}`) }
	fail := func(status, code int, msg, field string) {
		w.WriteHeader(status)
		b, _ := json.Marshal(map[string]any{"code": code, "message": msg, "data": map[string]string{"field": field}})
		w.Write(b)
	}
	path := r.URL.Path
	switch {
	case path == "/api/workers/claim":
		var in struct {
			Max int `json:"max"`
		}
		json.NewDecoder(r.Body).Decode(&in)
		f.mu.Lock()
		f.maxes = append(f.maxes, in.Max)
		var tasks []string
		for ; f.handed < f.runs && len(tasks) < in.Max; f.handed++ {
			tasks = append(tasks, fmt.Sprintf(`{"task_id":"t%[1]d","run_id":"r%[1]d","kind":"k","priority":"mid",
				"task":{"i":%[1]d},"attempt":1,"heartbeat_timeout_seconds":30,"timeout_seconds":0}`, f.handed))
		}
		f.mu.Unlock()
		if len(tasks) == 0 {
			select { // a short empty long poll
			case <-r.Context().Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		ok(`{"drain":false,"tasks":[` + strings.Join(tasks, ",") + `]}`)
	case strings.HasSuffix(path, "/heartbeat"):
		ok(`{"stop":false,"drain":false}`)
	case path == "/api/runs/reports":
		f.serveBatch(w, r, ok, fail)
	case strings.HasPrefix(path, "/api/runs/"):
		parts := strings.Split(strings.TrimPrefix(path, "/api/runs/"), "/")
		var rep fakeReport
		json.NewDecoder(r.Body).Decode(&rep)
		rep.Outcome = parts[1]
		f.mu.Lock()
		f.singles++
		f.mu.Unlock()
		if err := f.apply(parts[0], rep); err != "" {
			fail(http.StatusConflict, 40901, err, "")
			return
		}
		ok(`null`)
	default:
		fail(http.StatusNotFound, 40400, "no route "+r.Method+" "+path, "")
	}
}

func (f *fakeRota) serveBatch(w http.ResponseWriter, r *http.Request, ok func(string), fail func(int, int, string, string)) {
	var in struct {
		WorkerID string `json:"worker_id"`
		Reports  []struct {
			RunID string `json:"run_id"`
			fakeReport
		} `json:"reports"`
	}
	err := json.NewDecoder(r.Body).Decode(&in)
	f.mu.Lock()
	f.batches = append(f.batches, len(in.Reports))
	first := !f.seenBatch
	f.seenBatch = true
	unavailable := len(f.batches) <= f.failFirst
	f.mu.Unlock()
	if first && f.batchSeen != nil {
		close(f.batchSeen)
	}
	if f.gate != nil {
		<-f.gate
	}
	time.Sleep(f.batchDelay)
	switch {
	case f.noBatch:
		fail(http.StatusNotFound, 40400, "no route POST /api/runs/reports", "")
		return
	case unavailable:
		fail(http.StatusServiceUnavailable, 50300, "shutting down", "")
		return
	case err != nil:
		fail(http.StatusBadRequest, 40002, err.Error(), "")
		return
	case in.WorkerID == "":
		fail(http.StatusBadRequest, 40001, "worker_id is required", "worker_id")
		return
	case len(in.Reports) == 0 || len(in.Reports) > 1000:
		fail(http.StatusBadRequest, 40001, "want 1 to 1000 reports", "reports")
		return
	}
	for i, rep := range in.Reports {
		field := ""
		switch {
		case rep.RunID == "":
			field = "run_id"
		case rep.Outcome != "succeed" && rep.Outcome != "fail" && rep.Outcome != "release":
			field = "outcome"
		case rep.Result != nil && rep.Outcome != "succeed":
			field = "result"
		case rep.Retry != nil && rep.Outcome != "fail":
			field = "retry"
		}
		if field != "" {
			field = fmt.Sprintf("reports[%d].%s", i, field)
			fail(http.StatusBadRequest, 40001, "bad "+field, field)
			return
		}
	}
	var results []string
	for _, rep := range in.Reports {
		rep.Batched = true
		if msg := f.apply(rep.RunID, rep.fakeReport); msg != "" {
			results = append(results, fmt.Sprintf(`{"run_id":%q,"error":{"code":40901,"message":%q}}`, rep.RunID, msg))
			continue
		}
		results = append(results, fmt.Sprintf(`{"run_id":%q,"task_id":"t%s","status":"SUCCESS","run_status":"SUCCESS"}`,
			rep.RunID, strings.TrimPrefix(rep.RunID, "r")))
	}
	ok(`{"results":[` + strings.Join(results, ",") + `]}`)
}

// apply records a report; it returns the lease-lost message for a run in
// f.leaseLost.
func (f *fakeRota) apply(runID string, rep fakeReport) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reports == nil {
		f.reports = map[string][]fakeReport{}
	}
	f.reports[runID] = append(f.reports[runID], rep)
	if f.leaseLost[runID] {
		return "run " + runID + " is no longer held by this worker: its lease expired"
	}
	return ""
}

// waitReports waits until n runs have been reported.
func (f *fakeRota) waitReports(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		f.mu.Lock()
		got := len(f.reports)
		f.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs reported, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// start runs a worker against f with concurrency n and the handler, and
// returns it; the cleanup stops it and checks that Run returned nil.
func (f *fakeRota) start(t *testing.T, n int, log *slog.Logger, h rotaworker.HandlerFunc) *rotaworker.Worker {
	t.Helper()
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := rotaworker.New(rotaworker.Config{Server: hs.URL, ID: "w", Concurrency: n, PollWait: time.Second, Logger: log, Prefetch: f.prefetch})
	w.Register("k", h)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		w.StopAndCancel(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return w
}
