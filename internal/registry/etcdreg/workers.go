package etcdreg

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rotahq/rota/internal/store"
)

// seenGrain is how often at most a node writes one worker's record: a
// worker seen again within it (claims, heartbeats, reports) costs no etcd
// request; its next write carries the latest sighting. The store's own
// sighting rule (pgstore's seenGrain) is the same second.
const seenGrain = time.Second

// maxTxnOps bounds the puts of one flush transaction (etcd refuses more
// than --max-txn-ops, 128 by default).
const maxTxnOps = 100

// workerValue is the JSON of a worker's live key,
// {prefix}workers/{worker}/{node}: what one node saw of the worker.
type workerValue struct {
	ID        string   `json:"id"`
	Node      string   `json:"node"`
	Address   string   `json:"address,omitempty"`
	Kinds     []string `json:"kinds,omitempty"`
	Capacity  int      `json:"capacity,omitempty"` // a push worker's registration
	FirstSeen int64    `json:"first_seen"`         // unix ms, by this node
	LastSeen  int64    `json:"last_seen"`          // unix ms
	WaitMS    int64    `json:"wait_ms,omitempty"`  // long-poll wait of its last claim
}

// pushValue is the JSON of a push registration, {prefix}push/{worker}.
type pushValue struct {
	ID           string   `json:"id"`
	Address      string   `json:"address"`
	Kinds        []string `json:"kinds"`
	Capacity     int      `json:"capacity"`
	RegisteredAt int64    `json:"registered_at"` // unix ms
}

// sighting is what this node knows of a worker it saw, and what of it
// is in etcd.
type sighting struct {
	v       workerValue
	changed bool      // v differs from the written record beyond LastSeen
	written int64     // LastSeen of the record written
	wroteAt time.Time // when it was written (wall clock); zero: not yet
}

// sightings are the workers this node saw, written to etcd by flush.
type sightings struct {
	mu     sync.Mutex
	m      map[string]*sighting // by worker id
	leases map[int64]workerLease
	kick   chan struct{}
}

// workerLease is a lease the records of one flush go under: every
// record written within reuse of its grant shares it.
type workerLease struct {
	id      clientv3.LeaseID
	granted time.Time
}

func (r *Registry) workerKey(id string) string {
	return r.workerPrefix(id) + url.PathEscape(r.node)
}
func (r *Registry) workerPrefix(id string) string {
	return r.workersPrefix() + url.PathEscape(id) + "/"
}
func (r *Registry) workersPrefix() string    { return r.prefix + "workers/" }
func (r *Registry) pushKey(id string) string { return r.pushPrefix() + url.PathEscape(id) }
func (r *Registry) pushPrefix() string       { return r.prefix + "push/" }

// sighted is a worker seen by this node at now: address, kinds, wait and
// capacity are what the sighting tells ("" / nil / -1 / 0: it does not).
type sighted struct {
	id       string
	address  string
	kinds    []string
	wait     time.Duration // < 0: not told
	capacity int
	now      time.Time
}

// see records a sighting in memory; the flusher writes it. A worker new
// to this node wakes the flusher, so it is listed at once.
func (r *Registry) see(s sighted) {
	now := store.Millis(s.now)
	r.seen.mu.Lock()
	w := r.seen.m[s.id]
	isNew := w == nil
	if isNew {
		w = &sighting{v: workerValue{ID: s.id, Node: r.node, FirstSeen: now}, changed: true}
		r.seen.m[s.id] = w
	}
	if now > w.v.LastSeen {
		w.v.LastSeen = now
	}
	if s.address != "" && s.address != w.v.Address {
		w.v.Address, w.changed = s.address, true
	}
	if kinds := mergeKinds(w.v.Kinds, s.kinds); !slices.Equal(kinds, w.v.Kinds) {
		w.v.Kinds, w.changed = kinds, true
	}
	if s.wait >= 0 && s.wait.Milliseconds() != w.v.WaitMS {
		w.v.WaitMS, w.changed = s.wait.Milliseconds(), true
	}
	if s.capacity > 0 && s.capacity != w.v.Capacity {
		w.v.Capacity, w.changed = s.capacity, true
	}
	r.seen.mu.Unlock()
	if isNew {
		select {
		case r.seen.kick <- struct{}{}:
		default:
		}
	}
}

// mergeKinds is the kinds of a worker's record after a sighting with
// more: the union, sorted, up to store.MaxWorkerKinds (past it, the
// latest sighting's), as the stores keep them.
func mergeKinds(have, more []string) []string {
	if len(more) == 0 {
		return have
	}
	out := slices.Clone(have)
	for _, k := range more {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == len(have) {
		return have
	}
	if len(out) > store.MaxWorkerKinds {
		out = slices.Clone(more)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// forget drops a worker from this node's sightings (it deregistered).
func (r *Registry) forget(id string) {
	r.seen.mu.Lock()
	delete(r.seen.m, id)
	r.seen.mu.Unlock()
}

// flushLoop writes the due sightings every quarter of seenGrain, and at
// once when a new worker was seen, until ctx ends.
func (r *Registry) flushLoop(ctx context.Context) {
	defer close(r.flushed)
	t := time.NewTicker(seenGrain / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.seen.kick:
		}
		if err := r.flush(ctx, false); err != nil && ctx.Err() == nil {
			r.log.Warn("etcdreg: write worker sightings", "err", err)
		}
	}
}

// due returns the records to write now: a worker's record is written
// when it is new, and otherwise at most once per seenGrain (all: at
// once), when it was seen again or changed since. Workers silent for
// longer than their record lives are forgotten.
func (r *Registry) due(wall time.Time, all bool) []workerValue {
	r.seen.mu.Lock()
	defer r.seen.mu.Unlock()
	var out []workerValue
	for id, s := range r.seen.m {
		if !s.wroteAt.IsZero() {
			if s.v.LastSeen == s.written && !s.changed {
				if wall.Sub(s.wroteAt) > r.recordLife(s.v) {
					delete(r.seen.m, id) // silent: its key has expired
				}
				continue
			}
			if !all && wall.Sub(s.wroteAt) < seenGrain {
				continue
			}
		}
		out = append(out, s.v)
	}
	return out
}

// recordLife is how long a record outlives the sighting it carries:
// WorkerTTL plus the long-poll wait of the worker's last claim (it is
// silent while it waits).
func (r *Registry) recordLife(v workerValue) time.Duration {
	return r.workerTTL + time.Duration(v.WaitMS)*time.Millisecond
}

// flush writes the due records (all: every record not written yet), one
// transaction per maxTxnOps, each under a lease that ends recordLife
// (plus at most leaseReuse) after the sighting.
func (r *Registry) flush(ctx context.Context, all bool) error {
	wall := time.Now()
	vs := r.due(wall, all)
	for len(vs) > 0 {
		batch := vs[:min(len(vs), maxTxnOps)]
		vs = vs[len(batch):]
		ops := make([]clientv3.Op, 0, len(batch))
		for _, v := range batch {
			lease, err := r.workerLease(ctx, r.recordLife(v), wall)
			if err != nil {
				return err
			}
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("encode worker %s: %w", v.ID, err)
			}
			ops = append(ops, clientv3.OpPut(r.workerKey(v.ID), string(b), clientv3.WithLease(lease)))
		}
		if _, err := r.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			r.dropWorkerLeases() // one may have ended: grant afresh next time
			return fmt.Errorf("put %d worker records: %w", len(ops), err)
		}
		r.markWritten(batch, wall)
	}
	return nil
}

// markWritten notes that the records vs are in etcd.
func (r *Registry) markWritten(vs []workerValue, wall time.Time) {
	r.seen.mu.Lock()
	defer r.seen.mu.Unlock()
	for _, v := range vs {
		if s := r.seen.m[v.ID]; s != nil {
			s.written, s.wroteAt = v.LastSeen, wall
			s.changed = s.changed && !sameRecord(s.v, v)
		}
	}
}

// sameRecord reports whether a and b differ in no more than LastSeen.
func sameRecord(a, b workerValue) bool {
	a.LastSeen, b.LastSeen = 0, 0
	return a.Address == b.Address && slices.Equal(a.Kinds, b.Kinds) && a.WaitMS == b.WaitMS &&
		a.Capacity == b.Capacity && a.FirstSeen == b.FirstSeen
}

// workerLease returns a lease of at least life, shared by every record
// written within leaseReuse of its grant (granted with life + leaseReuse,
// so that it outlives each of them by life): a busy node grants one lease
// per leaseReuse, whatever its number of workers.
func (r *Registry) workerLease(ctx context.Context, life time.Duration, wall time.Time) (clientv3.LeaseID, error) {
	ttl := int64((life + r.leaseReuse + time.Second - 1) / time.Second)
	r.seen.mu.Lock()
	l, ok := r.seen.leases[ttl]
	r.seen.mu.Unlock()
	if ok && wall.Sub(l.granted) < r.leaseReuse {
		return l.id, nil
	}
	g, err := r.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("grant a worker lease: %w", err)
	}
	r.seen.mu.Lock()
	for k, old := range r.seen.leases {
		if wall.Sub(old.granted) >= r.leaseReuse {
			delete(r.seen.leases, k)
		}
	}
	r.seen.leases[ttl] = workerLease{id: g.ID, granted: wall}
	r.seen.mu.Unlock()
	return g.ID, nil
}

func (r *Registry) dropWorkerLeases() {
	r.seen.mu.Lock()
	clear(r.seen.leases)
	r.seen.mu.Unlock()
}

// liveWorkers returns the live records in etcd, merged by worker (the
// latest sighting of any node; the address and kinds of the latest
// sighting that told them), with this node's sightings not yet written.
func (r *Registry) liveWorkers(ctx context.Context, now time.Time) (map[string]workerValue, error) {
	resp, err := r.cli.Get(ctx, r.workersPrefix(), clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("etcdreg: list workers: %w", err)
	}
	live := make(map[string]workerValue, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var v workerValue
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("etcdreg: worker record %s: %w", kv.Key, err)
		}
		live[v.ID] = mergeRecords(live[v.ID], v)
	}
	r.seen.mu.Lock()
	for id, s := range r.seen.m {
		if s.wroteAt.IsZero() || s.v.LastSeen > s.written {
			if now.Before(store.FromMillis(s.v.LastSeen).Add(r.recordLife(s.v))) {
				live[id] = mergeRecords(live[id], s.v)
			}
		}
	}
	r.seen.mu.Unlock()
	return live, nil
}

// mergeRecords merges two nodes' records of one worker (a is zero when
// there is none yet).
func mergeRecords(a, b workerValue) workerValue {
	if a.ID == "" {
		return b
	}
	if b.LastSeen > a.LastSeen {
		a, b = b, a
	}
	// a is the latest; b fills in what a's sighting did not tell.
	if a.Address == "" {
		a.Address = b.Address
	}
	if len(a.Kinds) == 0 {
		a.Kinds = b.Kinds
	}
	a.Capacity = max(a.Capacity, b.Capacity)
	a.WaitMS = max(a.WaitMS, b.WaitMS)
	if b.FirstSeen != 0 && (a.FirstSeen == 0 || b.FirstSeen < a.FirstSeen) {
		a.FirstSeen = b.FirstSeen
	}
	return a
}
