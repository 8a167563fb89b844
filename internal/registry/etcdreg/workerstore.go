package etcdreg

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// This file holds the store methods of the live worker registry (see the
// package doc): sightings go to etcd besides the store, listings merge
// etcd's live records with the store's rows.

// TaskClaim claims in the store (which fences a stopped worker) and
// records the sighting. Reports are no sightings, as in the stores: the
// leader reports for lost push workers.
func (w *wrapped) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	res, err := w.Store.TaskClaim(ctx, p)
	if err == nil {
		w.r.see(sighted{id: p.WorkerID, address: p.WorkerAddress, kinds: p.Kinds, wait: p.Wait, now: p.Now})
	}
	return res, err
}

// RunHeartbeat renews the run in the store and records the sighting.
func (w *wrapped) RunHeartbeat(ctx context.Context, p store.RunHeartbeatParams) (store.RunHeartbeatResult, error) {
	res, err := w.Store.RunHeartbeat(ctx, p)
	if err == nil {
		w.r.see(sighted{id: p.WorkerID, wait: -1, now: p.Now})
	}
	return res, err
}

// PushWorkersSeen records the healthy push workers in the store (whose
// retention prunes by its own sightings) and in etcd.
func (w *wrapped) PushWorkersSeen(ctx context.Context, ids []string, now time.Time) error {
	if err := w.Store.PushWorkersSeen(ctx, ids, now); err != nil {
		return err
	}
	for _, id := range ids {
		w.r.see(sighted{id: id, wait: 0, now: now})
	}
	return nil
}

// WorkerRegister records the push worker in the store (its worker row,
// which holds the stop flag its claims check, and the durable copy of
// the registration), then its registration and sighting in etcd.
func (w *wrapped) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*store.PushWorker, error) {
	pw, err := w.Store.WorkerRegister(ctx, p)
	if err != nil {
		return nil, err
	}
	v, err := json.Marshal(pushValue{ID: pw.WorkerID, Address: pw.Address, Kinds: pw.Kinds,
		Capacity: pw.Capacity, RegisteredAt: store.Millis(pw.RegisteredAt)})
	if err != nil {
		return nil, fmt.Errorf("etcdreg: encode push worker: %w", err)
	}
	if _, err := w.r.cli.Put(ctx, w.r.pushKey(pw.WorkerID), string(v)); err != nil {
		return nil, fmt.Errorf("etcdreg: register push worker %s: %w", pw.WorkerID, err)
	}
	w.r.see(sighted{id: pw.WorkerID, address: pw.Address, kinds: pw.Kinds, capacity: pw.Capacity, now: p.Now})
	return pw, nil
}

// PushWorkerList lists the push registrations in etcd, each with its
// running runs and stop flag from the store; a registration whose worker
// the store pruned is left out, and one the store holds but etcd does
// not (made before the registry was in use) is the store's.
func (w *wrapped) PushWorkerList(ctx context.Context) ([]store.PushWorker, error) {
	regs, err := w.r.pushRegistrations(ctx)
	if err != nil {
		return nil, err
	}
	stored, err := w.Store.PushWorkerList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]store.PushWorker, 0, len(stored))
	for _, sw := range stored {
		if v, ok := regs[sw.WorkerID]; ok {
			sw.Address, sw.Kinds, sw.Capacity, sw.RegisteredAt = v.Address, v.Kinds, v.Capacity, store.FromMillis(v.RegisteredAt)
		}
		out = append(out, sw)
	}
	return out, nil
}

// pushRegistrations reads the push registrations in etcd, by worker id,
// each with its key's mod revision.
func (r *Registry) pushRegistrations(ctx context.Context) (map[string]pushValue, error) {
	resp, err := r.cli.Get(ctx, r.pushPrefix(), clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("etcdreg: list push workers: %w", err)
	}
	regs := make(map[string]pushValue, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var v pushValue
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("etcdreg: push worker %s: %w", kv.Key, err)
		}
		regs[v.ID] = v
	}
	return regs, nil
}

// WorkerDeregister records the graceful stop in the store (the claim's
// fence) and removes the worker's live records: it is no longer live.
func (w *wrapped) WorkerDeregister(ctx context.Context, id string, now time.Time) (*rota.Worker, error) {
	wk, err := w.Store.WorkerDeregister(ctx, id, now)
	if err != nil {
		return nil, err
	}
	w.r.forget(id)
	if _, err := w.r.cli.Delete(ctx, w.r.workerPrefix(id), clientv3.WithPrefix()); err != nil {
		return nil, fmt.Errorf("etcdreg: remove worker %s: %w", id, err)
	}
	return wk, nil
}

// WorkerPrune prunes the store's workers, then the push registrations in
// etcd whose worker the store no longer holds.
func (w *wrapped) WorkerPrune(ctx context.Context, p store.WorkerPruneParams) (int, error) {
	n, err := w.Store.WorkerPrune(ctx, p)
	if err != nil || n == 0 {
		return n, err
	}
	// etcd first: a registration is in the store before it is in etcd,
	// so a key read here without its row was pruned.
	resp, err := w.r.cli.Get(ctx, w.r.pushPrefix(), clientv3.WithPrefix())
	if err != nil {
		return n, fmt.Errorf("etcdreg: list push workers: %w", err)
	}
	stored, err := w.Store.PushWorkerList(ctx)
	if err != nil {
		return n, err
	}
	for _, kv := range resp.Kvs {
		var v pushValue
		if json.Unmarshal(kv.Value, &v) == nil && slices.ContainsFunc(stored, func(s store.PushWorker) bool { return s.WorkerID == v.ID }) {
			continue
		}
		key := string(kv.Key)
		if _, err := w.r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).Commit(); err != nil {
			return n, fmt.Errorf("etcdreg: remove pruned push worker: %w", err)
		}
	}
	return n, nil
}

// WorkerList lists the workers of the store and of etcd (see merged).
func (w *wrapped) WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error) {
	return w.merged(ctx, now)
}

// WorkerListPage pages the merged workers (see merged) by id, filtered
// as the store would.
func (w *wrapped) WorkerListPage(ctx context.Context, p store.WorkerListParams) (store.WorkerListResult, error) {
	all, err := w.merged(ctx, p.Now)
	if err != nil {
		return store.WorkerListResult{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultWorkerListLimit
	}
	var ws []rota.Worker
	for _, wk := range all {
		if (p.Cursor != "" && wk.ID <= p.Cursor) || (p.Kind != "" && !slices.Contains(wk.Kinds, p.Kind)) ||
			(p.Status != "" && wk.Status != p.Status) {
			continue
		}
		if ws = append(ws, wk); len(ws) > limit {
			break
		}
	}
	return store.WorkerListPage(ws, limit), nil
}

// merged is every worker, by id: the store's rows (running runs, stop
// flag, first sighting) joined with etcd's live records (address, kinds,
// latest sighting). A worker with a live record is active until
// store.WorkerLiveness (plus its wait) after its latest sighting, as
// without a registry; one without — its records expired — is lost, or
// stopped when it was asked to stop or deregistered and holds no run
// (unless the store saw it within notYetLive). A live worker the store
// does not hold (pruned) is listed too.
func (w *wrapped) merged(ctx context.Context, now time.Time) ([]rota.Worker, error) {
	stored, err := w.Store.WorkerList(ctx, now)
	if err != nil {
		return nil, err
	}
	live, err := w.r.liveWorkers(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make([]rota.Worker, 0, len(stored)+len(live))
	for _, sw := range stored {
		stop := sw.StopRequested || sw.Status == rota.WorkerStopped
		v, ok := live[sw.ID]
		if !ok {
			if now.Sub(sw.LastSeen) > notYetLive { // else its record may be on its way: the store's status
				sw.Status = rota.WorkerLost
				if stop && sw.Running == 0 {
					sw.Status = rota.WorkerStopped
				}
			}
			out = append(out, sw)
			continue
		}
		delete(live, sw.ID)
		out = append(out, fromRecord(v, sw, stop, now))
	}
	for _, v := range live {
		out = append(out, fromRecord(v, rota.Worker{ID: v.ID}, false, now))
	}
	slices.SortFunc(out, func(a, b rota.Worker) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// notYetLive is how long after a sighting recorded in the store a worker
// without a live record keeps the store's status: the node that saw it
// may not have written its record yet (it does within a flush, or a
// seenGrain when the node wrote one just before).
const notYetLive = 2 * seenGrain

// fromRecord is the store's worker sw updated with its live record v.
func fromRecord(v workerValue, sw rota.Worker, stop bool, now time.Time) rota.Worker {
	if v.Address != "" {
		sw.Address = v.Address
	}
	if len(v.Kinds) > 0 {
		sw.Kinds = v.Kinds
	}
	if seen := store.FromMillis(v.LastSeen); seen.After(sw.LastSeen) {
		sw.LastSeen = seen
	}
	if sw.FirstSeen.IsZero() {
		sw.FirstSeen = store.FromMillis(v.FirstSeen)
	}
	if v.Capacity > 0 {
		sw.Capacity = v.Capacity
	}
	sw.Status = store.WorkerStatusAt(sw.LastSeen, time.Duration(v.WaitMS)*time.Millisecond, stop, sw.Running, now)
	return sw
}
