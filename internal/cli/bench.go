package cli

import (
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota/internal/bench"
)

func newBenchCmd(env Env) *cobra.Command {
	var (
		cfg        bench.Config
		cpuProfile string
		traceFile  string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and latency (starts an in-process server unless --server is given)",
		Long: `Measure Rota as its users feel it, each scenario repeated --runs times and quoted as the
median: submit throughput (single requests from --clients clients, and batches of 100),
end-to-end no-op throughput through the Go SDK worker (--e2e-tasks), enqueue→start latency
p50/p99/max at a steady --rate with idle workers, and the lateness of --delayed tasks due at
exact instants over --delayed-over; and, asked for with --scenario scale, the claim + complete
rate with --scale-waiting tasks waiting (default 1,000 and 1,000,000) and the memory of the deep
queue. Without --server it starts a server in this process on a
fresh embedded store with full durability (--relaxed to compare), or with --store on a fresh
schema of a PostgreSQL database. Each scenario also reports its cost per task: HTTP requests,
and for an in-process server the store's statements, round trips and commits (on the
embedded store each commit is one WAL fsync), PostgreSQL's row versions and HOT updates
(pg_stat_user_tables deltas), the process's CPU time and its peak RSS during the scenario
(server and load together; Linux). With --server, the server's CPU seconds per 1,000 tasks and
its peak RSS (sampled every 100 ms) come from its /metrics. It prints a Markdown table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags(), env.Getenv); err != nil {
				return err
			}
			cfg.Out = env.Stdout
			stopProfile, err := startRecording(cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			stopTrace, err := startRecording(traceFile, trace.Start, trace.Stop)
			if err != nil {
				stopProfile()
				return err
			}
			defer stopTrace()
			_, err = bench.Run(cmd.Context(), cfg)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (client and in-process server) to this file")
	f.StringVar(&traceFile, "trace", "", "write a Go execution trace of the whole run to this file (go tool trace; -pprof=sync, net or sched tells where a request waits)")
	f.StringVar(&cfg.Server, "server", "", "URL of a running server to measure (default: start one in-process)")
	f.BoolVar(&cfg.Relaxed, "relaxed", false, "in-process server with relaxed durability (no fsync per commit)")
	f.StringVar(&cfg.Store, "store", "", "in-process server on this PostgreSQL URL (a fresh schema, dropped at the end), MySQL/MariaDB or MongoDB URL (its database as it is) or Redis URL (redis://host:6379/N: a fresh key prefix, deleted at the end) instead of an embedded store")
	f.IntVar(&cfg.Runs, "runs", 3, "runs of each scenario; figures are medians")
	f.StringSliceVar(&cfg.Scenarios, "scenario", nil, "scenarios to run: submit, e2e, latency, delayed, scale (default all but scale)")
	f.IntVar(&cfg.Clients, "clients", 32, "concurrent submitting clients")
	f.IntVar(&cfg.SubmitTasks, "submit-tasks", 10_000, "tasks per submit run")
	f.IntVar(&cfg.E2ETasks, "e2e-tasks", 100_000, "tasks per end-to-end run")
	f.IntVar(&cfg.Concurrency, "concurrency", 256, "handler concurrency of the SDK worker")
	f.IntVar(&cfg.Rate, "rate", 500, "tasks/s of the latency scenario")
	f.DurationVar(&cfg.LatencyFor, "latency-for", 10*time.Second, "duration of the latency scenario")
	f.IntVar(&cfg.Delayed, "delayed", 2000, "delayed tasks")
	f.DurationVar(&cfg.DelayedOver, "delayed-over", 10*time.Second, "window over which the delayed tasks are due")
	f.IntSliceVar(&cfg.ScaleWaiting, "scale-waiting", []int{1000, 1_000_000}, "queue depths of the scale scenario (tasks waiting while it claims)")
	f.IntVar(&cfg.ScaleTasks, "scale-tasks", 20_000, "tasks claimed and completed at each depth of the scale scenario")
	f.DurationVar(&cfg.SampleEvery, "sample-every", 100*time.Millisecond, "with --server: how often to read its /metrics for its peak RSS (each read counts the store's tasks: make it rarer with a deep queue)")
	annotateEnv(cmd)
	return cmd
}

// startRecording starts a recording of the run (a CPU profile, an
// execution trace) into a new file at path with start; the function it
// returns stops it with stop and closes the file. An empty path records
// nothing.
func startRecording(path string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		stop()
		f.Close()
	}, nil
}
