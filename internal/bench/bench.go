// Package bench is Rota's load tool (`rota bench`): it starts (or targets)
// a server and measures what users feel, each scenario repeated and quoted
// as the median of its runs:
//
//   - submit: tasks/s accepted, single requests from N clients, and
//     batches of 100;
//   - e2e: no-op tasks/s through the Go SDK worker, from the first submit
//     to the last success (submits and work overlap);
//   - latency: enqueue→start p50/p99/max at a steady rate with idle
//     workers (start measured in the handler, on the same clock as the
//     submit);
//   - delayed: tasks due at exact instants spread over a window; lateness
//     (handler start − due time) p50/p99/max;
//   - scale (only when asked for): claim + complete tasks/s with 1,000 and
//     with 1,000,000 tasks waiting, and the memory the deep queue takes.
//
// Each scenario also reports its cost per task: HTTP requests (counted in
// the client; the claims, reports and heartbeats among them), and, when the server runs in this process, the store's
// statements, round trips and commits (package storecost; on the
// embedded store each commit is one fsync), the row versions and HOT
// updates PostgreSQL counted (pg_stat_user_tables deltas, PostgreSQL
// store only), the process's CPU time (getrusage; the process holds the
// server and the load and workers together) and its peak RSS during the
// scenario (VmHWM, reset at the scenario's start through
// /proc/self/clear_refs; Linux only). A server measured with --server is
// another process: its CPU per 1,000 tasks and its peak RSS (sampled every
// 100 ms, --sample-every) come from its /metrics (process_cpu_seconds_total,
// process_resident_memory_bytes).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rotahq/rota/internal/server"
	"github.com/rotahq/rota/internal/store/mongostore"
	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/redisstore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotaworker"
)

// Config says what to measure. Zero values mean the documented defaults.
type Config struct {
	// Server is the URL of the server to measure; empty starts one in this
	// process on a fresh embedded store (full durability unless Relaxed).
	Server  string
	Relaxed bool
	// Store is the in-process server's store: empty for a fresh embedded
	// store, a MySQL/MariaDB URL (its database used as it is), a Redis URL
	// (a fresh key prefix, deleted at the end), or a
	// PostgreSQL URL, where the server uses a fresh schema
	// (rota_bench_<random>) dropped at the end.
	Store string
	// Runs repeats each scenario (default 3); figures are medians.
	Runs int
	// Scenarios to run, among "submit", "e2e", "latency", "delayed" and
	// "scale" (default all but scale).
	Scenarios []string
	// Clients submitting concurrently (default 32).
	Clients int
	// SubmitTasks per submit run (default 10,000).
	SubmitTasks int
	// E2ETasks per end-to-end run (default 100,000).
	E2ETasks int
	// Concurrency of the SDK worker's handlers (default 256).
	Concurrency int
	// Rate of the latency scenario in tasks/s (default 500) for LatencyFor
	// (default 10 s).
	Rate       int
	LatencyFor time.Duration
	// Delayed tasks (default 2,000) due over DelayedOver (default 10 s).
	Delayed     int
	DelayedOver time.Duration
	// ScaleWaiting are the queue depths of the scale scenario (default
	// 1,000 and 1,000,000), ScaleTasks the tasks claimed and completed at
	// each (default 20,000).
	ScaleWaiting []int
	ScaleTasks   int
	// SampleEvery is the period of the samples of a --server's /metrics
	// (default 100 ms).
	SampleEvery time.Duration
	// Out receives progress and the table (default os.Stdout).
	Out io.Writer
}

func (c *Config) defaults() {
	if c.Runs <= 0 {
		c.Runs = 3
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = []string{"submit", "e2e", "latency", "delayed"}
	}
	if c.Clients <= 0 {
		c.Clients = 32
	}
	if c.SubmitTasks <= 0 {
		c.SubmitTasks = 10_000
	}
	if c.E2ETasks <= 0 {
		c.E2ETasks = 100_000
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.Rate <= 0 {
		c.Rate = 500
	}
	if c.LatencyFor <= 0 {
		c.LatencyFor = 10 * time.Second
	}
	if c.Delayed <= 0 {
		c.Delayed = 2000
	}
	if c.DelayedOver <= 0 {
		c.DelayedOver = 10 * time.Second
	}
	if len(c.ScaleWaiting) == 0 {
		c.ScaleWaiting = []int{1000, 1_000_000}
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 100 * time.Millisecond
	}
	if c.ScaleTasks <= 0 {
		c.ScaleTasks = 20_000
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
}

// Row is one line of the report: a figure and its runs.
type Row struct {
	Scenario string
	Metric   string
	Unit     string
	Runs     []float64
}

// Median of the runs.
func (r Row) Median() float64 { return median(r.Runs) }

// Run measures the scenarios and prints the table to cfg.Out.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	cfg.defaults()
	url := cfg.Server
	b := &bench{cfg: cfg}
	if url == "" {
		embedded, stop, err := b.startEmbedded(ctx)
		defer stop()
		if err != nil {
			return nil, err
		}
		url = embedded
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024 // as rotaclient's own
	client, err := rotaclient.New(rotaclient.Config{BaseURL: url, UserAgent: "rota-bench",
		HTTPClient: &http.Client{Transport: countingTransport{rt: tr, n: &b.requests}}})
	if err != nil {
		return nil, err
	}
	b.url, b.c = url, client
	if cfg.Server != "" {
		b.remote = startRemote(ctx, url, &http.Client{Transport: tr}, cfg.SampleEvery)
		defer b.remote.stop()
	}
	var rows rowSet
	for run := 1; run <= cfg.Runs; run++ {
		for _, scn := range cfg.Scenarios {
			fmt.Fprintf(cfg.Out, "run %d/%d: %s…\n", run, cfg.Runs, scn)
			if err := b.scenario(ctx, run, scn, rows.add); err != nil {
				return nil, fmt.Errorf("%s (run %d): %w", scn, run, err)
			}
		}
	}
	out := rows.list()
	Print(cfg.Out, out)
	return out, nil
}

// startEmbedded starts an in-process server on a temporary data directory
// (or, with Config.Store, on a new PostgreSQL schema) for b and returns its
// URL. stop, to call even when err is not nil, stops the server and
// removes what it stored.
func (b *bench) startEmbedded(ctx context.Context) (url string, stop func(), err error) {
	cfg := b.cfg
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	dir, err := os.MkdirTemp("", "rota-bench")
	if err != nil {
		return "", stop, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	scfg := server.Config{
		Listen: "127.0.0.1:0", DataDir: dir, Relaxed: cfg.Relaxed, Store: cfg.Store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cost:   &storecost.Counter{},
	}
	desc := "embedded store, full durability (synchronous=FULL, group commit)"
	if cfg.Relaxed {
		desc = "embedded store, relaxed durability"
	}
	switch {
	case strings.HasPrefix(cfg.Store, "mysql://"), strings.HasPrefix(cfg.Store, "mariadb://"):
		desc = "MySQL/MariaDB store " + mysqlstore.Redact(cfg.Store) + " (the database as it is: give an empty one)"
	case strings.HasPrefix(cfg.Store, "redis://"), strings.HasPrefix(cfg.Store, "rediss://"):
		prefix := fmt.Sprintf("rota_bench_%d:", time.Now().UnixNano())
		sep := "?"
		if strings.Contains(cfg.Store, "?") {
			sep = "&"
		}
		scfg.Store = cfg.Store + sep + "prefix=" + prefix
		undo = append(undo, func() { _ = redisstore.DropPrefix(context.WithoutCancel(ctx), cfg.Store, prefix) })
		desc = "Redis store, key prefix " + prefix
	case strings.HasPrefix(cfg.Store, "mongodb"):
		desc = "MongoDB store " + mongostore.Redact(cfg.Store) + " (the database as it is: give an empty one)"
	case cfg.Store != "":
		scfg.PGSchema = fmt.Sprintf("rota_bench_%d", time.Now().UnixNano())
		undo = append(undo, func() { dropSchema(context.WithoutCancel(ctx), cfg.Store, scfg.PGSchema) })
		desc = "PostgreSQL store, schema " + scfg.PGSchema
	}
	srv, err := server.New(ctx, scfg)
	if err != nil {
		return "", stop, err
	}
	if err := srv.Start(ctx); err != nil {
		return "", stop, err
	}
	undo = append(undo, func() { srv.Stop(context.WithoutCancel(ctx)) })
	b.srv, b.cost = srv, scfg.Cost
	url = "http://" + srv.Addr()
	fmt.Fprintf(cfg.Out, "started an in-process server on %s, %s\n", url, desc)
	return url, stop, nil
}

// scenario runs the scenario named scn once (run n of Config.Runs).
func (b *bench) scenario(ctx context.Context, run int, scn string, add addFunc) error {
	switch scn {
	case "submit":
		return b.submit(ctx, run, add)
	case "e2e":
		return b.e2e(ctx, run, add)
	case "latency":
		return b.latency(ctx, run, add)
	case "delayed":
		return b.delayed(ctx, run, add)
	case "scale":
		return b.scale(ctx, run, add)
	}
	return fmt.Errorf("unknown scenario %q", scn)
}

// rowSet collects the measurements of every run, a Row per scenario and
// metric, in the order they first came.
type rowSet struct {
	rows  map[string]*Row
	order []string
}

// add is an addFunc that records v.
func (s *rowSet) add(scn, metric, unit string, v float64) {
	k := scn + "/" + metric
	r, ok := s.rows[k]
	if !ok {
		if s.rows == nil {
			s.rows = map[string]*Row{}
		}
		r = &Row{Scenario: scn, Metric: metric, Unit: unit}
		s.rows[k] = r
		s.order = append(s.order, k)
	}
	r.Runs = append(r.Runs, v)
}

// list returns the rows in the order they first came.
func (s *rowSet) list() []Row {
	out := make([]Row, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, *s.rows[k])
	}
	return out
}

// Print writes rows as a Markdown table (medians, then every run).
func Print(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| scenario\t metric\t median\t runs\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t")
	for _, r := range rows {
		var runs []string
		for _, v := range r.Runs {
			runs = append(runs, format(v))
		}
		fmt.Fprintf(tw, "| %s\t %s\t %s %s\t %v\t\n", r.Scenario, r.Metric, format(r.Median()), r.Unit, runs)
	}
	tw.Flush()
}

func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

type bench struct {
	cfg      Config
	url      string
	c        *rotaclient.Client
	srv      *server.Server     // the in-process server; nil for --server
	cost     *storecost.Counter // its store's counter; nil for --server
	requests requestCounts      // HTTP requests sent by the client
	remote   *remoteServer      // the --server's process metrics; nil for an in-process server
}

type addFunc func(scenario, metric, unit string, v float64)

// payload carries the submit instant so the handler can measure the wait.
type payload struct {
	SentNS int64 `json:"s"`
	DueNS  int64 `json:"d,omitempty"`
}

func (b *bench) submit(ctx context.Context, run int, add addFunc) error {
	kind := fmt.Sprintf("bench-submit-%d-%d", run, time.Now().UnixNano())
	for _, batch := range []int{1, 100} {
		var next atomic.Int64
		n := int64(b.cfg.SubmitTasks)
		m0 := b.meter(ctx)
		start := time.Now()
		err := parallel(b.cfg.Clients, func() error {
			for {
				i := next.Add(int64(batch)) - int64(batch)
				if i >= n {
					return nil
				}
				k := min(int64(batch), n-i)
				ps := make([]rotaclient.TaskParams, k)
				for j := range ps {
					ps[j] = rotaclient.TaskParams{Kind: kind, Payload: payload{SentNS: time.Now().UnixNano()}}
				}
				var err error
				if batch == 1 {
					_, err = b.c.Submit(ctx, ps[0])
				} else {
					_, err = b.c.SubmitBatch(ctx, ps)
				}
				if err != nil {
					return err
				}
			}
		})
		if err != nil {
			return err
		}
		name := "single requests"
		if batch > 1 {
			name = fmt.Sprintf("batches of %d", batch)
		}
		add("submit", fmt.Sprintf("%s, %d clients", name, b.cfg.Clients), "tasks/s", float64(n)/time.Since(start).Seconds())
		b.addCost(ctx, add, "submit", name, m0, int(n))
	}
	return nil
}

// worker starts an SDK worker for kind that calls fn at each handler start.
func (b *bench) worker(ctx context.Context, kind string, fn func(p payload, started time.Time)) (stop func(), err error) {
	w := rotaworker.New(rotaworker.Config{
		Client: b.c, ID: fmt.Sprintf("bench-%s", kind), Concurrency: b.cfg.Concurrency, PollWait: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	rotaworker.Handle(w, kind, func(ctx context.Context, t *rotaworker.Task[payload]) error {
		fn(t.Payload, time.Now())
		return nil
	})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	// stop is idempotent: the scenarios stop the worker before they
	// count the cost (Stop waits for the last reports) and defer it too.
	return sync.OnceFunc(func() {
		sctx, c := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer c()
		w.Stop(sctx)
		cancel()
		<-done
	}), nil
}

func (b *bench) e2e(ctx context.Context, run int, add addFunc) error {
	kind := fmt.Sprintf("bench-e2e-%d-%d", run, time.Now().UnixNano())
	n := b.cfg.E2ETasks
	var done atomic.Int64
	finished := make(chan struct{})
	stop, err := b.worker(ctx, kind, func(payload, time.Time) {
		if done.Add(1) == int64(n) {
			close(finished)
		}
	})
	if err != nil {
		return err
	}
	defer stop()
	m0 := b.meter(ctx)
	start := time.Now()
	var next atomic.Int64
	err = parallel(8, func() error {
		for {
			i := next.Add(500) - 500
			if i >= int64(n) {
				return nil
			}
			ps := make([]rotaclient.TaskParams, min(500, int64(n)-i))
			for j := range ps {
				ps[j] = rotaclient.TaskParams{Kind: kind, Payload: payload{}}
			}
			if _, err := b.c.SubmitBatch(ctx, ps); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return err
	}
	select {
	case <-finished:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("only %d of %d tasks done after 10 minutes", done.Load(), n)
	}
	add("e2e", fmt.Sprintf("no-op tasks through the SDK worker (%d tasks, concurrency %d)", n, b.cfg.Concurrency),
		"tasks/s", float64(n)/time.Since(start).Seconds())
	stop() // the last reports, before counting
	b.addCost(ctx, add, "e2e", "submit, claim, complete", m0, n)
	return nil
}

func (b *bench) latency(ctx context.Context, run int, add addFunc) error {
	kind := fmt.Sprintf("bench-lat-%d-%d", run, time.Now().UnixNano())
	total := int(float64(b.cfg.Rate) * b.cfg.LatencyFor.Seconds())
	var mu sync.Mutex
	waits := make([]time.Duration, 0, total)
	all := make(chan struct{})
	stop, err := b.worker(ctx, kind, func(p payload, started time.Time) {
		mu.Lock()
		waits = append(waits, started.Sub(time.Unix(0, p.SentNS)))
		if len(waits) == total {
			close(all)
		}
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer stop()
	time.Sleep(200 * time.Millisecond) // let the worker's claims wait on the server
	interval := time.Second / time.Duration(b.cfg.Rate)
	m0 := b.meter(ctx)
	start := time.Now()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := b.c.Submit(ctx, rotaclient.TaskParams{Kind: kind, Payload: payload{SentNS: time.Now().UnixNano()}}); err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := waitClosed(ctx, all, time.Minute); err != nil {
		return err
	}
	label := fmt.Sprintf("enqueue→start at %d tasks/s", b.cfg.Rate)
	stop() // the last reports, before counting
	b.addCost(ctx, add, "latency", fmt.Sprintf("single submits at %d/s, claim, complete", b.cfg.Rate), m0, total)
	mu.Lock()
	defer mu.Unlock()
	addPercentiles(add, "latency", label, waits)
	return nil
}

func (b *bench) delayed(ctx context.Context, run int, add addFunc) error {
	kind := fmt.Sprintf("bench-delay-%d-%d", run, time.Now().UnixNano())
	n := b.cfg.Delayed
	var mu sync.Mutex
	lates := make([]time.Duration, 0, n)
	all := make(chan struct{})
	stop, err := b.worker(ctx, kind, func(p payload, started time.Time) {
		mu.Lock()
		lates = append(lates, started.Sub(time.Unix(0, p.DueNS)))
		if len(lates) == n {
			close(all)
		}
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer stop()
	first := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	step := b.cfg.DelayedOver / time.Duration(n)
	ps := make([]rotaclient.TaskParams, n)
	for i := range ps {
		due := first.Add(time.Duration(i) * step)
		ps[i] = rotaclient.TaskParams{Kind: kind, RunAt: due, Payload: payload{DueNS: due.UnixNano()}}
	}
	for i := 0; i < n; i += 1000 {
		if _, err := b.c.SubmitBatch(ctx, ps[i:min(n, i+1000)]); err != nil {
			return err
		}
	}
	if time.Now().After(first) {
		return errors.New("submitting the delayed tasks took longer than their lead time")
	}
	if err := waitClosed(ctx, all, b.cfg.DelayedOver+time.Minute); err != nil {
		return err
	}
	label := fmt.Sprintf("delayed-task lateness (%d tasks over %s)", n, b.cfg.DelayedOver)
	mu.Lock()
	defer mu.Unlock()
	addPercentiles(add, "delayed", label, lates)
	return nil
}

func addPercentiles(add addFunc, scn, label string, ds []time.Duration) {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	add(scn, label+" p50", "ms", ms(pct(ds, 0.50)))
	add(scn, label+" p99", "ms", ms(pct(ds, 0.99)))
	add(scn, label+" max", "ms", ms(ds[len(ds)-1]))
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func waitClosed(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return fmt.Errorf("not all tasks ran within %s", d)
	}
}

// parallel runs fn in n goroutines and returns the first error.
func parallel(n int, fn func() error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
