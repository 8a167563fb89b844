// Package etcdreg keeps a Rota cluster's membership, leader election and
// live worker registry in etcd (rota server --registry etcd://host:2379),
// for deployments that already run etcd. Tasks, runs and schedules stay
// in the store, and so does the part of a worker that a claim checks.
//
// Registry.Wrap returns the store with these methods answered by etcd:
//
//   - NodeHeartbeat / NodeRemove / NodeList: each node puts
//     {prefix}nodes/{id} under its own etcd lease, so a node that dies
//     leaves the list when its lease ends (no stale rows to age out).
//   - LeaderAttemptElect / LeaderResign: {prefix}leader is created, under
//     the candidate's lease, only if absent (a transaction on its create
//     revision); its holder leads until the lease ends. The term of a
//     leadership is the create revision of that key, which etcd makes
//     larger for every new leader. The leader then records its term in the
//     store's own leader row (store.LeaderElectParams.Term), so that the
//     store's fencing of leader-only writes (store.CheckFence) follows
//     etcd: once a new leader has recorded its term, a deposed leader's
//     late write is refused by the store itself.
//   - The live worker registry (workers.go, workerstore.go): every claim,
//     heartbeat, push registration and push health check that a
//     node serves is a sighting of the worker, which the node puts in
//     {prefix}workers/{worker}/{node} (address, kinds, wait, capacity,
//     first and last sighting) under a worker lease that ends WorkerTTL
//     plus the worker's long-poll wait after the sighting: a worker that
//     goes silent, or whose node dies, leaves etcd on its own.
//     WorkerList, WorkerListPage (GET /api/workers, the UI, the metrics,
//     the no-worker alarm) read these records and merge them with the
//     store's rows; a push registration is also put, without a lease, in
//     {prefix}push/{worker}, from which PushWorkerList (the leader's push
//     loop) reads address, kinds and capacity.
//
// A node renews its lease once per election round (one KeepAliveOnce): if
// it cannot reach etcd for a whole lease its keys vanish and another node
// takes over; until then it keeps leading only while its store lease runs.
//
// # Cost of a sighting
//
// A busy worker is seen on every claim; it must not cost an etcd write
// each. Sightings are kept in memory and written by a flush loop: a
// worker new to the node at once, then at most once per second
// (seenGrain) per worker per node, carrying the latest sighting, all due
// workers of a node in one transaction. The records of a flush share one
// lease, granted for the record's life plus leaseReuse and reused for
// leaseReuse (1 to 5 s): a sighting renews a worker's presence by putting
// its record under a younger lease, and a node grants one lease per
// leaseReuse whatever its number of workers. A node serving N busy
// workers thus costs about one transaction (of N puts) per second and
// one grant per leaseReuse; a worker's presence is current to a second.
// Listings read etcd (one serializable range read), and add the node's
// own sightings not yet written.
//
// # What stays in the store
//
// The store keeps each worker's row as the claim writes it, because the
// claim transaction checks it: a worker asked to stop (WorkerStop) or
// deregistered gets no work, and that check must be atomic with the claim
// — a flag read from etcd before the store's transaction could miss a
// stop acknowledged in between, and the run would still be handed out.
// So WorkerStop, WorkerDeregister and the stop flag stay the store's (a
// stopped worker is fenced on every node, as without a registry), as do
// the running runs and counts (WorkerRunsActive), the first sighting,
// and the push registration's durable copy: a registration outlives
// restarts and etcd leases (PushStore), and its Stopped and Running are
// store facts. Retention (WorkerPrune) prunes by the store's sightings,
// which the backends keep throttled to one write per second; a pruned
// worker's push key is removed from etcd after it.
//
// A listed worker is the store's row joined with its live records: with
// one, its address, kinds and latest sighting are etcd's and its status
// is computed as without a registry (store.WorkerStatusAt); without one
// (its records expired) it is lost, or stopped when it was stopped or
// deregistered and holds no run. A worker live in etcd that the store
// no longer holds is listed from etcd alone.
package etcdreg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// DefaultPrefix is the key prefix of Config.Prefix's default.
const DefaultPrefix = "/rota/"

// Config configures a Registry.
type Config struct {
	Endpoints          []string // host:port of the etcd members; required
	Username, Password string   // etcd authentication, optional
	// Prefix starts every key Rota writes (default DefaultPrefix), so that
	// several Rota clusters can share one etcd.
	Prefix string
	// LeaseTTL is the lease of a node's keys (default 5 s, at least 2 s):
	// a node silent that long leaves the cluster and its leadership.
	LeaseTTL time.Duration
	// DialTimeout bounds the connection at Open (default 10 s).
	DialTimeout time.Duration
	Logger      *slog.Logger // default slog.Default()
	// NodeID names this node in the worker records it writes.
	NodeID string
	// WorkerTTL is how long a worker's live record outlives its last
	// sighting plus the long-poll wait of its last claim (default
	// store.WorkerLiveness, so that a worker is lost when it would be
	// without a registry; ?worker_ttl= in the URL).
	WorkerTTL time.Duration

	instrument func(*clientv3.Client) // tests: wraps the client's KV and Lease
}

// ParseURL reads etcd://[user:password@]host:port[,host:port...][/prefix].
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("registry URL: %w", err)
	}
	if u.Scheme != "etcd" {
		return Config{}, fmt.Errorf("registry URL %s: the scheme must be etcd://", Redact(raw))
	}
	if u.Host == "" {
		return Config{}, fmt.Errorf("registry URL %s: no host", Redact(raw))
	}
	cfg := Config{Endpoints: strings.Split(u.Host, ",")}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		cfg.Prefix = "/" + p + "/"
	}
	for name, vs := range u.Query() {
		if name != "worker_ttl" {
			return Config{}, fmt.Errorf("registry URL %s: unknown parameter %q (known: worker_ttl)", Redact(raw), name)
		}
		d, err := time.ParseDuration(vs[len(vs)-1])
		if err != nil || d < time.Second {
			return Config{}, fmt.Errorf("registry URL %s: worker_ttl must be a duration of at least 1s, got %q", Redact(raw), vs[len(vs)-1])
		}
		cfg.WorkerTTL = d
	}
	return cfg, nil
}

// Redact is raw without the password of its user part.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Registry is a connection to etcd. Open it, Wrap the store, Close it after
// the server stopped.
type Registry struct {
	cli    *clientv3.Client
	prefix string
	ttl    int64 // lease seconds
	log    *slog.Logger

	mu      sync.Mutex
	lease   clientv3.LeaseID // this node's lease; 0 until granted or after it ended
	renewed time.Time        // when lease was last granted or renewed

	// The live worker registry (workers.go).
	node       string
	workerTTL  time.Duration
	leaseReuse time.Duration // a worker lease takes records this long after its grant
	seen       sightings
	stopFlush  context.CancelFunc
	flushed    chan struct{} // closed when the flush loop returned
}

// Open connects to etcd and checks that it answers within DialTimeout.
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcdreg: no endpoints")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ttl := int64(cfg.LeaseTTL.Round(time.Second) / time.Second)
	if cfg.LeaseTTL <= 0 {
		ttl = 5
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, Username: cfg.Username, Password: cfg.Password,
		DialTimeout: cfg.DialTimeout, Logger: nopZap(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdreg: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, cfg.Prefix+"leader"); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcdreg: etcd at %s does not answer: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	if cfg.instrument != nil {
		cfg.instrument(cli)
	}
	r := &Registry{cli: cli, prefix: cfg.Prefix, ttl: max(ttl, 2), log: cfg.Logger}
	r.startWorkers(cfg)
	return r, nil
}

// startWorkers starts the flush loop of the worker registry.
func (r *Registry) startWorkers(cfg Config) {
	r.node, r.workerTTL = cfg.NodeID, cfg.WorkerTTL
	if r.node == "" {
		r.node = "node"
	}
	if r.workerTTL <= 0 {
		r.workerTTL = store.WorkerLiveness
	}
	r.leaseReuse = min(max(r.workerTTL/6, time.Second), 5*time.Second)
	r.seen = sightings{m: map[string]*sighting{}, leases: map[int64]workerLease{}, kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopFlush, r.flushed = cancel, make(chan struct{})
	go r.flushLoop(ctx)
}

// Close writes the sightings not yet written, revokes this node's lease
// (its keys go at once; the workers' records stay until their own leases
// end: they live on through other nodes) and disconnects.
func (r *Registry) Close() error {
	r.stopFlush()
	<-r.flushed
	fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
	if err := r.flush(fctx, true); err != nil {
		r.log.Warn("etcdreg: write worker sightings at close", "err", err)
	}
	fcancel()
	r.mu.Lock()
	lease := r.lease
	r.lease = 0
	r.mu.Unlock()
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = r.cli.Revoke(ctx, lease)
		cancel()
	}
	return r.cli.Close()
}

// Wrap returns st with its node registry and leader election in etcd (see
// the package doc); every other method is st's own.
func (r *Registry) Wrap(st store.Store) store.Store {
	return &wrapped{Store: st, r: r}
}

// liveLease returns this node's lease, renewed (one KeepAliveOnce) or
// granted anew when it ended (etcd unreachable for a whole TTL). A lease
// renewed less than a quarter of its TTL ago is returned as it is: an
// election round calls NodeHeartbeat and LeaderAttemptElect back to back,
// and one renewal serves both.
func (r *Registry) liveLease(ctx context.Context) (clientv3.LeaseID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lease != 0 && time.Since(r.renewed) < time.Duration(r.ttl)*time.Second/4 {
		return r.lease, nil
	}
	if r.lease != 0 {
		_, err := r.cli.KeepAliveOnce(ctx, r.lease)
		if err == nil {
			r.renewed = time.Now()
			return r.lease, nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, fmt.Errorf("etcdreg: renew lease: %w", err)
		}
		r.log.Warn("etcdreg: this node's lease ended; joining again", "lease", int64(r.lease))
		r.lease = 0
	}
	g, err := r.cli.Grant(ctx, r.ttl)
	if err != nil {
		return 0, fmt.Errorf("etcdreg: grant lease: %w", err)
	}
	r.lease, r.renewed = g.ID, time.Now()
	return g.ID, nil
}

func (r *Registry) leaderKey() string        { return r.prefix + "leader" }
func (r *Registry) nodeKey(id string) string { return r.prefix + "nodes/" + id }
func (r *Registry) nodesPrefix() string      { return r.prefix + "nodes/" }
func (r *Registry) currentLease() clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease
}

// wrapped is a store whose membership and election are etcd's.
type wrapped struct {
	store.Store
	r *Registry
}

// nodeValue is the JSON of a node's key.
type nodeValue struct {
	Address       string `json:"address"`
	Version       string `json:"version"`
	StartedAt     int64  `json:"started_at"`
	LastHeartbeat int64  `json:"last_heartbeat"`
}

// NodeHeartbeat puts the node's key under its (renewed) lease.
func (w *wrapped) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	lease, err := w.r.liveLease(ctx)
	if err != nil {
		return err
	}
	v, err := json.Marshal(nodeValue{Address: p.Address, Version: p.Version,
		StartedAt: store.Millis(p.StartedAt), LastHeartbeat: store.Millis(p.Now)})
	if err != nil {
		return fmt.Errorf("etcdreg: encode node: %w", err)
	}
	if _, err := w.r.cli.Put(ctx, w.r.nodeKey(p.NodeID), string(v), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("etcdreg: node heartbeat: %w", err)
	}
	return nil
}

// NodeRemove deletes the node's key.
func (w *wrapped) NodeRemove(ctx context.Context, nodeID string) error {
	if _, err := w.r.cli.Delete(ctx, w.r.nodeKey(nodeID)); err != nil {
		return fmt.Errorf("etcdreg: remove node: %w", err)
	}
	return nil
}

// NodeList lists the nodes whose key exists and whose last heartbeat is
// within liveness of now, the holder of the leader key marked.
func (w *wrapped) NodeList(ctx context.Context, now time.Time, liveness time.Duration) ([]rota.Node, error) {
	resp, err := w.r.cli.Txn(ctx).Then(
		clientv3.OpGet(w.r.nodesPrefix(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
		clientv3.OpGet(w.r.leaderKey()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdreg: list nodes: %w", err)
	}
	leader := ""
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		leader = string(kvs[0].Value)
	}
	var nodes []rota.Node
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var v nodeValue
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("etcdreg: node %s: %w", kv.Key, err)
		}
		if store.FromMillis(v.LastHeartbeat).Before(now.Add(-liveness)) {
			continue
		}
		id := strings.TrimPrefix(string(kv.Key), w.r.nodesPrefix())
		nodes = append(nodes, rota.Node{ID: id, Address: v.Address, Version: v.Version,
			StartedAt: store.FromMillis(v.StartedAt), LastHeartbeat: store.FromMillis(v.LastHeartbeat), Leader: id == leader})
	}
	return nodes, nil
}

// LeaderAttemptElect campaigns for the leader key and, when this node
// holds it, records the leadership (with the key's create revision as its
// term) in the store, whose answer — and term — it returns.
func (w *wrapped) LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error) {
	lease, err := w.r.liveLease(ctx)
	if err != nil {
		return store.LeaderElectResult{}, err
	}
	key := w.r.leaderKey()
	resp, err := w.r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, p.NodeID, clientv3.WithLease(lease)), clientv3.OpGet(key)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return store.LeaderElectResult{}, fmt.Errorf("etcdreg: campaign: %w", err)
	}
	get := resp.Responses[len(resp.Responses)-1].GetResponseRange()
	if len(get.Kvs) != 1 {
		return store.LeaderElectResult{}, errors.New("etcdreg: campaign: the leader key vanished")
	}
	kv := get.Kvs[0]
	if string(kv.Value) != p.NodeID || clientv3.LeaseID(kv.Lease) != lease {
		return store.LeaderElectResult{LeaderID: string(kv.Value), Term: kv.CreateRevision,
			ExpiresAt: p.Now.Add(time.Duration(w.r.ttl) * time.Second)}, nil
	}
	p.Term = kv.CreateRevision
	res, err := w.Store.LeaderAttemptElect(ctx, p)
	if err != nil {
		return res, fmt.Errorf("etcdreg: record leadership in the store: %w", err)
	}
	if !res.Leader {
		w.r.log.Warn("etcdreg: the store refused this node's etcd leadership (a newer term holds it)",
			"node", p.NodeID, "etcd_term", p.Term, "store_term", res.Term, "store_leader", res.LeaderID)
	}
	return res, nil
}

// LeaderResign deletes the leader key if nodeID holds it (another node
// takes over at its next round) and ends its store lease.
func (w *wrapped) LeaderResign(ctx context.Context, nodeID string) error {
	key := w.r.leaderKey()
	cmp := []clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", nodeID)}
	if lease := w.r.currentLease(); lease != 0 {
		cmp = append(cmp, clientv3.Compare(clientv3.LeaseValue(key), "=", lease))
	}
	if _, err := w.r.cli.Txn(ctx).If(cmp...).Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return fmt.Errorf("etcdreg: resign: %w", err)
	}
	return w.Store.LeaderResign(ctx, nodeID)
}

// Close closes the store, then the registry (revoking this node's lease):
// the wrapped store owns the registry.
func (w *wrapped) Close() error {
	return errors.Join(w.Store.Close(), w.r.Close())
}

// Unwrap returns the store under the registry, for optional interfaces
// (cost counters) that the wrapper does not forward.
func (w *wrapped) Unwrap() store.Store { return w.Store }
