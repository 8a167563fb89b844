package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store/storecost"
)

// countingTransport counts the HTTP requests it sends, and the claims,
// reports and heartbeats among them.
type countingTransport struct {
	rt http.RoundTripper
	n  *requestCounts
}

// requestCounts are the requests a countingTransport sent.
type requestCounts struct {
	all, claims, reports, beats atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.all.Add(1)
	switch p := r.URL.Path; {
	case p == "/api/workers/claim":
		t.n.claims.Add(1)
	case strings.HasSuffix(p, "/heartbeat"):
		t.n.beats.Add(1)
	case p == "/api/runs/reports" || strings.HasPrefix(p, "/api/runs/") &&
		(strings.HasSuffix(p, "/succeed") || strings.HasSuffix(p, "/fail") || strings.HasSuffix(p, "/release")):
		t.n.reports.Add(1)
	}
	return t.rt.RoundTrip(r)
}

// requestsSnapshot is requestCounts at one instant.
type requestsSnapshot struct{ all, claims, reports, beats int64 }

func (c *requestCounts) snapshot() requestsSnapshot {
	return requestsSnapshot{c.all.Load(), c.claims.Load(), c.reports.Load(), c.beats.Load()}
}

// meter is the cost counters at one instant.
type meter struct {
	requests requestsSnapshot
	cost     storecost.Snapshot
	rows     map[string]storecost.Rows // nil unless the store counts rows
	cpu      time.Duration             // of this process
	peakRSS  int64                     // bytes: the process's peak RSS since the previous meter (0: unknown)
	// Of a server measured with --server, from its /metrics (Prometheus's
	// process collector): CPU seconds, and the largest RSS sampled since
	// the previous meter; ok false when it could not be read.
	remoteCPU float64
	remoteRSS float64
	remoteOK  bool
}

// meter reads the counters, and starts a new window of the peak RSS.
func (b *bench) meter(ctx context.Context) meter {
	m := meter{requests: b.requests.snapshot(), cost: b.cost.Snapshot(), cpu: processCPU(), peakRSS: peakRSS()}
	resetPeakRSS()
	if b.remote != nil {
		m.remoteCPU, m.remoteRSS, m.remoteOK = b.remote.read(ctx)
	}
	if b.srv != nil {
		if rows, ok, err := b.srv.RowWrites(ctx); ok && err == nil {
			m.rows = rows
		}
	}
	return m
}

// addCost adds the cost per task of what happened since m0 (tasks tasks)
// as rows of scenario scn, their metrics prefixed with what.
func (b *bench) addCost(ctx context.Context, add addFunc, scn, what string, m0 meter, tasks int) {
	if tasks <= 0 {
		return
	}
	m := b.meter(ctx)
	per := func(v int64) float64 { return float64(v) / float64(tasks) }
	label := func(s string) string { return fmt.Sprintf("%s: %s per task", what, s) }
	add(scn, label("HTTP requests"), "", per(m.requests.all-m0.requests.all))
	if d := m.requests.claims - m0.requests.claims + m.requests.reports - m0.requests.reports; d > 0 {
		add(scn, label("HTTP requests: claims"), "", per(m.requests.claims-m0.requests.claims))
		add(scn, label("HTTP requests: reports"), "", per(m.requests.reports-m0.requests.reports))
		add(scn, label("HTTP requests: heartbeats"), "", per(m.requests.beats-m0.requests.beats))
	}
	if b.srv == nil {
		// The store is another process's; its CPU and memory are what its
		// /metrics say.
		if m.remoteOK && m0.remoteOK {
			add(scn, what+": server CPU per 1,000 tasks", "s", (m.remoteCPU-m0.remoteCPU)*1000/float64(tasks))
			add(scn, fmt.Sprintf("%s: server peak RSS (sampled every %s)", what, fmtEvery(b.cfg.SampleEvery)), "MiB", m.remoteRSS/(1<<20))
		}
		return
	}
	d := m.cost.Sub(m0.cost).Total()
	add(scn, label("store statements"), "", per(d.Statements))
	add(scn, label("store round trips"), "", per(d.RoundTrips))
	commits := "store commits"
	if m.rows == nil {
		commits = "store commits (= WAL fsyncs)"
	}
	add(scn, label(commits), "", per(d.Commits))
	if m.rows != nil && m0.rows != nil {
		r := storecost.SumTables(storecost.SubTables(m.rows, m0.rows))
		add(scn, label("row versions"), "", per(r.Versions()))
		add(scn, label("HOT updates"), "", per(r.HotUpdated))
	}
	add(scn, label("process CPU (server + load)"), "µs", float64(m.cpu-m0.cpu)/float64(time.Microsecond)/float64(tasks))
	if m.peakRSS > 0 {
		add(scn, what+": peak RSS (server + load)", "MiB", float64(m.peakRSS)/(1<<20))
	}
}

// peakRSS is the process's peak resident set size (VmHWM) since it started
// or since the last resetPeakRSS, in bytes; 0 where /proc does not say.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}

// resetPeakRSS starts a new peak RSS window (Linux: "5" written to
// /proc/self/clear_refs resets VmHWM to the current RSS); elsewhere the
// peak stays the process's.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dropSchema drops the PostgreSQL schema an in-process server used.
func dropSchema(ctx context.Context, url, schema string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
}

// remoteServer samples the process metrics of a server measured with
// --server: its RSS every 100 ms (the peak of each window), its CPU time
// when read.
type remoteServer struct {
	// Immutable.
	url string
	hc  *http.Client

	mu      sync.Mutex // guards peak
	peak    float64    // the largest RSS sampled since the last read
	stopped chan struct{}
	done    chan struct{}
}

// startRemote starts sampling the server at url; stop ends it.
// Each sample is a scrape of /metrics, which reads the store (counts of
// tasks by kind and status): every defaults to 100 ms; a deep queue (the
// scale scenario) wants it rarer, or the samples load the store.
func startRemote(ctx context.Context, url string, hc *http.Client, every time.Duration) *remoteServer {
	r := &remoteServer{url: url, hc: hc, stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if _, rss, ok := r.scrape(ctx); ok {
				r.mu.Lock()
				r.peak = max(r.peak, rss)
				r.mu.Unlock()
			}
			select {
			case <-t.C:
			case <-r.stopped:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return r
}

func (r *remoteServer) stop() {
	close(r.stopped)
	<-r.done
}

// read returns the server's CPU seconds and the peak RSS sampled since the
// previous read (the current one included), and starts a new window.
func (r *remoteServer) read(ctx context.Context) (cpu, peak float64, ok bool) {
	cpu, rss, ok := r.scrape(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	peak, r.peak = max(r.peak, rss), rss
	return cpu, peak, ok
}

// scrape reads process_cpu_seconds_total and process_resident_memory_bytes
// from the server's /metrics.
func (r *remoteServer) scrape(ctx context.Context) (cpu, rss float64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/metrics", nil)
	if err != nil {
		return 0, 0, false
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, false
	}
	return parseProcessMetrics(resp.Body)
}

// parseProcessMetrics finds the CPU and RSS samples of Prometheus's process
// collector in a text exposition.
func parseProcessMetrics(body io.Reader) (cpu, rss float64, ok bool) {
	var seenCPU, seenRSS bool
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, found := strings.Cut(sc.Text(), " ")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			cpu, seenCPU = v, true
		case "process_resident_memory_bytes":
			rss, seenRSS = v, true
		}
	}
	return cpu, rss, seenCPU && seenRSS
}

// fmtEvery writes a sampling period as the table always did ("100 ms").
func fmtEvery(d time.Duration) string {
	if d%time.Second != 0 {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%d s", int(d.Seconds()))
}
