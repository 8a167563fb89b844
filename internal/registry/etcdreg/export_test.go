package etcdreg

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Abandon drops the connection without revoking the lease, as a killed
// process would: the node's keys stay until the lease ends.
func (r *Registry) Abandon() error {
	r.stopFlush()
	<-r.flushed
	return r.cli.Close()
}

// Client is the registry's etcd client, for tests that read the keys.
func (r *Registry) Client() *clientv3.Client { return r.cli }

// Requests counts the etcd requests of a registry by kind: "txn", "put",
// "get", "delete", "grant", "keepalive", "revoke", all of them
// ("requests"), and the operations of the transactions ("txn_ops").
type Requests struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *Requests) add(kind string) {
	c.mu.Lock()
	c.n[kind]++
	c.n["requests"]++
	c.mu.Unlock()
}

// addOps counts the operations of a transaction ("txn_ops"), not a
// request of their own.
func (c *Requests) addOps(n int) {
	c.mu.Lock()
	c.n["txn_ops"] += n
	c.mu.Unlock()
}

// Snapshot returns the counts so far.
func (c *Requests) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// CountRequests makes a registry opened with cfg count its etcd requests.
func CountRequests(cfg Config) (Config, *Requests) {
	c := &Requests{n: map[string]int{}}
	cfg.instrument = func(cli *clientv3.Client) {
		cli.KV = countKV{KV: cli.KV, c: c}
		cli.Lease = countLease{Lease: cli.Lease, c: c}
	}
	return cfg, c
}

type countKV struct {
	clientv3.KV
	c *Requests
}

func (k countKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	k.c.add("put")
	return k.KV.Put(ctx, key, val, opts...)
}

func (k countKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.c.add("get")
	return k.KV.Get(ctx, key, opts...)
}

func (k countKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	k.c.add("delete")
	return k.KV.Delete(ctx, key, opts...)
}

func (k countKV) Txn(ctx context.Context) clientv3.Txn {
	return countTxn{Txn: k.KV.Txn(ctx), c: k.c}
}

type countTxn struct {
	clientv3.Txn
	c *Requests
}

func (t countTxn) If(cs ...clientv3.Cmp) clientv3.Txn { return countTxn{Txn: t.Txn.If(cs...), c: t.c} }
func (t countTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.c.addOps(len(ops))
	return countTxn{Txn: t.Txn.Then(ops...), c: t.c}
}
func (t countTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return countTxn{Txn: t.Txn.Else(ops...), c: t.c}
}
func (t countTxn) Commit() (*clientv3.TxnResponse, error) {
	t.c.add("txn")
	return t.Txn.Commit()
}

type countLease struct {
	clientv3.Lease
	c *Requests
}

func (l countLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	l.c.add("grant")
	return l.Lease.Grant(ctx, ttl)
}

func (l countLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	l.c.add("keepalive")
	return l.Lease.KeepAliveOnce(ctx, id)
}

func (l countLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	l.c.add("revoke")
	return l.Lease.Revoke(ctx, id)
}
