package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/httpapi"
	"github.com/rotahq/rota/internal/server"
)

// serverFlags are the flags of rota server: the server's Config and the
// few settings of the process around it.
type serverFlags struct {
	cfg        server.Config
	durability string
	logLevel   string
	logFormat  string
	grace      time.Duration
	debug      string
	memLimit   int64 // MiB; 0: none
	gcPercent  int   // 0: the runtime's (GOGC, else 100)
}

// DefaultMemoryLimitMiB is rota server's default soft memory limit (see
// --memory-limit-mib).
const DefaultMemoryLimitMiB = 64

// DefaultGCPercent is rota server's default garbage collection target (see
// --gc-percent). The server's live heap is small at any queue depth (the
// queue is in the store), so what its RSS peaks at under load is the
// garbage between collections, which GOGC's 100 lets grow to the live heap
// again. At 50, measured with bench/peers e2e (10,000 tasks, one run each,
// loaded machine): peak RSS 55–64 MiB against 67–69 at 100, CPU per task
// the same within noise (collections of a small heap are cheap).
const DefaultGCPercent = 50

func newServerCmd(env Env) *cobra.Command {
	var sf serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Rota server (HTTP API, dispatcher, scheduler)",
		Long: `Run a Rota server. By default it keeps its state in an embedded SQLite store
under --data and serves the API on --listen. SIGINT or SIGTERM stop it gracefully:
it stops handing out work, finishes in-flight requests (up to --shutdown-timeout)
and closes the store; a second signal stops it at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags(), env.Getenv); err != nil {
				return err
			}
			return sf.run(cmd.Context(), env)
		},
	}
	sf.define(cmd.Flags())
	annotateEnv(cmd)
	return cmd
}

// define defines the flags on f.
func (sf *serverFlags) define(f *pflag.FlagSet) {
	f.StringVar(&sf.cfg.Listen, "listen", "127.0.0.1:8080", "HTTP listen address")
	f.StringVar(&sf.cfg.DataDir, "data", "./rota-data", "directory of the embedded store (rota.db)")
	f.StringVar(&sf.cfg.Store, "store", "sqlite", "store backend: sqlite (in --data), sqlite:PATH, or a URL of a store shared by several nodes: PostgreSQL (postgres://user@host/db), MySQL/MariaDB (mysql://user:pass@host:3306/db, mariadb://...), Redis (redis://host:6379/N, rediss:// for TLS, ?prefix=rota: to share one Redis) or MongoDB (mongodb://host:27017/db)")
	f.StringVar(&sf.cfg.Registry, "registry", "", "cluster registry for node membership, leader election and the live worker registry: etcd://host:2379[,host:2379][/prefix][?worker_ttl=30s] (default: the store)")
	f.StringVar(&sf.cfg.PGSchema, "pg-schema", "public", "PostgreSQL schema of Rota's tables")
	f.StringVar(&sf.durability, "durability", "full", "full: every acknowledged write is synced to disk; relaxed: not synced (a power loss may lose the last writes)")
	f.Int64Var(&sf.cfg.MaxPayload, "max-payload", 1<<20, "largest task payload accepted, in bytes")
	f.DurationVar(&sf.cfg.RetryBackoff, "retry-backoff", time.Second, "base of the exponential retry backoff")
	f.DurationVar(&sf.grace, "shutdown-timeout", 30*time.Second, "how long a graceful stop waits for in-flight requests")
	f.StringVar(&sf.cfg.AuthToken, "auth-token", "", "turn authentication on with this bootstrap admin token (Authorization: Bearer …); make more with rota token create. Empty: no authentication, allowed on a loopback --listen only")
	f.BoolVar(&sf.cfg.InsecureNoAuth, "insecure-no-auth", false, "serve without authentication on a non-loopback --listen anyway (anyone who reaches it is an admin)")
	f.StringVar(&sf.cfg.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	f.StringVar(&sf.cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	f.DurationVar(&sf.cfg.AuditRetention, "audit-retention", server.DefaultAuditRetention, "how long the audit log keeps its records")
	f.DurationVar(&sf.cfg.NoWorkerAfter, "no-worker-after", dispatch.DefaultNoWorkerAfter, "how long a kind's ready tasks may wait with no live worker before the no-worker alarm (kind.no_worker)")
	f.DurationVar(&sf.cfg.EventRetention, "event-retention", server.DefaultEventRetention, "how long the event log keeps events (a stream client reconnecting with an older id reloads)")
	f.StringVar(&sf.cfg.NodeID, "node-id", "", "this node's id in the cluster (default host-pid-random)")
	f.StringVar(&sf.cfg.Advertise, "advertise", "", "address other nodes and the UI show for this node (default the listen address)")
	f.StringSliceVar(&sf.cfg.TargetAllow, "target-allow", nil, "allow schedule targets and push worker addresses to reach this CIDR, address, host or host:port although it is refused by default (loopback, private, link-local, CGNAT, multicast…); repeatable or comma-separated")
	f.DurationVar(&sf.cfg.PushHealthInterval, "push-health-interval", dispatch.DefaultHealthInterval, "how often the leader health-checks each push worker (GET {address}/healthz); two failed checks in a row re-dispatch its runs")
	f.StringVar(&sf.cfg.KindsFile, "kinds-file", "", "declare kinds and their settings from this file (JSON, or YAML if named *.yaml or *.yml), applied at every start: {\"kinds\": [{\"name\": \"email\", \"max_running\": 10}]}")
	f.BoolVar(&sf.cfg.StrictKinds, "strict-kinds", false, "refuse submits of kinds the --kinds-file does not declare")
	f.DurationVar(&sf.cfg.LeaderLease, "leader-lease", 5*time.Second, "leader lease: a dead leader is replaced within about this long")
	defineLimitFlags(f, &sf.cfg.Limits)
	f.StringVar(&sf.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&sf.logFormat, "log-format", "text", "log format: text or json")
	f.IntVar(&sf.gcPercent, "gc-percent", DefaultGCPercent, "garbage collection target of the Go runtime (debug.SetGCPercent, as GOGC): a collection runs when the heap has grown by this percentage of what was live after the last one; lower keeps the peak memory nearer the live heap for a little more CPU. 0: the runtime's default (100). Ignored when GOGC is set")
	f.Int64Var(&sf.memLimit, "memory-limit-mib", DefaultMemoryLimitMiB, "soft limit of the Go runtime's memory in MiB (debug.SetMemoryLimit): the garbage collector runs more often near it instead of letting the heap grow to twice what is live; it never refuses memory (past it the GC takes at most about half the CPU). 0: none. Ignored when GOMEMLIMIT is set")
	f.StringVar(&sf.debug, "debug-listen", "", "serve Go's profiler (/debug/pprof/) on this address, e.g. 127.0.0.1:6060; off when empty; loopback addresses only (it has no authentication)")
}

// run starts the server, serves until ctx ends or the server fails, then
// stops it within the grace period.
func (sf *serverFlags) run(ctx context.Context, env Env) error {
	switch sf.durability {
	case "full":
	case "relaxed":
		sf.cfg.Relaxed = true
	default:
		return usageError("--durability %q: want full or relaxed", sf.durability)
	}
	if sf.debug != "" && !httpapi.IsLoopbackListen(sf.debug) {
		// The profiler has no authentication: it must not be reachable
		// from the network, whatever the API's own settings.
		return usageError("--debug-listen %s: the profiler has no authentication; bind it to a loopback address (127.0.0.1:PORT)", sf.debug)
	}
	logger, err := newLogger(env.Stderr, sf.logLevel, sf.logFormat)
	if err != nil {
		return err
	}
	if sf.gcPercent < 0 {
		return usageError("--gc-percent %d: want 0 (the runtime's default) or more", sf.gcPercent)
	}
	if sf.memLimit < 0 {
		return usageError("--memory-limit-mib %d: want 0 (none) or more", sf.memLimit)
	}
	sf.cfg.Logger = logger
	srv, err := server.New(ctx, sf.cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		srv.Stop(context.WithoutCancel(ctx))
		return err
	}
	sf.applyMemoryLimit(env, logger)
	if sf.debug != "" {
		stop, err := serveDebug(sf.debug, logger.Error)
		if err != nil {
			srv.Stop(context.WithoutCancel(ctx))
			return err
		}
		defer stop()
		logger.Info("debug listener (pprof)", "addr", sf.debug)
	}
	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case serveErr = <-srv.Err():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sf.grace)
	defer cancel()
	if err := srv.Stop(sctx); err != nil && serveErr == nil {
		serveErr = err
	}
	return serveErr
}

// applyMemoryLimit sets the process's soft memory limit from
// --memory-limit-mib (validated by run) unless GOMEMLIMIT set one (the
// runtime read it at start), and its GC target from --gc-percent unless
// GOGC set one. run calls it once the server started, so that
// a server that fails to start leaves the process as it was.
func (sf *serverFlags) applyMemoryLimit(env Env, logger *slog.Logger) {
	switch {
	case env.Getenv("GOMEMLIMIT") != "":
		logger.Info("memory limit from GOMEMLIMIT", "limit_bytes", debug.SetMemoryLimit(-1))
	case sf.memLimit > 0:
		debug.SetMemoryLimit(sf.memLimit << 20)
		logger.Debug("memory limit", "mib", sf.memLimit)
	}
	if env.Getenv("GOGC") == "" && sf.gcPercent > 0 {
		debug.SetGCPercent(sf.gcPercent)
		logger.Debug("gc percent", "percent", sf.gcPercent)
	}
}

// defineLimitFlags defines the flags of the server's resource bounds
// (docs/api.md, "Limits").
func defineLimitFlags(f *pflag.FlagSet, l *server.Limits) {
	f.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "how long a client may take to send a request's headers")
	f.DurationVar(&l.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "close keep-alive connections idle this long")
	f.IntVar(&l.MaxHeaderBytes, "max-header-bytes", httpapi.DefaultMaxHeaderBytes, "largest request line and headers accepted, in bytes (over it: 431)")
	f.Int64Var(&l.MaxInflightBytes, "max-inflight-bytes", httpapi.DefaultMaxInflightBytes, "cap on the request bodies read and handled at once, in bytes (beyond it: 503 with Retry-After)")
	f.DurationVar(&l.WorkerRetention, "worker-retention", server.DefaultWorkerRetention, "how long a worker no longer seen (lost or stopped) stays listed before it is pruned")
}

// serveDebug serves net/http/pprof on addr, apart from the API (no
// authentication there: bind it to loopback). stop closes it.
func serveDebug(addr string, logErr func(msg string, args ...any)) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError("--debug-listen %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logErr("debug listener", "err", err)
		}
	}()
	return func() { hs.Close() }, nil
}
