package rotaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// RegisterParams registers a push worker (POST /api/workers/register).
type RegisterParams struct {
	WorkerID string
	Kinds    []string
	// Address is the http or https URL Rota posts deliveries to; Rota
	// checks GET {Address}/healthz.
	Address string
	// Capacity is how many runs the worker takes at once.
	Capacity int
}

// RegisterWorker registers (or registers again) a push worker: Rota posts
// the tasks of its kinds that are in push mode to p.Address. It returns
// the worker as the server now sees it.
func (c *Client) RegisterWorker(ctx context.Context, p RegisterParams) (*rota.Worker, error) {
	var w workerIn
	in := rotaapi.RegisterRequest{WorkerID: p.WorkerID, Kinds: p.Kinds, Address: p.Address, Capacity: p.Capacity}
	if err := c.Do(ctx, http.MethodPost, "/api/workers/register", in, &w); err != nil {
		return nil, err
	}
	return new(w.worker()), nil
}

// Delivery is a run Rota posted to a push worker (rotaapi.PushDelivery).
type Delivery struct {
	// Run is the run, as a claim would have handed it over.
	Run rota.ClaimedRun
	// WorkerID is the worker the run was claimed for.
	WorkerID string
	// ServerTime is the server's clock when it sent the delivery: measure
	// Run.StartedAt against it, as for a claim's ServerTime.
	ServerTime time.Time
}

// pushDeliveryIn is a rotaapi.PushDelivery.
type pushDeliveryIn struct {
	claimedIn
	WorkerID     string `json:"worker_id"`
	ServerTimeMs int64  `json:"server_time_ms"`
}

// DecodeDelivery decodes the body of a delivery Rota posted to a push
// worker.
func DecodeDelivery(body []byte) (Delivery, error) {
	var in pushDeliveryIn
	if err := json.Unmarshal(body, &in); err != nil {
		return Delivery{}, fmt.Errorf("rotaclient: decode a push delivery: %w", err)
	}
	if in.RunID == "" || in.TaskID == "" || in.Kind == "" {
		return Delivery{}, fmt.Errorf("rotaclient: decode a push delivery: run_id, task_id and kind are required")
	}
	d := Delivery{Run: in.claimed(), WorkerID: in.WorkerID}
	if in.ServerTimeMs > 0 {
		d.ServerTime = time.UnixMilli(in.ServerTimeMs).UTC()
	}
	return d, nil
}
