// Package server is Rota's composition root: it opens the store, starts the
// dispatcher and serves the HTTP API, and shuts them down in the right
// order.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/buildinfo"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/internal/httpapi"
	"github.com/rotahq/rota/internal/leadership"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/netguard"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mongostore"
	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/redisstore"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/ui"
)

// Version is the Rota version this node reports (buildinfo.Get().Version),
// read once at start. New code calls buildinfo.Get() directly.
var Version = buildinfo.Get().Version

// Config configures a Server. Zero values mean the documented defaults.
type Config struct {
	// Listen is the HTTP address (default 127.0.0.1:8080; ":0" picks a port).
	Listen string
	// DataDir holds the embedded store (default ./rota-data).
	DataDir string
	// Store selects the backend: "" or "sqlite" for the embedded store in
	// DataDir, "sqlite:PATH" for another file, or a PostgreSQL URL
	// ("postgres://user@host/db") or a MySQL/MariaDB URL
	// ("mysql://user:pass@host:3306/db", "mariadb://...") for a store shared
	// by several nodes.
	Store string
	// Registry, when set (etcd://host:2379[,host:2379][/prefix]), keeps
	// node membership and leader election in etcd instead of the store
	// (see internal/registry/etcdreg); nodes sharing work use the same one.
	Registry string
	// PGSchema is the PostgreSQL schema holding Rota's tables (default
	// "public"); nodes that share work use the same one.
	PGSchema string
	// Relaxed durability: commits are not synced to disk before they are
	// acknowledged (a power loss may lose the last ones; a crash does not).
	Relaxed bool
	// MaxPayload caps a task's payload in bytes (default 1 MiB).
	MaxPayload int64
	// RetryBackoff is the base of the retry backoff (default 1s).
	RetryBackoff time.Duration
	// ReapInterval bounds how late an expired lease is noticed (default 500ms).
	ReapInterval time.Duration
	// AuthToken, when set, turns authentication on and is the bootstrap
	// admin token: every API request needs it or a token made with POST
	// /api/tokens (Authorization: Bearer, or the UI's cookie); health
	// probes stay open. Empty: authentication is off (every request is an
	// admin), which New allows on a loopback Listen address only, unless
	// InsecureNoAuth.
	AuthToken string
	// InsecureNoAuth lets a server without AuthToken listen on a
	// non-loopback address (a warning is logged at every start).
	InsecureNoAuth bool
	// TLSCert and TLSKey, both set, are the PEM files of the certificate
	// and key the server serves HTTPS with.
	TLSCert, TLSKey string
	// AuditRetention is how long audit records are kept (default 90 days);
	// the leader deletes older ones with its other periodic duties.
	AuditRetention time.Duration
	// NoWorkerAfter is how long a kind's ready tasks may wait with no live
	// worker of the kind before the no-worker alarm (kind.no_worker,
	// rota_kind_no_worker, the UI banner); default 30s. Every node
	// evaluates it from the store; the leader emits its events.
	NoWorkerAfter time.Duration
	// EventRetention is how long the event log keeps events (default
	// DefaultEventRetention, 24 h): a client reconnecting to any node's
	// stream with an older ID is told to reload. The leader deletes older
	// events with its other periodic duties.
	EventRetention time.Duration
	// NodeID names this node in the cluster (default host-pid-random).
	NodeID string
	// Advertise is the address other nodes and the UI show for this node
	// (default: the listen address).
	Advertise string
	// LeaderLease is how long a leader holds its lease without renewing it
	// (default 5s): a dead leader is replaced within that time plus one
	// election tick (a quarter of it).
	LeaderLease time.Duration
	// Limits bounds what clients may make the server hold (see
	// docs/api.md, "Limits").
	Limits Limits
	// TargetAllow lists what schedule targets may reach although the
	// outbound guard refuses it by default (loopback, private, link-local…):
	// CIDRs, addresses, address:port, host names or host:port (see
	// netguard.Config.Allow). Empty: nothing more.
	TargetAllow []string
	// Version is the version this node reports (GET /api/healthz, GET
	// /api/cluster, the UI); default buildinfo.Get().Version.
	Version string
	// KindsFile, when set, declares kinds and their settings (JSON, or YAML
	// for *.yaml and *.yml; see KindSpec): New refuses a bad file and
	// applies a good one, idempotently: every node of a cluster may.
	KindsFile string
	// StrictKinds refuses submits of kinds KindsFile does not declare (400
	// invalid naming kind); it needs a KindsFile.
	StrictKinds bool
	Logger      *slog.Logger
	Clock       clock.Clock
	// Cost, when set, counts the store's statements, round trips and
	// commits (package storecost; `rota bench` reads it). Nil counts
	// nothing.
	Cost *storecost.Counter
	// PushHealthInterval is how often the leader health-checks each push
	// worker (default dispatch.DefaultHealthInterval, 5s); a worker failing
	// two checks in a row is lost and its runs re-dispatched. Push
	// addresses go through the outbound guard and its TargetAllow list.
	PushHealthInterval time.Duration
}

// DefaultEventRetention is how long the event log keeps events by default.
const DefaultEventRetention = 24 * time.Hour

// DefaultAuditRetention is how long audit records are kept by default.
const DefaultAuditRetention = 90 * 24 * time.Hour

// ErrOpenDoor is returned by New for a server that would serve a
// non-loopback address with no credential.
var ErrOpenDoor = errors.New("refusing to serve without authentication on a non-loopback address: " +
	"set --auth-token (ROTA_AUTH_TOKEN), or --insecure-no-auth to accept an open server")

// checkSecurity refuses an open door (no credential on a non-loopback
// listen address) and half a TLS configuration.
func checkSecurity(cfg Config) error {
	if cfg.AuthToken == "" && !cfg.InsecureNoAuth && !httpapi.IsLoopbackListen(cfg.Listen) {
		return fmt.Errorf("listen %s: %w", cfg.Listen, ErrOpenDoor)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	return nil
}

// allowedHosts are the Host names served with authentication off besides
// loopback ones: the advertised host and an explicit listen host.
func allowedHosts(cfg Config) []string {
	var out []string
	for _, addr := range []string{cfg.Advertise, cfg.Listen} {
		if addr == "" {
			continue
		}
		host := addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			host = h
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			continue
		}
		out = append(out, strings.Trim(host, "[]"))
	}
	return out
}

// Server is a running Rota node.
type Server struct {
	cfg   Config
	store store.Store
	disp  *dispatch.Dispatcher
	push  *dispatch.Push // posts the tasks of push kinds to push workers (a leader duty)
	http  *http.Server
	ln    net.Listener
	errc  chan error

	guard *netguard.Guard // the outbound guard of schedule targets
	hub   *events.Hub
	reg   *prometheus.Registry
	sched *metrics.Metrics // the schedule engine's metrics
	mux   *http.ServeMux

	queue *metrics.Queue // the queue metrics, fed by the dispatcher's events

	schedules *scheduling // the cron engine and HTTP executor; nil without store support

	elector *leadership.Elector // cluster membership and leader election

	kinds *declaredKinds // of Config.KindsFile; nil without one
}

// New opens the store and wires the components; Start serves.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8080"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "rota-data"
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.NodeID == "" {
		cfg.NodeID = defaultNodeID()
	}
	if cfg.LeaderLease <= 0 {
		cfg.LeaderLease = leadership.DefaultTTL
	}
	if cfg.Version == "" {
		cfg.Version = buildinfo.Get().Version
	}
	if cfg.AuditRetention <= 0 {
		cfg.AuditRetention = DefaultAuditRetention
	}
	if cfg.EventRetention <= 0 {
		cfg.EventRetention = DefaultEventRetention
	}
	if err := checkSecurity(cfg); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.withDefaults()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	inner := st
	if st, err = withRegistry(ctx, cfg, inner); err != nil {
		inner.Close()
		return nil, err
	}
	s, err := compose(cfg, st)
	if err == nil {
		_, err = s.applyKinds(ctx)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

// compose wires the components over an open store, in order: the server
// shell, telemetry (events and metrics), cluster membership, the
// dispatcher, the schedule engine and executor, and the HTTP handlers.
func compose(cfg Config, st store.Store) (*Server, error) {
	s := &Server{cfg: cfg, store: st, errc: make(chan error, 1)}
	var err error
	if s.guard, err = netguard.New(netguard.Config{Allow: cfg.TargetAllow}); err != nil {
		return nil, fmt.Errorf("target allow list: %w", err)
	}
	if err = s.initTelemetry(); err != nil {
		return nil, err
	}
	if s.elector, err = s.newElector(st); err != nil {
		return nil, err
	}
	if err = s.initDispatcher(); err != nil {
		return nil, err
	}
	if s.schedules, err = s.initSchedules(); err != nil {
		return nil, err
	}
	if s.kinds, err = loadKinds(cfg); err != nil {
		return nil, err
	}
	if err = s.initHTTP(); err != nil {
		return nil, err
	}
	return s, nil
}

// initTelemetry creates the event hub (one event per task or run state
// change, kept in the store's event log and read back by every node's
// live stream: UI, SDK Subscribe) and the metrics registry with the
// schedule and queue metrics.
func (s *Server) initTelemetry() error {
	hub, err := events.New(events.Config{Log: s.store, Now: s.cfg.Clock.Now, Logger: s.cfg.Logger})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	schedMetrics, err := metrics.New(reg)
	if err != nil {
		return err
	}
	queue, err := metrics.NewQueue(reg, s.store, s.cfg.Clock.Now)
	if err != nil {
		return err
	}
	s.hub, s.reg, s.sched, s.queue = hub, reg, schedMetrics, queue
	return nil
}

// initDispatcher creates the dispatcher, whose leader duties follow the
// elector (and carry its term) and whose events go to the hub and the
// queue metrics. It starts as a follower: the first election round runs in
// Start.
func (s *Server) initDispatcher() error {
	disp, err := dispatch.New(dispatch.Config{
		Store: s.store, Clock: s.cfg.Clock, Logger: s.cfg.Logger, IDs: &rota.IDGenerator{},
		BackoffBase: s.cfg.RetryBackoff, ReapInterval: s.cfg.ReapInterval, AuditRetention: s.cfg.AuditRetention,
		EventRetention: s.cfg.EventRetention, EventsAppended: s.hub.Wake,
		WorkerRetention: s.cfg.Limits.WorkerRetention,
		NoWorkerAfter:   s.cfg.NoWorkerAfter,
		NoWorkerChanged: s.queue.SetNoWorker,
		Leader:          s.elector.Leading,
		Events:          func(ev rota.Event) { s.hub.Publish(ev); s.queue.Observe(ev); s.sched.ObserveEvent(ev) },
	})
	if err != nil {
		return err
	}
	disp.SetLeader(false)
	s.elector.OnChange(disp.SetLeader)
	s.disp = disp
	// Push deliveries and health checks dial through the outbound guard.
	s.push, err = dispatch.NewPush(dispatch.PushConfig{Dispatcher: disp, Client: s.guard.Client(),
		HealthInterval: s.cfg.PushHealthInterval})
	return err
}

// initHTTP mounts the API, the event stream, the metrics and the UI behind
// the authenticator, and creates the HTTP server.
func (s *Server) initHTTP() error {
	cfg := s.cfg
	auth := httpapi.NewAuthenticator(httpapi.AuthConfig{
		BootstrapToken: cfg.AuthToken, Tokens: s.store, AllowedHosts: allowedHosts(cfg),
		Now: cfg.Clock.Now, Logger: cfg.Logger,
	})
	api, err := httpapi.New(httpapi.Config{
		Store: s.store, Dispatcher: s.disp, Clock: cfg.Clock, Logger: cfg.Logger,
		MaxPayload: cfg.MaxPayload, Version: cfg.Version, NodeID: cfg.NodeID, Durability: durability(s.store, cfg),
		MaxInflightBytes: cfg.Limits.MaxInflightBytes,
		ScheduleChanged:  s.schedules.changed,
		TargetGuard:      s.guard,
		Auth:             auth,
		Handlers: map[string]http.Handler{
			httpapi.RouteEvents:     s.hub.Handler(),
			httpapi.RouteThroughput: s.hub.ThroughputHandler(),
			httpapi.RouteMetrics: promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
				ErrorHandling: promhttp.ContinueOnError,
				ErrorLog:      slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
			}),
		},
		AcceptKind:      s.kinds.acceptKind(),
		ScheduleEvents:  func(ev rota.Event) { s.hub.Publish(ev); s.queue.Observe(ev) },
		Events:          s.hub.Publish,
		ScheduleMetrics: s.sched,
	})
	if err != nil {
		return err
	}
	uiCfg := ui.Config{Version: cfg.Version, Logger: cfg.Logger, CookieName: httpapi.AuthCookie}
	if auth.Enabled() {
		uiCfg.CheckToken = func(r *http.Request, token string) error {
			_, err := auth.Login(r, token)
			return err
		}
	}
	web, err := ui.New(uiCfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api.Handler())
	mux.Handle("/metrics", api.Handler())
	mux.Handle("/", web.Handler())
	s.mux = mux
	s.http = &http.Server{
		// Cross-origin protection: unsafe requests from other sites
		// (Sec-Fetch-Site / Origin) are refused, so a page elsewhere
		// cannot drive the API through a logged-in browser. Headers over
		// the limit get a 431 envelope from LimitHeaders; net/http's own
		// (plain-text) refusal only past a hard ceiling.
		Handler:           httpapi.LimitHeaders(crossOriginProtection().Handler(mux), cfg.Limits.MaxHeaderBytes),
		MaxHeaderBytes:    httpapi.HardHeaderBytes(cfg.Limits.MaxHeaderBytes),
		ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout,
		IdleTimeout:       cfg.Limits.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	// Open event streams end at shutdown, so that it is not held up.
	s.http.RegisterOnShutdown(s.hub.Close)
	return nil
}

// durabilityReporter is a store that states what an acknowledged write
// means on it (redisstore: "relaxed" unless Redis syncs every write).
type durabilityReporter interface{ Durability() string }

// durability is the durability GET /api/cluster shows for this node.
func durability(st store.Store, cfg Config) string {
	if d, ok := unwrap(st).(durabilityReporter); ok {
		return d.Durability()
	}
	if cfg.Relaxed && (cfg.Store == "" || strings.HasPrefix(cfg.Store, "sqlite")) {
		return httpapi.DurabilityRelaxed
	}
	return httpapi.DurabilityDurable
}

func openStore(ctx context.Context, cfg Config) (store.Store, error) {
	switch {
	case cfg.Store == "" || cfg.Store == "sqlite":
		return sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(cfg.DataDir, "rota.db"), Relaxed: cfg.Relaxed, Cost: cfg.Cost})
	case strings.HasPrefix(cfg.Store, "sqlite:"):
		return sqlitestore.New(ctx, sqlitestore.Config{Path: strings.TrimPrefix(cfg.Store, "sqlite:"), Relaxed: cfg.Relaxed, Cost: cfg.Cost})
	case strings.HasPrefix(cfg.Store, "postgres://"), strings.HasPrefix(cfg.Store, "postgresql://"):
		return pgstore.New(ctx, pgstore.Config{URL: cfg.Store, Schema: cfg.PGSchema, NodeID: cfg.NodeID, Logger: cfg.Logger, Cost: cfg.Cost, WarmConns: true})
	case strings.HasPrefix(cfg.Store, "mysql://"), strings.HasPrefix(cfg.Store, "mariadb://"):
		return mysqlstore.New(ctx, mysqlstore.Config{URL: cfg.Store, NodeID: cfg.NodeID, Logger: cfg.Logger, Cost: cfg.Cost})
	case strings.HasPrefix(cfg.Store, "redis://"), strings.HasPrefix(cfg.Store, "rediss://"):
		return redisstore.New(ctx, redisstore.Config{URL: cfg.Store, NodeID: cfg.NodeID, Logger: cfg.Logger, Cost: cfg.Cost})
	case strings.HasPrefix(cfg.Store, "mongodb://"), strings.HasPrefix(cfg.Store, "mongodb+srv://"):
		return mongostore.New(ctx, mongostore.Config{URL: cfg.Store, NodeID: cfg.NodeID, Logger: cfg.Logger, Cost: cfg.Cost})
	}
	return nil, fmt.Errorf("unknown store %q: use sqlite, sqlite:PATH, a postgres://, mysql:// (mariadb://), redis:// (rediss://) or mongodb:// URL", cfg.Store)
}

// Start binds the listen address (failing at once if it is taken), starts
// the dispatcher and serves in the background.
func (s *Server) Start(ctx context.Context) error {
	if s.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("load --tls-cert/--tls-key: %w", err)
		}
		s.http.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	if err := s.hub.Start(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("start the event stream: %w", err)
	}
	if err := s.disp.Start(ctx); err != nil {
		ln.Close()
		s.hub.Stop(ctx)
		return err
	}
	if err := s.push.Start(ctx); err != nil {
		ln.Close()
		s.disp.Stop()
		s.hub.Stop(ctx)
		return err
	}
	if err := s.schedules.start(ctx); err != nil {
		ln.Close()
		s.push.Stop()
		s.disp.Stop()
		s.hub.Stop(ctx)
		return err
	}
	s.ln = ln
	// Join the cluster (and, alone, become its leader) before serving, so
	// that the duties run from the first request on.
	if err := s.elector.Start(ctx); err != nil {
		ln.Close()
		s.schedules.stop()
		s.push.Stop()
		s.disp.Stop()
		s.hub.Stop(ctx)
		return err
	}
	// Serve sets up HTTP/2 by writing TLSConfig: read it before.
	tls := s.http.TLSConfig != nil
	go func() {
		var err error
		if tls {
			err = s.http.ServeTLS(ln, "", "")
		} else {
			err = s.http.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
		close(s.errc)
	}()
	bi := buildinfo.Get()
	s.cfg.Logger.Info("rota server started", "addr", s.Addr(), "store", s.describeStore(),
		"version", s.cfg.Version, "commit", bi.Commit, "build_date", bi.BuildDate, "go_version", bi.GoVersion,
		"tls", tls, "auth", s.cfg.AuthToken != "")
	if s.cfg.AuthToken == "" && s.cfg.InsecureNoAuth && !httpapi.IsLoopbackListen(s.cfg.Listen) {
		s.cfg.Logger.Warn("authentication is OFF on a non-loopback address (--insecure-no-auth): anyone who reaches " +
			s.Addr() + " is an admin; set --auth-token")
	}
	return nil
}

func (s *Server) describeStore() string {
	switch {
	case s.cfg.Store == "" || s.cfg.Store == "sqlite":
		return "sqlite:" + filepath.Join(s.cfg.DataDir, "rota.db")
	case strings.HasPrefix(s.cfg.Store, "sqlite:"):
		return s.cfg.Store
	case strings.HasPrefix(s.cfg.Store, "redis"):
		return redisstore.Redact(s.cfg.Store)
	}
	return "postgres (schema " + cmp.Or(s.cfg.PGSchema, "public") + ")" // the URL may hold a password
}

// advertise is the address shown to other nodes.
func (s *Server) advertise() string {
	if s.cfg.Advertise != "" {
		return s.cfg.Advertise
	}
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Listen
}

// NodeID is this node's id.
func (s *Server) NodeID() string { return s.cfg.NodeID }

// IsLeader reports whether this node leads the cluster now.
func (s *Server) IsLeader() bool {
	_, leading := s.elector.Leading()
	return leading
}

// RowWrites returns the row writes the database has counted for each of
// the store's tables (see pgstore.Store.RowWrites), after appending the
// events published so far (so that they count with the work that made
// them); ok is false for a store that cannot tell (the embedded one).
func (s *Server) RowWrites(ctx context.Context) (rows map[string]storecost.Rows, ok bool, err error) {
	rw, ok := unwrap(s.store).(interface {
		RowWrites(context.Context) (map[string]storecost.Rows, error)
	})
	if !ok {
		return nil, false, nil
	}
	// The events of the work done so far are written first, so that
	// their rows are counted with it.
	if err := s.hub.Flush(ctx); err != nil {
		return nil, true, err
	}
	rows, err = rw.RowWrites(ctx)
	return rows, true, err
}

// Addr is the address the server listens on (after Start).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Err reports a serve failure; it is closed when serving ends.
func (s *Server) Err() <-chan error { return s.errc }

// Stop shuts down in order: stop granting leases (waiting claims return
// empty), finish in-flight requests, stop the background loops, close the
// store. ctx bounds the wait for in-flight requests.
func (s *Server) Stop(ctx context.Context) error {
	s.elector.Stop(ctx) // resigns: the duties stop here first
	s.schedules.stop()
	s.push.Stop()
	s.disp.Stop()
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	s.hub.Stop(ctx) // writes the last events before the store closes
	return errors.Join(err, s.store.Close())
}

// crossOriginProtection refuses unsafe requests that a browser marks as
// coming from another site (Sec-Fetch-Site, Origin), with a 403 envelope.
// Non-browser clients (curl, SDKs) send neither header and pass.
func crossOriginProtection() *http.CrossOriginProtection {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, rota.Errorf(rota.CodeForbidden, "cross-site request refused: %s %s came from another origin", r.Method, r.URL.Path))
	}))
	return cop
}
