package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rotahq/rota"
)

// readyTimeout bounds the store ping of /api/readyz.
const readyTimeout = 5 * time.Second

// mountOps registers statistics and health routes.
func (a *API) mountOps(mux *http.ServeMux) {
	mount(a, mux, "GET /api/stats", bodyNone, a.stats)
	mount(a, mux, "GET /api/healthz", bodyNone, a.healthz)
	mount(a, mux, "GET /api/readyz", bodyNone, a.readyz)
}

// statsResponse is the data of GET /api/stats.
type statsResponse struct {
	Kinds  []kindStatsJSON     `json:"kinds"`
	Totals map[rota.Status]int `json:"totals"`
}

// stats counts tasks by kind and status.
//
// GET /api/stats
func (a *API) stats(ctx context.Context, _ *noRequest) (*statsResponse, error) {
	st, err := a.store.Stats(ctx, a.now())
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	out := &statsResponse{Kinds: make([]kindStatsJSON, 0, len(st.Kinds)), Totals: statusCounts(nil)}
	for _, k := range st.Kinds {
		ks := toKindStatsJSON(k)
		for s, n := range ks.Counts {
			out.Totals[s] += n
		}
		out.Kinds = append(out.Kinds, ks)
	}
	return out, nil
}

// healthResponse is the data of the health routes.
type healthResponse struct {
	Status  string `json:"status"`
	NodeID  string `json:"node_id,omitempty"`
	Version string `json:"version,omitempty"`
}

// healthz answers while the process serves HTTP (liveness).
//
// GET /api/healthz
func (a *API) healthz(context.Context, *noRequest) (*healthResponse, error) {
	return &healthResponse{Status: "ok", NodeID: a.nodeID, Version: a.version}, nil
}

// readyz answers ok when the store is reachable (readiness), else 503
// unavailable.
//
// GET /api/readyz
func (a *API) readyz(ctx context.Context, _ *noRequest) (*healthResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		a.log.LogAttrs(ctx, slog.LevelWarn, "httpapi: readiness: store ping failed", slog.Any("err", err))
		return nil, rota.Errorf(rota.CodeUnavailable, "not ready: the store is unreachable")
	}
	return &healthResponse{Status: "ready", NodeID: a.nodeID, Version: a.version}, nil
}
