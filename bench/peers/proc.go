package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux port Go supports).
const clockTicks = 100

// peakRSS returns VmHWM of a live process (/proc/<pid>/status), in KiB.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// cpuSeconds returns the CPU time (user + system) a process has used so
// far, from /proc/<pid>/stat; 0 when the process is gone.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64) // field 14
	stime, _ := strconv.ParseFloat(f[12], 64) // field 15
	return (utime + stime) / clockTicks
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// backendPIDs lists the PostgreSQL backends of the connections named
// application_name = app, so that their CPU is charged to the system under
// test (and not to other users of the same server).
func backendPIDs(ctx context.Context, pool *pgxpool.Pool, app string) []int {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int32
		if rows.Scan(&pid) == nil {
			pids = append(pids, int(pid))
		}
	}
	return pids
}

// usage is what a case's process and its database connections used during
// the measured window.
type usage struct {
	Wall     float64 `json:"wall_s"`      // length of the window
	ProcCPU  float64 `json:"proc_cpu_s"`  // the Rota server, or the River process
	BenchCPU float64 `json:"bench_cpu_s"` // Rota only: this program (load and workers)
	PGCPU    float64 `json:"pg_cpu_s"`    // the system's PostgreSQL backends
}

// window measures CPU use between begin and end: of proc, of bench (0 for
// none), and of the PostgreSQL backends that pg lists.
type window struct {
	proc, bench int
	pg          func() []int

	began, ended  bool
	t0            time.Time
	proc0, bench0 float64
	pg0           map[int]float64
	u             usage
}

func (w *window) begin() {
	if w.began {
		return
	}
	w.began = true
	w.t0 = time.Now()
	w.proc0, w.bench0 = cpuSeconds(w.proc), 0
	if w.bench != 0 {
		w.bench0 = cpuSeconds(w.bench)
	}
	w.pg0 = map[int]float64{}
	for _, pid := range w.pg() {
		w.pg0[pid] = cpuSeconds(pid)
	}
}

// end closes the window (once) and returns what was used in it. Backends
// that connected during the window count from zero; those that left are
// lost (the pools of both systems keep their connections).
func (w *window) end() usage {
	if !w.began || w.ended {
		return w.u
	}
	w.ended = true
	w.u.Wall = time.Since(w.t0).Seconds()
	w.u.ProcCPU = cpuSeconds(w.proc) - w.proc0
	if w.bench != 0 {
		w.u.BenchCPU = cpuSeconds(w.bench) - w.bench0
	}
	for _, pid := range w.pg() {
		w.u.PGCPU += cpuSeconds(pid) - w.pg0[pid]
	}
	return w.u
}
