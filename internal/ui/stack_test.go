package ui_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/events"
	"github.com/rotahq/rota/internal/httpapi"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/ui"
	"github.com/rotahq/rota/rotaclient"
)

// stack is a whole Rota node in-process, composed the way
// internal/server composes it: store → dispatcher (events into the hub and
// the queue metrics) → API, event stream, throughput, /metrics and the UI
// on one mux, behind the optional token check and cross-origin protection.
type stack struct {
	URL    string
	client *rotaclient.Client
	hub    *events.Hub
	store  store.Store
	disp   *dispatch.Dispatcher
	reg    *prometheus.Registry
}

type stackOptions struct {
	// authToken turns on authentication.
	authToken string
	// routes adds routes to the server's mux (fakes of APIs not merged).
	routes func(mux *http.ServeMux)
	// noWorkerAfter and noWorkerInterval are the dispatcher's (0: its
	// defaults, 30s and 5s).
	noWorkerAfter, noWorkerInterval time.Duration
	// wrap, when set, wraps the whole server's handler.
	wrap func(http.Handler) http.Handler
}

func newStack(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Relaxed: true})
	if err != nil {
		t.Fatal(err)
	}
	// The hub over the store's event log, as the server composes it.
	hub, err := events.New(events.Config{Log: st, Logger: logger, Retry: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	queue, err := metrics.NewQueue(reg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	disp, err := dispatch.New(dispatch.Config{
		Store: st, Logger: logger, BackoffBase: 20 * time.Millisecond, ReapInterval: 50 * time.Millisecond,
		NoWorkerAfter: opts.noWorkerAfter, NoWorkerInterval: opts.noWorkerInterval, NoWorkerChanged: queue.SetNoWorker,
		Events: func(ev rota.Event) {
			hub.Publish(ev)
			queue.Observe(ev)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	auth := httpapi.NewAuthenticator(httpapi.AuthConfig{BootstrapToken: opts.authToken, Tokens: st, Logger: logger})
	api, err := httpapi.New(httpapi.Config{Store: st, Dispatcher: disp, Logger: logger, Version: "test", Auth: auth, Events: hub.Publish,
		Handlers: map[string]http.Handler{
			httpapi.RouteEvents:     hub.Handler(),
			httpapi.RouteThroughput: hub.ThroughputHandler(),
			httpapi.RouteMetrics:    promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}),
		}})
	if err != nil {
		t.Fatal(err)
	}
	uiCfg := ui.Config{Version: "test", Logger: logger}
	if auth.Enabled() {
		uiCfg.CheckToken = func(r *http.Request, token string) error {
			_, err := auth.Login(r, token)
			return err
		}
		uiCfg.CookieName = httpapi.AuthCookie
	}
	u, err := ui.New(uiCfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api.Handler())
	mux.Handle("/metrics", api.Handler())
	mux.Handle("/", u.Handler())
	if opts.routes != nil {
		opts.routes(mux)
	}
	var h http.Handler = mux
	if opts.wrap != nil {
		h = opts.wrap(h)
	}
	srv := httptest.NewUnstartedServer(http.NewCrossOriginProtection().Handler(h))
	srv.Config.RegisterOnShutdown(hub.Close)
	srv.Start()
	t.Cleanup(func() {
		hub.Close()
		srv.Close()
		disp.Stop()
		hub.Stop(ctx)
		st.Close()
	})
	// One live node that leads, as a started server shows itself.
	now := time.Now()
	if err := st.NodeHeartbeat(ctx, store.NodeHeartbeatParams{NodeID: "node-1", Address: srv.Listener.Addr().String(), Version: "test", StartedAt: now, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LeaderAttemptElect(ctx, store.LeaderElectParams{NodeID: "node-1", TTL: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{}
	if opts.authToken != "" {
		hdr.Set("Authorization", "Bearer "+opts.authToken)
	}
	c, err := rotaclient.New(rotaclient.Config{BaseURL: srv.URL, Header: hdr})
	if err != nil {
		t.Fatal(err)
	}
	return &stack{URL: srv.URL, client: c, hub: hub, store: st, disp: disp, reg: reg}
}

// submit stores a task through the API.
func (s *stack) submit(t *testing.T, p rotaclient.TaskParams) string {
	t.Helper()
	res, err := s.client.Submit(context.Background(), p)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res.TaskID
}

// waitTask polls the task until ok accepts it.
func (s *stack) waitTask(t *testing.T, id string, within time.Duration, ok func(*rota.Task) bool) *rota.Task {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		task, err := s.client.GetTask(context.Background(), id)
		if err == nil && ok(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: condition not met within %v (last: %+v, %v)", id, within, task, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
