package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// readyTimeout bounds the store ping of /api/readyz.
const readyTimeout = 5 * time.Second

// mountOps registers statistics and health routes.
func (a *API) mountOps(mux *http.ServeMux) {
	mount(a, mux, "GET /api/stats", bodyNone, a.stats)
	mount(a, mux, "GET /api/healthz", bodyNone, a.healthz)
	mount(a, mux, "GET /api/readyz", bodyNone, a.readyz)
}

// stats counts tasks by kind and status.
//
// GET /api/stats
func (a *API) stats(ctx context.Context, _ *noRequest) (*rotaapi.Stats, error) {
	st, err := a.store.Stats(ctx, a.now())
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	out := &rotaapi.Stats{Kinds: convertAll(st.Kinds, toKindStats), Totals: statusCounts(nil)}
	for _, ks := range out.Kinds {
		for s, n := range ks.Counts {
			out.Totals[s] += n
		}
	}
	return out, nil
}

// healthz answers while the process serves HTTP (liveness).
//
// GET /api/healthz
func (a *API) healthz(context.Context, *noRequest) (*rotaapi.Health, error) {
	return &rotaapi.Health{Status: "ok", NodeID: a.nodeID, Version: a.version}, nil
}

// readyz answers ok when the store is reachable and takes writes
// (readiness), else 503 unavailable. Once a write failed for want of the
// store (a full disk, a lost database) it probes with a write of its own
// until one succeeds, so that it turns ready again without a restart even
// when no client writes meanwhile.
//
// GET /api/readyz
func (a *API) readyz(ctx context.Context, _ *noRequest) (*rotaapi.Health, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		a.log.LogAttrs(ctx, slog.LevelWarn, "httpapi: readiness: store ping failed", slog.Any("err", err))
		return nil, rota.Errorf(rota.CodeUnavailable, "not ready: the store is unreachable")
	}
	if a.health.failing() {
		err := a.store.PingWrite(ctx, a.now())
		a.health.observe(ctx, err)
		if err != nil {
			a.log.LogAttrs(ctx, slog.LevelWarn, "httpapi: readiness: store write failed", slog.Any("err", err))
			return nil, rota.Errorf(rota.CodeUnavailable, "not ready: the store does not accept writes (disk full or database unavailable)")
		}
	}
	return &rotaapi.Health{Status: "ready", NodeID: a.nodeID, Version: a.version}, nil
}

// writeHealth remembers whether the last write the API attempted failed
// for want of the store. It is safe for concurrent use.
type writeHealth struct {
	failed atomic.Bool
}

// observe records the outcome of a write: err unavailable (and not the
// client going away) marks the store failing; success clears the mark;
// other errors (bad input, conflicts) say nothing of the store.
func (h *writeHealth) observe(ctx context.Context, err error) {
	switch {
	case err == nil:
		h.failed.Store(false)
	case rota.ErrorCode(err) == rota.CodeUnavailable && ctx.Err() == nil:
		h.failed.Store(true)
	}
}

// failing reports whether the last write failed for want of the store.
func (h *writeHealth) failing() bool { return h.failed.Load() }
