package rotaworker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotatest"
	"github.com/rotahq/rota/rotaworker"
)

// benchPayload is the payload of rota bench's e2e tasks.
type benchPayload struct {
	SentNS int64 `json:"s"`
}

// BenchmarkRunNoop measures a no-op task end to end through the SDK worker
// against a real in-process server (an embedded store without fsync): one
// op is one task claimed, run and reported. The server's cost is in the
// figures too (the SDK's share shows in a -cpuprofile); cpu-ns/op is the
// process's CPU time per task, which a shared machine does not inflate as
// it does ns/op. The tasks are submitted before the timer starts.
func BenchmarkRunNoop(b *testing.B) {
	for _, conc := range []int{16, 256} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) { benchRunNoop(b, conc) })
	}
}

func benchRunNoop(b *testing.B, conc int) {
	srv := rotatest.NewServer(b)
	ctx := context.Background()
	kind := "noop"
	submitAll(b, srv.Client, kind, b.N)

	var done atomic.Int64
	finished := make(chan struct{})
	n := int64(b.N)
	w := rotaworker.New(rotaworker.Config{
		Client: srv.Client, ID: "bench", Concurrency: conc, PollWait: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	rotaworker.Handle(w, kind, func(ctx context.Context, t *rotaworker.Task[benchPayload]) error {
		if done.Add(1) == n {
			close(finished)
		}
		return nil
	})
	runTimed(b, ctx, w, finished, &done, n)
}

// runTimed runs w with the timer on until until is closed, then stops it
// (Stop waits for the last reports: they are part of a task's cost),
// reports the process's CPU time per op, and checks that the handler ran
// n times (*done).
func runTimed(b *testing.B, ctx context.Context, w *rotaworker.Worker, until <-chan struct{}, done *atomic.Int64, n int64) {
	b.Helper()
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	<-until
	if err := w.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	if got := done.Load(); got != n {
		b.Fatalf("%d handler calls for %d tasks", got, n)
	}
}

// submitAll submits n tasks of kind in batches.
func submitAll(b *testing.B, c *rotaclient.Client, kind string, n int) {
	b.Helper()
	const batch = 500
	ps := make([]rotaclient.TaskParams, 0, batch)
	for i := 0; i < n; i += batch {
		ps = ps[:0]
		for j := i; j < min(i+batch, n); j++ {
			ps = append(ps, rotaclient.TaskParams{Kind: kind, Payload: benchPayload{SentNS: int64(j)}})
		}
		if _, err := c.SubmitBatch(context.Background(), ps); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRunNoopFakeServer is BenchmarkRunNoop against a server that
// only hands out canned runs and acknowledges reports: what is left of a
// task's cost is mostly the SDK's (and HTTP's, both ends).
func BenchmarkRunNoopFakeServer(b *testing.B) {
	for _, conc := range []int{16, 256} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) { benchRunNoopFake(b, conc) })
	}
}

func benchRunNoopFake(b *testing.B, conc int) {
	f := &cannedServer{left: b.N}
	hs := httptest.NewServer(f)
	b.Cleanup(hs.Close)
	ctx := context.Background()
	var done atomic.Int64
	n := int64(b.N)
	w := rotaworker.New(rotaworker.Config{
		Server: hs.URL, ID: "bench", Concurrency: conc, PollWait: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	rotaworker.Handle(w, "noop", func(ctx context.Context, t *rotaworker.Task[benchPayload]) error {
		done.Add(1)
		return nil
	})
	runTimed(b, ctx, w, f.allReported(n), &done, n)
}

// cannedServer hands out left runs of kind noop in answer to claims (an
// empty claim waits until its request ends) and acknowledges reports.
type cannedServer struct {
	mu       sync.Mutex
	left     int // runs still to hand out
	next     int // the next run's number
	reported int64
	want     int64
	all      chan struct{} // closed when want reports came
}

func (f *cannedServer) allReported(n int64) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.want, f.all = n, make(chan struct{})
	if f.reported >= n {
		close(f.all)
	}
	return f.all
}

func (f *cannedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/workers/claim":
		f.claim(w, r)
	case "/api/runs/reports":
		f.reports(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"code":40400,"message":"not found","data":null}`)
	}
}

func (f *cannedServer) claim(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Max int `json:"max"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	k := min(in.Max, f.left)
	f.left -= k
	first := f.next
	f.next += k
	f.mu.Unlock()
	if k == 0 {
		<-r.Context().Done() // a long poll that ends with the worker's stop
		return
	}
	now := time.Now().UnixMilli()
	buf := []byte(`{"code":0,"message":"ok","data":{"tasks":[`)
	for i := first; i < first+k; i++ {
		if i > first {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `{"task_id":"t%d","run_id":"r%d","kind":"noop","priority":"mid","task":{"s":%d},"attempt":1,`+
			`"heartbeat_timeout_seconds":30,"timeout_seconds":0,"lease_expires_at":%d,"started_at":%d,"started_at_ms":%d,"schedule_id":"","fire_time":0}`,
			i, i, i, now/1000+30, now/1000, now)
	}
	buf = fmt.Appendf(buf, `],"drain":false,"server_time_ms":%d}}`, now)
	w.Write(buf)
}

func (f *cannedServer) reports(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Reports []struct {
			RunID string `json:"run_id"`
		} `json:"reports"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	buf := []byte(`{"code":0,"message":"ok","data":{"results":[`)
	for i, rep := range in.Reports {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `{"run_id":%q,"task_id":"t%s","status":"SUCCESS","run_status":"SUCCESS"}`, rep.RunID, rep.RunID[1:])
	}
	buf = append(buf, "]}}"...)
	w.Write(buf)
	f.mu.Lock()
	f.reported += int64(len(in.Reports))
	if f.all != nil && f.reported >= f.want {
		select {
		case <-f.all:
		default:
			close(f.all)
		}
	}
	f.mu.Unlock()
}
