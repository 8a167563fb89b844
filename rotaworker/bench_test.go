package rotaworker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	<-finished
	// Stop waits for the last reports: they are part of a task's cost.
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
