package rotaclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// ListKinds returns every known kind with its settings, by name (GET
// /api/kinds).
func (c *Client) ListKinds(ctx context.Context) ([]rota.Kind, error) {
	var out rotaapi.KindList
	if err := c.Do(ctx, http.MethodGet, "/api/kinds", nil, &out); err != nil {
		return nil, err
	}
	return convert(out.Kinds, kindOf), nil
}

func (c *Client) kindCall(ctx context.Context, method, path string, in any) (*rota.Kind, error) {
	var w rotaapi.Kind
	if err := c.Do(ctx, method, path, in, &w); err != nil {
		return nil, err
	}
	return new(kindOf(&w)), nil
}

// GetKind returns one kind's settings (GET /api/kinds/{kind}); an unknown
// kind gives an error matching rota.ErrNotFound.
func (c *Client) GetKind(ctx context.Context, name string) (*rota.Kind, error) {
	return c.kindCall(ctx, http.MethodGet, "/api/kinds/"+escape(name), nil)
}

// KindSettings changes a kind's settings; nil fields keep their value. It
// is the body of PUT /api/kinds/{kind}.
type KindSettings = rotaapi.KindPutRequest

// SetKind creates or changes a kind (PUT /api/kinds/{kind}) and returns its
// new settings.
func (c *Client) SetKind(ctx context.Context, name string, s KindSettings) (*rota.Kind, error) {
	return c.kindCall(ctx, http.MethodPut, "/api/kinds/"+escape(name), s)
}

// PauseKind stops handing out tasks of a kind (POST
// /api/kinds/{kind}/pause); running tasks go on and new ones are accepted.
func (c *Client) PauseKind(ctx context.Context, name string) (*rota.Kind, error) {
	return c.kindCall(ctx, http.MethodPost, "/api/kinds/"+escape(name)+"/pause", nil)
}

// ResumeKind hands out a paused kind's tasks again (POST
// /api/kinds/{kind}/resume).
func (c *Client) ResumeKind(ctx context.Context, name string) (*rota.Kind, error) {
	return c.kindCall(ctx, http.MethodPost, "/api/kinds/"+escape(name)+"/resume", nil)
}

// ListWorkers returns every worker the server has seen, with its status
// (GET /api/workers, all pages).
func (c *Client) ListWorkers(ctx context.Context) ([]rota.Worker, error) {
	return c.ListWorkersWhere(ctx, WorkerFilter{})
}

// WorkerFilter selects workers in ListWorkersWhere; zero fields select
// all.
type WorkerFilter struct {
	Status rota.WorkerStatus // active, lost or stopped
	Kind   string            // workers that claim this kind
}

// ListWorkersWhere returns every worker of the filter, by id, reading all
// pages of GET /api/workers.
func (c *Client) ListWorkersWhere(ctx context.Context, f WorkerFilter) ([]rota.Worker, error) {
	var ws []rota.Worker
	cursor := ""
	for {
		var out workerListIn
		q := url.Values{"limit": {"1000"}}
		if f.Status != "" {
			q.Set("status", string(f.Status))
		}
		if f.Kind != "" {
			q.Set("kind", f.Kind)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if err := c.Do(ctx, http.MethodGet, "/api/workers?"+q.Encode(), nil, &out); err != nil {
			return nil, err
		}
		for i := range out.Workers {
			ws = append(ws, out.Workers[i].worker())
		}
		if out.NextCursor == "" || out.NextCursor == cursor {
			return ws, nil
		}
		cursor = out.NextCursor
	}
}

// DeregisterWorker tells the server that a worker stopped gracefully
// (POST /api/workers/{id}/deregister): it is listed as stopped, not lost,
// until it claims again. rotaworker calls it when Run returns. An unknown
// worker (one that never claimed) gives an error matching
// rota.ErrNotFound.
func (c *Client) DeregisterWorker(ctx context.Context, id string) (*rota.Worker, error) {
	var w workerIn
	if err := c.Do(ctx, http.MethodPost, "/api/workers/"+escape(id)+"/deregister", nil, &w); err != nil {
		return nil, err
	}
	return new(w.worker()), nil
}

// StopWorker asks a worker to drain (POST /api/workers/{id}/stop): it gets
// no new work, its next claim or heartbeat tells it to stop, and it
// finishes or hands back what it runs. It returns the worker as the server
// now sees it; an unknown worker gives an error matching rota.ErrNotFound.
func (c *Client) StopWorker(ctx context.Context, id string) (*rota.Worker, error) {
	var w workerIn
	if err := c.Do(ctx, http.MethodPost, "/api/workers/"+escape(id)+"/stop", nil, &w); err != nil {
		return nil, err
	}
	return new(w.worker()), nil
}

// Stats is a snapshot of the queue (GET /api/stats).
type Stats = rotaapi.Stats

// KindStats are one kind's counts.
type KindStats = rotaapi.KindStats

// Stats returns task counts by kind and status (GET /api/stats).
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var out Stats
	if err := c.Do(ctx, http.MethodGet, "/api/stats", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Health reports whether the server process answers (GET /api/healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.Do(ctx, http.MethodGet, "/api/healthz", nil, nil)
}

// Ready reports whether the server can serve requests, its store included
// (GET /api/readyz); a server that is not ready gives an error matching
// rota.ErrUnavailable.
func (c *Client) Ready(ctx context.Context) error {
	return c.Do(ctx, http.MethodGet, "/api/readyz", nil, nil)
}
