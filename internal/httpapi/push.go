package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/netguard"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// maxPushCapacity bounds a push worker's capacity.
const maxPushCapacity = maxClaim

// mountPush registers the route of push workers.
func (a *API) mountPush(mux *http.ServeMux) {
	mount(a, mux, "POST /api/workers/register", bodyRequired, a.workerRegister)
}

// registerRequest is the body of POST /api/workers/register.
type registerRequest struct {
	rotaapi.RegisterRequest

	params store.WorkerRegisterParams // set by validate
}

func (r *registerRequest) validate(a *API) error {
	if err := checkWorkerID("worker_id", r.WorkerID); err != nil {
		return err
	}
	kinds, err := checkKinds("kinds", r.Kinds)
	if err != nil {
		return err
	}
	if err := checkPushAddress("address", r.Address, a.guard); err != nil {
		return err
	}
	if err := checkRange("capacity", r.Capacity, 1, maxPushCapacity); err != nil {
		return err
	}
	r.params = store.WorkerRegisterParams{WorkerID: r.WorkerID, Kinds: kinds, Address: r.Address, Capacity: r.Capacity}
	return nil
}

// checkPushAddress checks a push worker's address: an absolute http or
// https URL without user information or fragment, on an address the
// outbound guard allows (literal addresses and localhost are checked now;
// names when the dispatcher dials them).
func checkPushAddress(field, s string, guard *netguard.Guard) error {
	if err := checkName(field, s, maxTargetURL); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return rota.Invalid(field, "must be an absolute http or https URL without user or fragment, got %s", shortQuote(s))
	}
	if err := guard.CheckURL(s); err != nil {
		return rota.Invalid(field, "%v", err)
	}
	return nil
}

// workerRegister records a push worker: Rota posts the tasks of its kinds
// in push mode to its address, up to its capacity at once, while it
// answers GET {address}/healthz.
//
// POST /api/workers/register
func (a *API) workerRegister(ctx context.Context, req *registerRequest) (*rotaapi.Worker, error) {
	for i, k := range req.params.Kinds { // a confined token registers its kinds only
		if err := checkKindAllowed(ctx, fmt.Sprintf("kinds[%d]", i), k); err != nil {
			return nil, err
		}
	}
	w, err := a.disp.RegisterWorker(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("register worker: %w", err)
	}
	out := toWorker(&rota.Worker{
		ID: w.WorkerID, Address: w.Address, Kinds: w.Kinds, Running: w.Running, Capacity: w.Capacity,
		FirstSeen: w.RegisteredAt, LastSeen: w.RegisteredAt, Status: rota.WorkerActive, StopRequested: w.Stopped,
	})
	noteAudit(ctx, w.WorkerID, nil, out)
	return &out, nil
}

// withCapacity sets the capacity of the push workers among ws.
func (a *API) withCapacity(ctx context.Context, ws []rota.Worker) error {
	push, err := a.store.PushWorkerList(ctx)
	if err != nil {
		return fmt.Errorf("list push workers: %w", err)
	}
	capacity := make(map[string]int, len(push))
	for _, p := range push {
		capacity[p.WorkerID] = p.Capacity
	}
	for i := range ws {
		ws[i].Capacity = capacity[ws[i].ID]
	}
	return nil
}
