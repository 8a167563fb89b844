package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store/storecost"
)

// countingTransport counts the HTTP requests it sends.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.rt.RoundTrip(r)
}

// meter is the cost counters at one instant.
type meter struct {
	requests int64
	cost     storecost.Snapshot
	rows     map[string]storecost.Rows // nil unless the store counts rows
	cpu      time.Duration             // of this process
	peakRSS  int64                     // bytes: the process's peak RSS since the previous meter (0: unknown)
}

// meter reads the counters, and starts a new window of the peak RSS.
func (b *bench) meter(ctx context.Context) meter {
	m := meter{requests: b.requests.Load(), cost: b.cost.Snapshot(), cpu: processCPU(), peakRSS: peakRSS()}
	resetPeakRSS()
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
	add(scn, label("HTTP requests"), "", per(m.requests-m0.requests))
	if b.srv == nil {
		return // the store and the CPU are another process's
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
