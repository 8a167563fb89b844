package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rotahq/rota"
)

// NodeLiveness is how long after its last heartbeat a node still counts as
// live in GET /api/cluster.
const NodeLiveness = 15 * time.Second

// mountCluster registers the cluster view.
func (a *API) mountCluster(mux *http.ServeMux) {
	mount(a, mux, "GET /api/cluster", bodyNone, a.cluster)
}

// nodeJSON is one node of GET /api/cluster.
type nodeJSON struct {
	NodeID        string `json:"node_id"`
	Address       string `json:"address"`
	Version       string `json:"version"`
	StartedAt     int64  `json:"started_at"`
	LastHeartbeat int64  `json:"last_heartbeat"`
	Leader        bool   `json:"leader"`
}

// clusterResponse is the data of GET /api/cluster.
type clusterResponse struct {
	Nodes []nodeJSON `json:"nodes"`
}

// cluster lists the live nodes and which one leads.
//
// GET /api/cluster
func (a *API) cluster(ctx context.Context, _ *noRequest) (*clusterResponse, error) {
	nodes, err := a.store.NodeList(ctx, a.now(), NodeLiveness)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := &clusterResponse{Nodes: make([]nodeJSON, 0, len(nodes))}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, toNodeJSON(n))
	}
	return out, nil
}

func toNodeJSON(n rota.Node) nodeJSON {
	return nodeJSON{
		NodeID: n.ID, Address: n.Address, Version: n.Version,
		StartedAt: unix(n.StartedAt), LastHeartbeat: unix(n.LastHeartbeat), Leader: n.Leader,
	}
}
