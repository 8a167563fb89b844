// Command peers compares Rota with River (github.com/riverqueue/river) on
// one PostgreSQL server, in one run, with the methodology of Rota's own load
// tool (internal/bench): every figure is the median of --runs runs, payloads
// carry their submit instant, and waits are measured in the handler.
//
// Each run of each case starts from nothing: a fresh schema, and a fresh
// process for the system under test — a `rota server` built from this
// checkout (--pg-schema), or this program re-executed with --river-child
// for River (its migrations applied into the schema, its pgx pool's
// search_path set to it) — so that each peak RSS is that case's alone. The
// schema is dropped afterwards.
//
//	cd bench/peers && go run . --runs 3
//
// See README.md for the cases, the results and how to read them.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// params are the sizes of the scenarios, shared by both systems.
type params struct {
	PG             string        `json:"pg"`
	Clients        int           `json:"clients"`
	SubmitTasks    int           `json:"submit_tasks"`
	BatchTasks     int           `json:"batch_tasks"`
	BatchSize      int           `json:"batch_size"`
	E2ETasks       int           `json:"e2e_tasks"`
	E2EBatch       int           `json:"e2e_batch"`
	E2EInserters   int           `json:"e2e_inserters"`
	RawLoops       int           `json:"raw_loops"`
	SDKConcurrency int           `json:"sdk_concurrency"`
	Rate           int           `json:"rate"`
	LatencyFor     time.Duration `json:"latency_for"`
	LatencyWarmup  time.Duration `json:"latency_warmup"`
	Delayed        int           `json:"delayed"`
	DelayedOver    time.Duration `json:"delayed_over"`
	Warmup         time.Duration `json:"warmup"`
}

// caseSpec is one thing measured: a scenario on one system in one setup.
type caseSpec struct {
	System   string `json:"system"`   // "rota", "river" (PostgreSQL), "rota-sqlite" (embedded store), "river-sqlite"
	Scenario string `json:"scenario"` // submit-single, submit-batch, e2e, latency, delayed
	Variant  string `json:"variant"`  // how the system is set up, for the table
	Raw      bool   `json:"raw"`      // Rota: the raw-HTTP worker loop instead of rotaworker
	Batch    bool   `json:"batch"`    // Rota, raw: one POST /api/runs/reports per claim instead of one report per task
	Workers  int    `json:"workers"`  // River: MaxWorkers of the queue (0: insert-only client)
	Tuned    bool   `json:"tuned"`    // River: FetchCooldown 1 ms, FetchPollInterval 50 ms
	Schema   string `json:"schema"`   // fresh for each run
	AppName  string `json:"app_name"` // application_name of the system's connections
	Fsync    string `json:"fsync"`    // rota-redis, asynq: appendfsync of the case's redis-server
	Redis    string `json:"redis"`    // rota-redis, asynq: host:port of the case's redis-server
	RedisPID int    `json:"redis_pid"`
	P        params `json:"params"`
}

// caseResult is what one run of a case measured.
type caseResult struct {
	Metrics    []metric `json:"metrics"`
	PeakRSSKiB int64    `json:"peak_rss_kib"`
	Usage      usage    `json:"usage"`
}

// scenarioTitle names the scenarios in the table.
func scenarioTitle(p params, scenario string) string {
	switch scenario {
	case "submit-single":
		return fmt.Sprintf("submit, single inserts (%d clients, %d tasks)", p.Clients, p.SubmitTasks)
	case "submit-batch":
		return fmt.Sprintf("submit, batches of %d (%d clients, %d tasks)", p.BatchSize, p.Clients, p.BatchTasks)
	case "e2e":
		return fmt.Sprintf("end-to-end no-op (%d tasks)", p.E2ETasks)
	case "latency":
		if p.LatencyWarmup > 0 {
			return fmt.Sprintf("enqueue→start, %d tasks/s for %s after %s of it, idle workers", p.Rate, p.LatencyFor, p.LatencyWarmup)
		}
		return fmt.Sprintf("enqueue→start, %d tasks/s for %s, idle workers", p.Rate, p.LatencyFor)
	case "delayed":
		return fmt.Sprintf("delayed-task lateness (%d tasks over %s)", p.Delayed, p.DelayedOver)
	}
	return scenario
}

// scenarioTasks is how many tasks one run of scenario handles.
func scenarioTasks(p params, scenario string) int {
	switch scenario {
	case "submit-single":
		return p.SubmitTasks
	case "submit-batch":
		return p.BatchTasks
	case "e2e":
		return p.E2ETasks
	case "latency":
		return int(float64(p.Rate) * p.LatencyFor.Seconds())
	case "delayed":
		return p.Delayed
	}
	return 0
}

// pgCPUPer1000 is the CPU seconds the system's PostgreSQL backends spent
// per 1,000 tasks of the run (0 when the scenario has no task count).
func pgCPUPer1000(p params, scenario string, u usage) float64 {
	return cpuPer1000(p, scenario, u.PGCPU)
}

// procCPUPer1000 is the CPU seconds of the system's process per 1,000
// tasks of the run: the rota server's, or the whole River child's (its
// load and workers included).
func procCPUPer1000(p params, scenario string, u usage) float64 {
	return cpuPer1000(p, scenario, u.ProcCPU)
}

// cpuPer1000 is secs CPU seconds per 1,000 tasks of the run (0 when the
// scenario has no task count).
func cpuPer1000(p params, scenario string, secs float64) float64 {
	n := scenarioTasks(p, scenario)
	if n <= 0 {
		return 0
	}
	return secs * 1000 / float64(n)
}

// cases lists what a run measures, Rota's cases next to River's.
func cases(p params, scenarios, systems map[string]bool) []caseSpec {
	var out []caseSpec
	add := func(c caseSpec) {
		if scenarios[c.Scenario] && systems[c.System] {
			c.P = p
			out = append(out, c)
		}
	}
	sdk := fmt.Sprintf("rotaworker, concurrency %d", p.SDKConcurrency)
	for _, s := range []string{"submit-single", "submit-batch"} {
		add(caseSpec{System: "rota", Scenario: s, Variant: "rotaclient"})
		add(caseSpec{System: "river", Scenario: s, Variant: "insert-only client"})
	}
	add(caseSpec{System: "rota", Scenario: "e2e", Raw: true,
		Variant: fmt.Sprintf("raw HTTP worker, %d loops × claim max 100", p.RawLoops)})
	add(caseSpec{System: "rota", Scenario: "e2e", Raw: true, Batch: true,
		Variant: fmt.Sprintf("raw HTTP worker, %d loops × claim max 100, batch reports", p.RawLoops)})
	add(caseSpec{System: "rota", Scenario: "e2e", Variant: sdk})
	for _, tuned := range []bool{false, true} {
		for _, n := range []int{100, 1000} {
			add(caseSpec{System: "river", Scenario: "e2e", Workers: n, Tuned: tuned, Variant: riverVariant(tuned, n)})
		}
	}
	for _, s := range []string{"latency", "delayed"} {
		add(caseSpec{System: "rota", Scenario: s, Variant: sdk})
		for _, tuned := range []bool{false, true} {
			add(caseSpec{System: "river", Scenario: s, Workers: 100, Tuned: tuned, Variant: riverVariant(tuned, 100)})
		}
	}
	sqliteCases(p, add)
	redisCases(p, add)
	return out
}

// sqliteCases are the embedded cases: Rota's embedded store (full
// durability) next to River on SQLite (riversqlite, tuned), each system
// on a fresh file, passed to add.
func sqliteCases(p params, add func(caseSpec)) {
	sdk := fmt.Sprintf("rotaworker, concurrency %d", p.SDKConcurrency)
	for _, s := range []string{"submit-single", "submit-batch"} {
		add(caseSpec{System: "rota-sqlite", Scenario: s, Variant: "rotaclient"})
		add(caseSpec{System: "river-sqlite", Scenario: s, Variant: "insert-only client"})
	}
	add(caseSpec{System: "rota-sqlite", Scenario: "e2e", Raw: true, Batch: true,
		Variant: fmt.Sprintf("raw HTTP worker, %d loops × claim max 100, batch reports", p.RawLoops)})
	add(caseSpec{System: "rota-sqlite", Scenario: "e2e", Variant: sdk})
	for _, n := range []int{100, 1000} {
		add(caseSpec{System: "river-sqlite", Scenario: "e2e", Workers: n, Tuned: true, Variant: riverVariant(true, n)})
	}
	for _, s := range []string{"latency", "delayed"} {
		add(caseSpec{System: "rota-sqlite", Scenario: s, Variant: sdk})
		add(caseSpec{System: "river-sqlite", Scenario: s, Workers: 100, Tuned: true, Variant: riverVariant(true, 100)})
	}
}

func riverVariant(tuned bool, workers int) string {
	if tuned {
		return fmt.Sprintf("tuned, %d workers", workers)
	}
	return fmt.Sprintf("defaults, %d workers", workers)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// options are the command line of the program.
type options struct {
	p         params
	runs      int
	rotaBin   string
	readme    string
	scenarios string
	systems   string
	perfDir   string
	child     bool
	poolMax   int
}

// parseFlags reads the command line.
func parseFlags() options {
	var o options
	pg := os.Getenv("ROTA_BENCH_POSTGRES")
	if pg == "" {
		pg = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	p := &o.p
	flag.StringVar(&p.PG, "postgres", pg, "PostgreSQL URL shared by both systems (env ROTA_BENCH_POSTGRES)")
	flag.IntVar(&o.runs, "runs", 3, "runs of each case; figures are medians")
	flag.IntVar(&p.Clients, "clients", 32, "concurrent submitting clients")
	flag.IntVar(&p.SubmitTasks, "submit-tasks", 10_000, "tasks per single-insert submit run")
	flag.IntVar(&p.BatchTasks, "batch-tasks", 50_000, "tasks per batched submit run")
	flag.IntVar(&p.BatchSize, "batch-size", 100, "tasks per batch in the batched submit")
	flag.IntVar(&p.E2ETasks, "e2e-tasks", 100_000, "tasks per end-to-end run")
	flag.IntVar(&p.E2EBatch, "e2e-batch", 500, "tasks per insert batch in the end-to-end runs")
	flag.IntVar(&p.E2EInserters, "e2e-inserters", 8, "concurrent inserters in the end-to-end runs")
	flag.IntVar(&p.RawLoops, "raw-loops", 4, "claim loops of Rota's raw-HTTP worker")
	flag.IntVar(&p.SDKConcurrency, "concurrency", 256, "concurrency of the rotaworker SDK worker")
	flag.IntVar(&p.Rate, "rate", 500, "tasks/s of the latency scenario")
	flag.DurationVar(&p.LatencyFor, "latency-for", 10*time.Second, "length of the latency scenario")
	flag.DurationVar(&p.LatencyWarmup, "latency-warmup", 2*time.Second,
		"load at the latency scenario's rate before its measure, not measured: a fresh schema's first second (each system's connections planning their statements, its first ANALYZEs) is not the steady state (0: none)")
	flag.IntVar(&p.Delayed, "delayed", 2000, "tasks of the delayed scenario")
	flag.DurationVar(&p.DelayedOver, "delayed-over", 10*time.Second, "window the delayed tasks are due in")
	flag.DurationVar(&p.Warmup, "warmup", time.Second, "idle time between starting workers and the measure")
	flag.StringVar(&o.rotaBin, "rota-bin", "", "rota binary to run (default: go build ./cmd/rota of this checkout)")
	flag.StringVar(&o.readme, "readme", "", `README to write the results into (default bench/peers/README.md of this checkout; "-" for none)`)
	flag.StringVar(&o.scenarios, "scenarios", "submit,e2e,latency,delayed", "scenarios to run (submit = submit-single,submit-batch)")
	flag.StringVar(&o.systems, "systems", "rota,river", "systems to run")
	flag.StringVar(&o.perfDir, "perf", "", "record the rota server's CPU with perf (perf record -g) during its e2e and latency runs into this directory (skews the figures; for profiling only)")
	flag.IntVar(&o.poolMax, "pool-max-conns", 0, "set pool_max_conns in the PostgreSQL URL of both systems (default: pgxpool's, max(4, CPUs))")
	flag.BoolVar(&o.child, "river-child", false, "internal: run one River case read as JSON from stdin")
	flag.Parse()
	return o
}

func run() error {
	o := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.child {
		return riverChild(ctx)
	}
	if o.runs < 1 {
		return errors.New("--runs must be at least 1")
	}
	if o.poolMax > 0 {
		pg, err := withPoolMax(o.p.PG, o.poolMax)
		if err != nil {
			return err
		}
		o.p.PG = pg
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if o.readme == "" {
		o.readme = filepath.Join(root, "bench", "peers", "README.md")
	}
	admin, err := pgxpool.New(ctx, o.p.PG)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer admin.Close()
	f := newFacts(o)
	if err := f.gather(ctx, admin, root); err != nil {
		return err
	}
	fmt.Printf("PostgreSQL %s, synchronous_commit = %s; River %s; %d CPUs; load average %s\n",
		f.PGVersion, f.SyncCommit, f.RiverVersion, f.NProc, f.LoadStart)

	if o.rotaBin == "" && (set(o.systems)["rota"] || set(o.systems)["rota-sqlite"] || set(o.systems)["rota-redis"]) {
		tmp, err := os.MkdirTemp("", "rota-peers")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if o.rotaBin, err = buildRota(ctx, root, tmp); err != nil {
			return err
		}
	}

	specs := cases(o.p, set(expandScenarios(o.scenarios)), set(o.systems))
	if len(specs) == 0 {
		return errors.New("no case selected")
	}
	results, failures, err := runCases(ctx, o, specs, admin)
	if err != nil {
		return err
	}
	f.LoadEnd = loadAvg()
	f.Finished = time.Now()
	return writeReport(o.readme, f, specs, results, failures)
}

// expandScenarios expands "submit" in a comma-separated list of scenarios
// to its two cases; the cases named alone stay as they are.
func expandScenarios(list string) string {
	var out []string
	for _, sc := range strings.Split(list, ",") {
		if strings.TrimSpace(sc) == "submit" {
			out = append(out, "submit-single", "submit-batch")
			continue
		}
		out = append(out, sc)
	}
	return strings.Join(out, ",")
}

// withPoolMax returns the PostgreSQL URL pg with pool_max_conns set to n.
func withPoolMax(pg string, n int) (string, error) {
	u, err := url.Parse(pg)
	if err != nil {
		return "", fmt.Errorf("--postgres: %w", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// newFacts returns the facts known before the first run: the command, the
// start, the load, the CPUs and the pool size.
func newFacts(o options) facts {
	f := facts{Started: time.Now(), LoadStart: loadAvg(), NProc: runtime.NumCPU(), Runs: o.runs,
		Command: "cd bench/peers && go run . " + strings.Join(os.Args[1:], " ")}
	f.Pool = fmt.Sprintf("pgxpool's default size, max(4, CPUs) = %d connections", max(4, runtime.NumCPU()))
	if o.poolMax > 0 {
		f.Pool = fmt.Sprintf("pool_max_conns=%d", o.poolMax)
	}
	return f
}

// buildRota builds the rota binary of the checkout at root into dir and
// returns its path.
func buildRota(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "rota")
	fmt.Println("building rota from", root)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/rotahq/rota/cmd/rota")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build rota: %w", err)
	}
	return bin, nil
}

// runCases runs every case o.runs times, round-robin, and returns each
// case's results (indexed like specs) and the failed runs; only the end of
// ctx stops it early.
func runCases(ctx context.Context, o options, specs []caseSpec, admin *pgxpool.Pool) ([][]caseResult, []string, error) {
	results := make([][]caseResult, len(specs))
	var failures []string
	for r := 1; r <= o.runs; r++ {
		for i, spec := range specs {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			spec.Schema = fmt.Sprintf("peers_%s_%d_%s", spec.System, r, randHex(4))
			spec.AppName = "peers-" + spec.Schema
			title := fmt.Sprintf("run %d/%d: %s — %s, %s", r, o.runs, spec.Scenario, spec.System, spec.Variant)
			fmt.Println(title + "…")
			var res caseResult
			var err error
			switch spec.System {
			case "rota", "rota-sqlite":
				res, err = runRota(ctx, o.rotaBin, spec, admin, o.perfDir, r)
			case "rota-redis", "asynq":
				res, err = runOnRedis(ctx, o.rotaBin, spec, r)
			default:
				res, err = runRiverChild(ctx, spec)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "  FAILED: %v\n", err)
				failures = append(failures, fmt.Sprintf("%s: %v", title, err))
				continue
			}
			results[i] = append(results[i], res)
			printResult(res, pgCPUPer1000(spec.P, spec.Scenario, res.Usage), procCPUPer1000(spec.P, spec.Scenario, res.Usage))
		}
	}
	return results, failures, nil
}

// printResult prints one run's metrics and resources on one line;
// pgPer1000 and procPer1000 are the PostgreSQL and the system process CPU
// seconds per 1,000 tasks.
func printResult(res caseResult, pgPer1000, procPer1000 float64) {
	var parts []string
	for _, m := range res.Metrics {
		parts = append(parts, fmt.Sprintf("%s %s %s", m.Name, format(m.Value), m.Unit))
	}
	fmt.Printf("  %s; peak RSS %.0f MiB; CPU %.2f cores (+ bench %.2f, PostgreSQL %.2f; PostgreSQL %.3f, system %.3f CPU s per 1,000 tasks)\n",
		strings.Join(parts, ", "), float64(res.PeakRSSKiB)/1024, cores(res.Usage.ProcCPU, res.Usage),
		cores(res.Usage.BenchCPU, res.Usage), cores(res.Usage.PGCPU, res.Usage), pgPer1000, procPer1000)
}

// writeReport prints the report and writes it into the README readme
// ("-": none); it fails when any run failed.
func writeReport(readme string, f facts, specs []caseSpec, results [][]caseResult, failures []string) error {
	var out bytes.Buffer
	report(&out, f, specs, results, failures)
	fmt.Print("\n" + out.String())
	if readme != "-" {
		if err := writeReadme(readme, out.String()); err != nil {
			return err
		}
		fmt.Println("results written into", readme)
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d case runs failed", len(failures))
	}
	return nil
}

func cores(cpu float64, u usage) float64 {
	if u.Wall <= 0 {
		return 0
	}
	return cpu / u.Wall
}

func set(list string) map[string]bool {
	m := map[string]bool{}
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			m[s] = true
		}
	}
	return m
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// repoRoot finds the root of the Rota checkout: the nearest directory at or
// above the working directory whose go.mod is module github.com/rotahq/rota.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/rotahq/rota\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run inside the Rota checkout (no go.mod of github.com/rotahq/rota above the working directory)")
		}
		dir = parent
	}
}

// facts describe the machine and the software measured.
type facts struct {
	Command            string
	Started, Finished  time.Time
	NProc, Runs        int
	LoadStart, LoadEnd string
	PGVersion          string
	SyncCommit         string
	RiverVersion       string
	GoVersion          string
	RotaCommit         string
	MemTotal, CPUModel string
	Pool               string
}

func (f *facts) gather(ctx context.Context, admin *pgxpool.Pool, root string) error {
	if err := admin.QueryRow(ctx, `SHOW server_version`).Scan(&f.PGVersion); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := admin.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&f.SyncCommit); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	f.RiverVersion = "?"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				f.RiverVersion = d.Version
			}
		}
	}
	f.GoVersion = runtime.Version()
	f.RotaCommit = "?"
	if b, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		f.RotaCommit = strings.TrimSpace(string(b))
		if b, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(b) > 0 {
			f.RotaCommit += " plus uncommitted changes in the working tree"
		}
	}
	f.MemTotal, f.CPUModel = procField("/proc/meminfo", "MemTotal"), procField("/proc/cpuinfo", "model name")
	return nil
}

// procField returns the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// row is one line of the results table: one metric of one case.
type row struct {
	spec   caseSpec
	metric string
	unit   string
	runs   []float64
}

// rows gathers each case's metrics across runs, in the order measured.
func rows(specs []caseSpec, results [][]caseResult) []row {
	var out []row
	for i, spec := range specs {
		idx := map[string]int{}
		for _, res := range results[i] {
			for _, m := range res.Metrics {
				j, ok := idx[m.Name]
				if !ok {
					j = len(out)
					idx[m.Name] = j
					out = append(out, row{spec: spec, metric: m.Name, unit: m.Unit})
				}
				out[j].runs = append(out[j].runs, m.Value)
			}
		}
	}
	return out
}

// find returns the median of a metric of the case matching, or false.
func find(rs []row, system, scenario, variant, metric string) (float64, bool) {
	for _, r := range rs {
		if r.spec.System == system && r.spec.Scenario == scenario && r.metric == metric &&
			(variant == "" || r.spec.Variant == variant) {
			return median(r.runs), true
		}
	}
	return 0, false
}

// report writes the Markdown report: facts, results, resources, goals.
func report(w io.Writer, f facts, specs []caseSpec, results [][]caseResult, failures []string) {
	p := specs[0].P
	rs := rows(specs, results)
	fmt.Fprintf(w, "Command: `%s` (%d run(s) of each case, %s to %s UTC, %.0f min)\n\n", f.Command, f.Runs,
		f.Started.UTC().Format("2006-01-02 15:04"), f.Finished.UTC().Format("15:04"), f.Finished.Sub(f.Started).Minutes())
	fmt.Fprintf(w, "Machine: `nproc` = %d (%s), %s RAM; load average %s at the start, %s at the end.  \n",
		f.NProc, f.CPUModel, f.MemTotal, f.LoadStart, f.LoadEnd)
	fmt.Fprintf(w, "PostgreSQL %s, `synchronous_commit` = %s (both systems commit synchronously).  \n", f.PGVersion, f.SyncCommit)
	fmt.Fprintf(w, "Connection pools of both systems: %s plus one dedicated LISTEN connection (the rota server's; River's when it runs workers).  \n", f.Pool)
	fmt.Fprintf(w, "River %s (riverpgxv5); Rota at %s; %s.\n\n", f.RiverVersion, f.RotaCommit, f.GoVersion)

	fmt.Fprintln(w, "### Results (medians; every run in the last column)")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| scenario\t system\t setup\t metric\t median\t runs\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---:\t---\t")
	for _, r := range rs {
		var runs []string
		for _, v := range r.runs {
			runs = append(runs, format(v))
		}
		fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s %s\t %s\t\n", scenarioTitle(p, r.spec.Scenario), r.spec.System, r.spec.Variant,
			r.metric, format(median(r.runs)), r.unit, strings.Join(runs, ", "))
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "### Resources (medians over runs)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Peak RSS is VmHWM of the system's process at the end of the run: the `rota server` process (Rota's")
	fmt.Fprintln(w, "workers and load run in this program, not counted there), or the River child process (River is a library:")
	fmt.Fprintln(w, "its workers and the load run in that process). CPU is in cores (CPU seconds / wall seconds) over the")
	fmt.Fprintln(w, "measured window, from /proc/<pid>/stat; PostgreSQL is the backends of that system's connections only")
	fmt.Fprintln(w, "(utime + stime of each backend in pg_stat_activity with the system's application_name, not")
	fmt.Fprintln(w, "pg_stat_statements), also given as CPU seconds per 1,000 tasks of the scenario (the cost a task asks")
	fmt.Fprintln(w, "of PostgreSQL, whatever the machine's other load does to the rates); the system process's CPU is given")
	fmt.Fprintln(w, "per 1,000 tasks too (River's includes its load and workers, Rota's is the server alone).")
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| scenario\t system\t setup\t peak RSS\t system process CPU\t system process CPU s / 1,000 tasks\t bench process CPU\t PostgreSQL backends CPU\t PostgreSQL CPU s / 1,000 tasks\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t")
	for i, spec := range specs {
		if len(results[i]) == 0 {
			continue
		}
		var rss, proc, prock, bench, pgc, pgk []float64
		for _, res := range results[i] {
			pgk = append(pgk, pgCPUPer1000(spec.P, spec.Scenario, res.Usage))
			prock = append(prock, procCPUPer1000(spec.P, spec.Scenario, res.Usage))
			rss = append(rss, float64(res.PeakRSSKiB)/1024)
			proc = append(proc, cores(res.Usage.ProcCPU, res.Usage))
			bench = append(bench, cores(res.Usage.BenchCPU, res.Usage))
			pgc = append(pgc, cores(res.Usage.PGCPU, res.Usage))
		}
		benchCell := "(in the process)"
		if strings.HasPrefix(spec.System, "rota") {
			benchCell = format(median(bench))
		}
		pgCell, pgkCell := format(median(pgc)), fmt.Sprintf("%.3f", median(pgk))
		if strings.HasSuffix(spec.System, "-sqlite") {
			pgCell, pgkCell = "(no server)", "–"
		}
		fmt.Fprintf(tw, "| %s\t %s\t %s\t %.0f MiB\t %s\t %.3f\t %s\t %s\t %s\t\n", scenarioTitle(p, spec.Scenario), spec.System, spec.Variant,
			median(rss), format(median(proc)), median(prock), benchCell, pgCell, pgkCell)
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "### Rota's goals")
	fmt.Fprintln(w)
	goals(w, rs, p)
	if len(failures) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "### Failed runs")
		fmt.Fprintln(w)
		for _, s := range failures {
			fmt.Fprintln(w, "- "+s)
		}
	}
}

// goals compares Rota with the goals of issue 4.
func goals(w io.Writer, rs []row, p params) {
	best := func(system string, variants ...string) (float64, string) {
		var v float64
		var which string
		for _, r := range rs {
			if r.spec.System != system || r.spec.Scenario != "e2e" || r.unit != "tasks/s" {
				continue
			}
			if len(variants) > 0 && !slices.Contains(variants, r.spec.Variant) {
				continue
			}
			if m := median(r.runs); m > v {
				v, which = m, r.spec.Variant
			}
		}
		return v, which
	}
	verdict := func(ok bool) string {
		if ok {
			return "**met**"
		}
		return "**not met**"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| goal\t Rota here\t River tuned here\t River reference (issue)\t met?\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t")
	rota, rotaV := best("rota")
	river, riverV := best("river", riverVariant(true, 100), riverVariant(true, 1000))
	if rota > 0 && river > 0 {
		fmt.Fprintf(tw, "| e2e throughput ≥ 2× River tuned\t %s tasks/s (%s)\t %s tasks/s (%s)\t ~10,300 jobs/s (100 workers)\t %s: %.2f× River here, %.2f× the reference\t\n",
			format(rota), rotaV, format(river), riverV, verdict(rota >= 2*river && rota >= 2*10300), rota/river, rota/10300)
	}
	lat := fmt.Sprintf("enqueue→start at %d/s p99", p.Rate)
	if v, ok := find(rs, "rota", "latency", "", lat); ok {
		rv, _ := find(rs, "river", "latency", riverVariant(true, 100), lat)
		fmt.Fprintf(tw, "| enqueue→start p99 ≤ 5 ms\t %s ms\t %s ms\t ~10 ms\t %s\t\n", format(v), format(rv), verdict(v <= 5))
	}
	lite, liteV := best("rota-sqlite")
	riverLite, riverLiteV := best("river-sqlite")
	if lite > 0 && riverLite > 0 {
		fmt.Fprintf(tw, "| embedded e2e ≥ 15,000 tasks/s and ≥ 2× River on SQLite tuned (issue 13)\t %s tasks/s (%s)\t %s tasks/s (%s, SQLite)\t –\t %s: %.2f× River on SQLite here\t\n",
			format(lite), liteV, format(riverLite), riverLiteV, verdict(lite >= 15000 && lite >= 2*riverLite), lite/riverLite)
	}
	if v, ok := find(rs, "rota", "delayed", "", "lateness p99"); ok {
		rv, _ := find(rs, "river", "delayed", riverVariant(true, 100), "lateness p99")
		fmt.Fprintf(tw, "| delayed-task lateness p99 ≤ 10 ms\t %s ms\t %s ms\t ~60 ms\t %s\t\n", format(v), format(rv), verdict(v <= 10))
	}
	tw.Flush()
}

// Markers of the generated part of the README; the text around them is
// written by hand and kept.
const (
	beginMark = "<!-- peers:results:begin (written by `go run .`; edit outside these markers) -->"
	endMark   = "<!-- peers:results:end -->"
)

// writeReadme replaces the generated part of path (or appends it).
func writeReadme(path, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	section := beginMark + "\n\n" + body + "\n" + endMark
	s := string(old)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + section + s[j+len(endMark):]
	case s == "":
		s = "# Rota vs River\n\n" + section + "\n"
	default:
		s = strings.TrimRight(s, "\n") + "\n\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// runRiverChild runs one River case in a child process (this program with
// --river-child), so that the child's peak RSS is that case's alone.
func runRiverChild(ctx context.Context, spec caseSpec) (caseResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return caseResult{}, err
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return caseResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "--river-child")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return caseResult{}, fmt.Errorf("river child: %w", err)
	}
	var res caseResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return caseResult{}, fmt.Errorf("river child: bad output %q: %w", out.String(), err)
	}
	return res, nil
}
