package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// rotaKind is the kind of every benchmark task (each run has its own schema).
const rotaKind = "peers-noop"

// payload carries the submit instant (and the due instant of a delayed
// task) so the handler can measure the wait, as in Rota's own bench.
type payload struct {
	SentNS int64 `json:"s"`
	DueNS  int64 `json:"d,omitempty"`
	Warmup bool  `json:"w,omitempty"` // sent before the measure (--latency-warmup)
}

// rotaServer is a `rota server` process on a fresh schema.
type rotaServer struct {
	cmd  *exec.Cmd
	url  string
	data string
	done chan error
}

// startRota starts bin as a server on a free port and waits until it is
// ready.
func startRota(ctx context.Context, bin, pgURL, schema string) (*rotaServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	data, err := os.MkdirTemp("", "rota-peers-data")
	if err != nil {
		return nil, err
	}
	args := []string{"server", "--listen", addr, "--data", data, "--log-level", "warn"}
	if strings.HasPrefix(pgURL, "redis://") {
		args = append(args, "--store", pgURL)
	} else if pgURL != "" {
		args = append(args, "--store", pgURL, "--pg-schema", schema)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	s := &rotaServer{cmd: cmd, url: "http://" + addr, data: data, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/api/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			s.stop()
			return nil, fmt.Errorf("rota server exited before it was ready: %v", err)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("rota server not ready within 30 s")
		}
	}
}

func (s *rotaServer) pid() int { return s.cmd.Process.Pid }

// stop stops the server gracefully (SIGTERM), killing it after 30 s.
func (s *rotaServer) stop() {
	defer os.RemoveAll(s.data)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// withAppName sets application_name in a PostgreSQL URL.
func withAppName(pg, app string) (string, error) {
	u, err := url.Parse(pg)
	if err != nil {
		return "", fmt.Errorf("postgres URL: %w", err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// runRota runs one case on a fresh rota server and schema (system
// rota-sqlite: a fresh data directory of the embedded store, full
// durability).
func runRota(ctx context.Context, bin string, spec caseSpec, admin *pgxpool.Pool, perfDir string, run int) (res caseResult, err error) {
	pgURL := ""
	backends := func() []int { return nil }
	if spec.System == "rota" {
		if pgURL, err = withAppName(spec.P.PG, spec.AppName); err != nil {
			return res, err
		}
		defer func() {
			_, derr := admin.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{spec.Schema}.Sanitize()+` CASCADE`)
			err = errors.Join(err, derr)
		}()
		backends = func() []int { return backendPIDs(ctx, admin, spec.AppName) }
	}
	if spec.System == "rota-redis" {
		pgURL = "redis://" + spec.Redis + "/0"
		backends = func() []int { return []int{spec.RedisPID} }
	}
	srv, err := startRota(ctx, bin, pgURL, spec.Schema)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	if perfDir != "" && (spec.Scenario == "e2e" || spec.Scenario == "latency") {
		stopPerf, err := startPerf(perfDir, fmt.Sprintf("rota-%s-raw=%v-run%d.perf.data", spec.Scenario, spec.Raw, run), srv.pid())
		if err != nil {
			return res, err
		}
		defer stopPerf()
	}
	c, err := rotaclient.New(rotaclient.Config{BaseURL: srv.url, UserAgent: "rota-peers"})
	if err != nil {
		return res, err
	}
	r := &rotaRun{spec: spec, p: spec.P, c: c, url: srv.url, w: &window{
		proc: srv.pid(), bench: os.Getpid(),
		pg: backends,
	}}
	switch spec.Scenario {
	case "submit-single":
		res.Metrics, err = r.submit(ctx, 1, spec.P.SubmitTasks)
	case "submit-batch":
		res.Metrics, err = r.submit(ctx, spec.P.BatchSize, spec.P.BatchTasks)
	case "e2e":
		if spec.Raw {
			res.Metrics, err = r.e2eRaw(ctx, spec.Batch)
		} else {
			res.Metrics, err = r.e2eSDK(ctx)
		}
	case "latency":
		res.Metrics, err = r.latency(ctx)
	case "delayed":
		res.Metrics, err = r.delayed(ctx)
	default:
		err = fmt.Errorf("unknown scenario %q", spec.Scenario)
	}
	if err != nil {
		return res, err
	}
	res.Usage = r.w.end()
	res.PeakRSSKiB, err = peakRSS(srv.pid())
	return res, err
}

// startPerf records the CPU profile of pid with perf until the returned
// function is called.
func startPerf(dir, name string, pid int) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-o", filepath.Join(dir, name), "-p", fmt.Sprint(pid))
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf: %w", err)
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}, nil
}

type rotaRun struct {
	spec caseSpec
	p    params
	c    *rotaclient.Client
	url  string
	w    *window
}

// submit measures tasks/s accepted from p.Clients concurrent clients, one
// task per request (batch 1) or batches of batch.
func (r *rotaRun) submit(ctx context.Context, batch, n int) ([]metric, error) {
	var next atomic.Int64
	r.w.begin()
	start := time.Now()
	err := parallel(r.p.Clients, func(int) error {
		for {
			i := int(next.Add(int64(batch))) - batch
			if i >= n {
				return nil
			}
			ps := make([]rotaclient.TaskParams, min(batch, n-i))
			for j := range ps {
				ps[j] = rotaclient.TaskParams{Kind: rotaKind, Payload: payload{SentNS: time.Now().UnixNano()}}
			}
			var err error
			if batch == 1 {
				_, err = r.c.Submit(ctx, ps[0])
			} else {
				_, err = r.c.SubmitBatch(ctx, ps)
			}
			if err != nil {
				return err
			}
		}
	})
	d := time.Since(start)
	r.w.end()
	if err != nil {
		return nil, err
	}
	return []metric{throughput("tasks accepted", n, d)}, nil
}

// insertAll submits n no-op tasks in batches of p.E2EBatch from
// p.E2EInserters concurrent inserters.
func (r *rotaRun) insertAll(ctx context.Context, n int) error {
	var next atomic.Int64
	b := r.p.E2EBatch
	return parallel(r.p.E2EInserters, func(int) error {
		for {
			i := int(next.Add(int64(b))) - b
			if i >= n {
				return nil
			}
			ps := make([]rotaclient.TaskParams, min(b, n-i))
			for j := range ps {
				ps[j] = rotaclient.TaskParams{Kind: rotaKind, Payload: payload{}}
			}
			if _, err := r.c.SubmitBatch(ctx, ps); err != nil {
				return err
			}
		}
	})
}

// e2eRaw: a minimal worker over the raw HTTP protocol. Each of p.RawLoops
// loops claims up to 100 tasks (long-polling 10 s), reports each a success
// (all of a claim's reports at once: one request per task, or with batch
// one POST /api/runs/reports for the whole claim), and claims again. A
// task counts as done when its success is acknowledged (committed).
func (r *rotaRun) e2eRaw(ctx context.Context, batch bool) ([]metric, error) {
	n := r.p.E2ETasks
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4096, 4096
	defer tr.CloseIdleConnections()
	rw := &rawWorker{hc: &http.Client{Transport: tr}, url: r.url, batch: batch, n: int64(n), finished: make(chan struct{})}
	wctx, cancel := context.WithCancel(ctx)
	var loops sync.WaitGroup
	for i := range r.p.RawLoops {
		id := fmt.Sprintf("peers-raw-%d", i)
		loops.Go(func() { rw.loop(wctx, id) })
	}
	defer func() { cancel(); loops.Wait() }()
	time.Sleep(r.p.Warmup) // let the claims wait on the server
	r.w.begin()
	start := time.Now()
	if err := r.insertAll(ctx, n); err != nil {
		return nil, err
	}
	select {
	case <-rw.finished:
	case <-time.After(10 * time.Minute):
		return nil, fmt.Errorf("only %d of %d tasks done after 10 minutes (first error: %v)", rw.done.Load(), n, rw.firstError())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d := time.Since(start)
	r.w.end()
	return []metric{throughput("tasks done", n, d)}, nil
}

// rawWorker is the state e2eRaw's claim loops share.
type rawWorker struct {
	// Immutable.
	hc    *http.Client
	url   string
	batch bool  // one POST /api/runs/reports per claim
	n     int64 // tasks to finish

	// Shared.
	done     atomic.Int64  // acknowledged successes
	finished chan struct{} // closed when done reaches n
	mu       sync.Mutex
	firstErr error
}

// loop claims and reports as worker id until ctx ends.
func (rw *rawWorker) loop(ctx context.Context, id string) {
	for ctx.Err() == nil {
		runIDs, err := rw.claim(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				rw.fail(err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		if rw.batch && len(runIDs) > 0 {
			rw.reportBatch(ctx, id, runIDs)
		} else {
			rw.reportEach(ctx, id, runIDs)
		}
	}
}

// claim long-polls for up to 100 tasks and returns their runs' ids.
func (rw *rawWorker) claim(ctx context.Context, id string) ([]string, error) {
	var claimed struct {
		Tasks []struct {
			RunID string `json:"run_id"`
		} `json:"tasks"`
	}
	err := postJSON(ctx, rw.hc, rw.url+"/api/workers/claim",
		map[string]any{"worker_id": id, "kinds": []string{rotaKind}, "max": 100, "wait_seconds": 10}, &claimed)
	if err != nil {
		return nil, err
	}
	runIDs := make([]string, len(claimed.Tasks))
	for i, t := range claimed.Tasks {
		runIDs[i] = t.RunID
	}
	return runIDs, nil
}

// reportBatch reports the runs' successes in one POST /api/runs/reports.
func (rw *rawWorker) reportBatch(ctx context.Context, id string, runIDs []string) {
	reports := make([]map[string]any, len(runIDs))
	for i, runID := range runIDs {
		reports[i] = map[string]any{"run_id": runID, "outcome": "succeed"}
	}
	var out struct {
		Results []struct {
			RunID string          `json:"run_id"`
			Error json.RawMessage `json:"error"`
		} `json:"results"`
	}
	if err := postJSON(ctx, rw.hc, rw.url+"/api/runs/reports", map[string]any{"worker_id": id, "reports": reports}, &out); err != nil {
		if ctx.Err() == nil {
			rw.fail(err)
		}
		return
	}
	for _, res := range out.Results {
		if len(res.Error) > 0 {
			rw.fail(fmt.Errorf("report of run %s: %s", res.RunID, res.Error))
			continue
		}
		rw.succeeded()
	}
}

// reportEach reports the runs' successes at once, one request per run.
func (rw *rawWorker) reportEach(ctx context.Context, id string, runIDs []string) {
	var reports sync.WaitGroup
	for _, runID := range runIDs {
		reports.Go(func() {
			err := postJSON(ctx, rw.hc, rw.url+"/api/runs/"+runID+"/succeed", map[string]any{"worker_id": id}, nil)
			if err != nil {
				if ctx.Err() == nil {
					rw.fail(err)
				}
				return
			}
			rw.succeeded()
		})
	}
	reports.Wait()
}

// succeeded counts one acknowledged success, and closes finished at the
// n-th.
func (rw *rawWorker) succeeded() {
	if rw.done.Add(1) == rw.n {
		close(rw.finished)
	}
}

// fail keeps err when it is the first error.
func (rw *rawWorker) fail(err error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.firstErr == nil {
		rw.firstErr = err
	}
}

// firstError returns the first error kept by fail, or nil.
func (rw *rawWorker) firstError() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.firstErr
}

// postJSON posts in and decodes the data of the response envelope into out.
func postJSON(ctx context.Context, hc *http.Client, u string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("POST %s: HTTP %d: %w", u, resp.StatusCode, err)
	}
	if env.Code != 0 {
		return fmt.Errorf("POST %s: %d %s", u, env.Code, env.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Data, out)
}

// worker starts a rotaworker SDK worker whose handler calls fn with the
// payload and its start instant.
func (r *rotaRun) worker(ctx context.Context, fn func(p payload, started time.Time)) (stop func()) {
	w := rotaworker.New(rotaworker.Config{
		Client: r.c, ID: "peers-sdk", Concurrency: r.p.SDKConcurrency, PollWait: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	rotaworker.Handle(w, rotaKind, func(_ context.Context, t *rotaworker.Task[payload]) error {
		fn(t.Payload, time.Now())
		return nil
	})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = w.Stop(sctx)
		cancel()
		<-done
	}
}

// e2eSDK: no-op tasks through rotaworker. The handler counts starts; once
// all started, the server's stats are polled until all are SUCCESS (the
// SDK reports after the handler returns).
func (r *rotaRun) e2eSDK(ctx context.Context) ([]metric, error) {
	n := r.p.E2ETasks
	rec := newRecorder(n)
	stop := r.worker(ctx, func(payload, time.Time) { rec.add(0) })
	defer stop()
	time.Sleep(r.p.Warmup)
	r.w.begin()
	start := time.Now()
	if err := r.insertAll(ctx, n); err != nil {
		return nil, err
	}
	if err := rec.wait(10 * time.Minute); err != nil {
		return nil, err
	}
	for {
		st, err := r.c.Stats(ctx)
		if err != nil {
			return nil, err
		}
		if st.Totals[rota.StatusSuccess] >= n {
			break
		}
		if time.Since(start) > 11*time.Minute {
			return nil, fmt.Errorf("only %d of %d tasks succeeded", st.Totals[rota.StatusSuccess], n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := time.Since(start)
	r.w.end()
	return []metric{throughput("tasks done", n, d)}, nil
}

// latency: single submits at p.Rate/s for p.LatencyFor to idle workers;
// enqueue→start is the handler's start minus the instant in the payload.
func (r *rotaRun) latency(ctx context.Context) ([]metric, error) {
	total := int(float64(r.p.Rate) * r.p.LatencyFor.Seconds())
	rec, warm := newRecorder(total), newRecorder(warmupTasks(r.p))
	stop := r.worker(ctx, func(p payload, started time.Time) {
		if p.Warmup {
			warm.add(0)
			return
		}
		rec.add(started.Sub(time.Unix(0, p.SentNS)))
	})
	defer stop()
	time.Sleep(r.p.Warmup)
	err := paced(r.p.Rate, warmupTasks(r.p), func() error {
		_, err := r.c.Submit(ctx, rotaclient.TaskParams{Kind: rotaKind, Payload: payload{Warmup: true}})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := warm.wait(time.Minute); err != nil {
		return nil, err
	}
	r.w.begin()
	err = paced(r.p.Rate, total, func() error {
		_, err := r.c.Submit(ctx, rotaclient.TaskParams{Kind: rotaKind, Payload: payload{SentNS: time.Now().UnixNano()}})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := rec.wait(time.Minute); err != nil {
		return nil, err
	}
	r.w.end()
	return percentiles(latencyLabel(r.p), rec.durations()), nil
}

// warmupTasks is the number of tasks of the latency scenario's warm-up.
func warmupTasks(p params) int { return int(float64(p.Rate) * p.LatencyWarmup.Seconds()) }

func latencyLabel(p params) string { return fmt.Sprintf("enqueue→start at %d/s", p.Rate) }

const lateLabel = "lateness"

// delayed: p.Delayed tasks due at exact instants (milliseconds) spread over
// p.DelayedOver, the first 2 s after the submit; lateness is the handler's
// start minus the due instant.
func (r *rotaRun) delayed(ctx context.Context) ([]metric, error) {
	n := r.p.Delayed
	rec := newRecorder(n)
	stop := r.worker(ctx, func(p payload, started time.Time) { rec.add(started.Sub(time.Unix(0, p.DueNS))) })
	defer stop()
	time.Sleep(r.p.Warmup)
	r.w.begin()
	first, step := dueTimes(r.p)
	ps := make([]rotaclient.TaskParams, n)
	for i := range ps {
		due := first.Add(time.Duration(i) * step)
		ps[i] = rotaclient.TaskParams{Kind: rotaKind, RunAt: due, Payload: payload{DueNS: due.UnixNano()}}
	}
	for i := 0; i < n; i += 1000 {
		if _, err := r.c.SubmitBatch(ctx, ps[i:min(n, i+1000)]); err != nil {
			return nil, err
		}
	}
	if time.Now().After(first) {
		return nil, errors.New("submitting the delayed tasks took longer than their 2 s lead")
	}
	if err := rec.wait(r.p.DelayedOver + time.Minute); err != nil {
		return nil, err
	}
	r.w.end()
	return percentiles(lateLabel, rec.durations()), nil
}

// dueTimes returns the due instant of the first delayed task (2 s ahead,
// on a whole millisecond: Rota's run_at_ms precision) and the step
// between tasks.
func dueTimes(p params) (first time.Time, step time.Duration) {
	return time.Now().Add(2 * time.Second).Truncate(time.Millisecond), p.DelayedOver / time.Duration(p.Delayed)
}
