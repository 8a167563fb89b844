package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rotahq/rota/rotaapi"
)

// NodeLiveness is how long after its last heartbeat a node still counts as
// live in GET /api/cluster.
const NodeLiveness = 15 * time.Second

// The durability values of GET /api/cluster.
const (
	DurabilityDurable = "durable"
	DurabilityRelaxed = "relaxed"
)

// mountCluster registers the cluster view.
func (a *API) mountCluster(mux *http.ServeMux) {
	mount(a, mux, "GET /api/cluster", bodyNone, a.cluster)
}

// cluster lists the live nodes and which one leads.
//
// GET /api/cluster
func (a *API) cluster(ctx context.Context, _ *noRequest) (*rotaapi.Cluster, error) {
	nodes, err := a.store.NodeList(ctx, a.now(), NodeLiveness)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	d := a.durability
	if d == "" {
		d = DurabilityDurable
	}
	return &rotaapi.Cluster{Nodes: convertAll(nodes, toNode), Durability: d}, nil
}
