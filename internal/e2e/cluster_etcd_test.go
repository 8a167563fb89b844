package e2e

import (
	"testing"

	"github.com/rotahq/rota/internal/registry/etcdreg/etcdtest"
)

// The leader and cluster tests again with membership and election in an
// embedded etcd (--registry), tasks in PostgreSQL.

func TestLeaderKilledHandsOverEtcd(t *testing.T) {
	t.Parallel()
	schema, reg := clusterDBs()["postgres"](t), etcdtest.URL(etcdtest.Start(t), "")
	leaderKilledHandsOver(t, func(id string) *clusterNode { return startNode(t, schema, id, "--registry", reg) })
}

func TestClusterThreeNodesEtcd(t *testing.T) {
	t.Parallel()
	schema, reg := clusterDBs()["postgres"](t), etcdtest.URL(etcdtest.Start(t), "")
	clusterThreeNodes(t, func(id string) *clusterNode { return startNode(t, schema, id, "--registry", reg) })
}
