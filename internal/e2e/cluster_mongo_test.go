package e2e

import (
	"testing"

	"github.com/rotahq/rota/internal/store/mongostore/mongotest"
)

// TestLeaderKilledHandsOverMongo is TestLeaderKilledHandsOver on MongoDB:
// the embedded FerretDB (or ROTA_TEST_MONGODB), a database of its own.
// The three-node task test does not run on FerretDB: it reads by scanning
// whole collections, and 300 tasks with a node and a worker killed did not
// finish within 5 minutes on this 2-core machine under CI's load.
func TestLeaderKilledHandsOverMongo(t *testing.T) {
	t.Parallel()
	db := clusterDB{"--store", mongotest.DB(t)}
	leaderKilledHandsOver(t, func(id string) *clusterNode { return startNode(t, db, id) })
}
