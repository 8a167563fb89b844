package storetest

import (
	"time"

	"github.com/rotahq/rota/internal/store"
)

func electParams(node string, ttl time.Duration, now time.Time) store.LeaderElectParams {
	return store.LeaderElectParams{NodeID: node, TTL: ttl, Now: now}
}

func nodeParams(node string, started, now time.Time) store.NodeHeartbeatParams {
	return store.NodeHeartbeatParams{NodeID: node, Address: node + ".example:8080", Version: "test", StartedAt: started, Now: now}
}
