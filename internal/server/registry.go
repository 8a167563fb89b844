package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/rotahq/rota/internal/registry/etcdreg"
	"github.com/rotahq/rota/internal/store"
)

// withRegistry moves node membership, leader election and the live worker
// registry of st to the registry cfg.Registry names
// (etcd://…[?worker_ttl=]), or returns st as it is when none is set. The
// returned store owns the registry: closing it closes both.
func withRegistry(ctx context.Context, cfg Config, st store.Store) (store.Store, error) {
	if cfg.Registry == "" {
		return st, nil
	}
	if !strings.HasPrefix(cfg.Registry, "etcd://") {
		return nil, fmt.Errorf("unknown registry %q: use etcd://host:2379[,host:2379][/prefix]", etcdreg.Redact(cfg.Registry))
	}
	rc, err := etcdreg.ParseURL(cfg.Registry)
	if err != nil {
		return nil, err
	}
	rc.LeaseTTL, rc.Logger, rc.NodeID = cfg.LeaderLease, cfg.Logger, cfg.NodeID
	reg, err := etcdreg.Open(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", etcdreg.Redact(cfg.Registry), err)
	}
	return reg.Wrap(st), nil
}

// unwrap returns the store under a registry wrapper (see withRegistry).
func unwrap(st store.Store) store.Store {
	if w, ok := st.(interface{ Unwrap() store.Store }); ok {
		return w.Unwrap()
	}
	return st
}
