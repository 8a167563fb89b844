// Package httpapi serves Rota's HTTP API under /api/: tasks, kinds, stats,
// health and the worker protocol (claim, heartbeat, succeed, fail).
//
// Every response is an envelope {"code":0,"message":"ok","data":...}; an
// error has the numeric code of its rota.Code, a message naming what is
// wrong and, for bad input, data {"field": "<json path>"}. docs/api.md is the
// reference of the routes and of the code table.
//
// Each route is a typed endpoint (see mount in endpoint.go): its request is
// read from the path and query, its JSON body is decoded strictly, the
// request is validated, executed and its response encoded. Every error goes
// through writeError (envelope.go), the one place that maps errors to HTTP
// statuses and envelope codes.
//
// Mutations that can change what is claimable go through the
// dispatch.Dispatcher so that waiting workers are woken; reads go to the
// store directly.
package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/netguard"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/store"
)

// DefaultMaxPayload is the default limit, in bytes, of a task's "task"
// value and of a run's "result" value.
const DefaultMaxPayload = 1 << 20

// bodySlack is how much a request body may exceed MaxPayload: room for the
// other fields of a submit around a payload of the maximum size.
const bodySlack = 64 << 10

// Limits of the API's inputs, documented in docs/api.md.
const (
	maxBatch            = 1000        // tasks in one batch submit
	maxReports          = 1000        // reports in one POST /api/runs/reports
	maxListLimit        = 1000        // tasks in one page
	defaultListLimit    = 100         // tasks in a page when limit is absent
	maxRetriesCap       = 1000        // max_retries
	maxWorkersCap       = 1000        // workers
	maxWorkerIDs        = 1000        // entries of worker_ids
	maxHeartbeatTimeout = 3600        // heartbeat_timeout_seconds
	maxTimeoutSeconds   = 366 * 86400 // timeout_seconds
	maxDelaySeconds     = 10 * 366 * 86400
	maxRunAt            = 253402300799 // 9999-12-31T23:59:59Z
	maxKeyLen           = 256          // key, in characters
	maxIDLen            = 256          // worker_id, in characters
	maxAddressLen       = 256          // address, in characters
	maxClaimKinds       = 100          // kinds of one claim
	maxClaim            = 1000         // max of one claim
	maxWaitSeconds      = 60           // wait_seconds of one claim
	maxMessageBytes     = 64 << 10     // longer worker messages are truncated
	maxPriorityFactor   = 100
	maxKindMaxRunning   = 1_000_000
	maxKindRate         = 1_000_000
	maxRetentionSeconds = 100 * 366 * 86400
)

// Config configures an API.
type Config struct {
	// Durability is what an acknowledged write means on the store
	// (DurabilityDurable or DurabilityRelaxed; "" is durable), shown by
	// GET /api/cluster.
	Durability string
	// Store is read directly for queries. Required.
	Store store.Store
	// Dispatcher performs every mutation that can change what is
	// claimable, and the worker protocol. Required; the caller starts and
	// stops it.
	Dispatcher *dispatch.Dispatcher
	// Clock gives the instant used by reads that depend on it (worker
	// liveness, stats ages). Default: the dispatcher's clock, so that both
	// agree.
	Clock clock.Clock
	// Logger receives request logs (debug for successes) and the details
	// of internal errors. Default slog.Default().
	Logger *slog.Logger
	// MaxPayload is the largest "task" value of a submitted task and
	// "result" value of a success report, in bytes (default
	// DefaultMaxPayload). A request body may be up to MaxPayload + 64 KiB.
	MaxPayload int64
	// MaxBatchBytes is the largest body of POST /api/tasks/batch and of
	// POST /api/runs/reports (default 16 MiB, at least the single-request
	// body limit).
	MaxBatchBytes int64
	// BodyReadTimeout bounds the time a client may take to send a request
	// body (default 1 minute), so that a stalled upload cannot hold a
	// handler forever. It does not limit the rest of the request: a
	// long-poll claim may wait longer.
	BodyReadTimeout time.Duration
	// MaxInflightBytes caps the bytes of the request bodies being read and
	// handled at once (default DefaultMaxInflightBytes): beyond it a new
	// body waits up to InflightWait (default DefaultInflightWait) for room,
	// then is refused with 503 unavailable and Retry-After.
	MaxInflightBytes int64
	InflightWait     time.Duration
	// NodeID and Version identify this server in /api/healthz; optional.
	NodeID, Version string
	// Auth identifies the principal of each request and the role table
	// decides what it may do (see roles.go). Nil: no authentication and
	// no Host check, every request is the anonymous admin (tests; a
	// server always sets it).
	Auth *Authenticator
	// Handlers are more routes served by the API's router, keyed by
	// pattern ("GET /metrics"), under the same authentication and role
	// table: the server's event stream, throughput and metrics.
	Handlers map[string]http.Handler
	// ScheduleChanged, when set, is told the id of every schedule created,
	// edited, paused, resumed, triggered or deleted here (the schedule
	// engine reloads it at once instead of at its next poll).
	ScheduleChanged func(id string)
	// TargetGuard refuses schedule targets on refused addresses when they
	// are created or edited (literal addresses and localhost; names are
	// checked when the executor dials them). Default: a guard with no
	// allow list.
	TargetGuard *netguard.Guard
	// AcceptKind, when set, is asked about the kind of every submitted task
	// (POST /api/tasks and each item of POST /api/tasks/batch): false
	// refuses the submit with 400 invalid naming its kind field. Nil
	// accepts every valid kind.
	AcceptKind func(kind string) bool
	// ScheduleEvents, optional, receives the events of the runs that
	// triggers and backfills create (task, schedule.fired,
	// schedule.skipped), as the engine's fires send them.
	ScheduleEvents func(rota.Event)
	// Events, optional, receives the API's own events: the progress of
	// bulk jobs (bulk.progress after each batch, bulk.done at the end),
	// for the cluster's event log.
	Events func(rota.Event)
	// ScheduleMetrics, optional, counts those runs.
	ScheduleMetrics *metrics.Metrics
}

// API is the HTTP API. It is safe for concurrent use; create it with New.
type API struct {
	// All fields are immutable after New.
	store        store.Store
	disp         *dispatch.Dispatcher
	log          *slog.Logger
	now          func() time.Time
	maxPayload   int64
	maxBody      int64
	maxBatchBody int64
	bodyTimeout  time.Duration
	inflight     *inflight    // shared: the in-flight body cap
	health       *writeHealth // shared: the outcome of the last writes
	schedChanged func(id string)
	guard        *netguard.Guard
	auth         *Authenticator
	policies     map[string]policy // the role table, by route pattern
	extra        map[string]http.Handler
	acceptKind   func(kind string) bool // nil: any
	sched        *schedule.Service
	nodeID       string
	version      string
	durability   string
	handler      http.Handler

	// Shared, safe for concurrent use.
	ids rota.IDGenerator // audit record ids

	bulk   bulkJobs         // the bulk jobs of this node
	events func(rota.Event) // Config.Events; never nil

	// Written by routes (in New) only.
	mounted []string // the patterns of every mounted route, in order
}

// New checks cfg, applies its defaults and returns the API.
func New(cfg Config) (*API, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: nil Store")
	}
	if cfg.Dispatcher == nil {
		return nil, errors.New("httpapi: nil Dispatcher")
	}
	a := &API{
		store:      cfg.Store,
		disp:       cfg.Dispatcher,
		log:        cfg.Logger,
		now:        cfg.Dispatcher.Now,
		nodeID:     cfg.NodeID,
		version:    cfg.Version,
		durability: cfg.Durability,

		schedChanged: cfg.ScheduleChanged,
		auth:         cfg.Auth,
		policies:     routePolicies(),
		extra:        cfg.Handlers,
		acceptKind:   cfg.AcceptKind,
		events:       cfg.Events,
	}
	if a.events == nil {
		a.events = func(rota.Event) {}
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if cfg.Clock != nil {
		a.now = cfg.Clock.Now
	}
	a.maxPayload = cfg.MaxPayload
	if a.maxPayload <= 0 {
		a.maxPayload = DefaultMaxPayload
	}
	a.maxBody = a.maxPayload + bodySlack
	a.maxBatchBody = cfg.MaxBatchBytes
	if a.maxBatchBody <= 0 {
		a.maxBatchBody = 16 << 20
	}
	a.maxBatchBody = max(a.maxBatchBody, a.maxBody)
	a.bodyTimeout = cfg.BodyReadTimeout
	if a.bodyTimeout <= 0 {
		a.bodyTimeout = time.Minute
	}
	a.guard = cfg.TargetGuard
	if a.guard == nil {
		g, err := netguard.New(netguard.Config{})
		if err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		a.guard = g
	}
	a.inflight = newInflight(cfg.MaxInflightBytes, cfg.InflightWait)
	a.health = &writeHealth{}
	sched, err := schedule.NewService(schedule.ServiceConfig{
		Store: cfg.Store, Dispatcher: cfg.Dispatcher, Now: a.now, NewID: cfg.Dispatcher.NewID, Metrics: cfg.ScheduleMetrics,
		Events: cfg.ScheduleEvents, Changed: a.changed,
	})
	if err != nil {
		return nil, err
	}
	a.sched = sched
	a.handler = a.routes()
	return a, nil
}

// Handler returns the HTTP handler of the API. It serves the routes under
// /api/; any other path, or an unknown route under /api/, gets a JSON 404
// envelope, and a known route asked with another method a JSON 405 envelope
// with an Allow header. Requests are logged and panics recovered.
func (a *API) Handler() http.Handler { return a.handler }

// routes builds the router and wraps it in the middleware.
func (a *API) routes() http.Handler {
	mux := http.NewServeMux()
	a.mountTasks(mux)
	a.mountBulk(mux)
	a.mountHistory(mux)
	a.mountKinds(mux)
	a.mountWorkers(mux)
	a.mountPush(mux)
	a.mountOps(mux)
	a.mountVersion(mux)
	a.mountCluster(mux)
	a.mountSchedules(mux)
	a.mountAccess(mux)
	a.mountDocs(mux)
	for pattern, h := range a.extra {
		a.mountHandler(mux, pattern, h)
	}
	router := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			a.unrouted(w, r, mux)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return a.withRequestID(a.logRequests(a.recoverPanics(a.authenticate(router))))
}

// Patterns returns the pattern of every route of the router, in the order
// they were mounted (the role table's tests walk them).
func (a *API) Patterns() []string { return append([]string(nil), a.mounted...) }

// policy returns the role table's entry of pattern and records pattern as
// mounted. A route missing from the table needs the admin role.
func (a *API) policy(pattern string) policy {
	a.mounted = append(a.mounted, pattern)
	if pol, ok := a.policies[pattern]; ok {
		return pol
	}
	return policy{perm: permAdmin}
}

// mountHandler registers a plain handler under the role table.
func (a *API) mountHandler(mux *http.ServeMux, pattern string, h http.Handler) {
	pol := a.policy(pattern)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := a.authorize(w, r, pattern, pol); err != nil {
			a.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// unrouted answers a request no pattern matches: the mux knows whether
// that is a 404 or a 405 (and which methods to allow); we answer with an
// envelope instead of its plain-text body.
func (a *API) unrouted(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	h, _ := mux.Handler(r)
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		a.writeError(w, r, rota.Errorf(rota.CodeMethod, "method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
		return
	}
	a.writeError(w, r, rota.Errorf(rota.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
}

// headerRecorder captures the status and headers a handler writes and
// discards its body.
type headerRecorder struct {
	header http.Header
	status int
}

// Header returns the recorded headers.
func (h *headerRecorder) Header() http.Header { return h.header }

// Write discards b.
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}

// WriteHeader records the first status.
func (h *headerRecorder) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}
