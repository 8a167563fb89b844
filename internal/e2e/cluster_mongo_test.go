package e2e

import (
	"testing"

	"github.com/rotahq/rota/internal/store/mongostore/mongotest"
)

// TestLeaderKilledHandsOverMongo is TestLeaderKilledHandsOver on MongoDB:
// the embedded FerretDB (or ROTA_TEST_MONGODB), a database of its own.
func TestLeaderKilledHandsOverMongo(t *testing.T) {
	t.Parallel()
	db := clusterDB{"--store", mongotest.DB(t)}
	leaderKilledHandsOver(t, func(id string) *clusterNode { return startNode(t, db, id) })
}

// clusterTasksMongo is the task count of TestClusterThreeNodesMongo.
// The other stores take 10,000; the embedded FerretDB (one SQLite file
// behind one process, every query but a read by _id filtered in Go over
// the whole collection, every task write three more round trips for its
// ticket) TODO figures.
const clusterTasksMongo = 600

// TestClusterThreeNodesMongo is TestClusterThreeNodes on MongoDB (the
// embedded FerretDB, or ROTA_TEST_MONGODB): three nodes, workers spread,
// a node and a worker killed with SIGKILL, every task SUCCESS, every
// rerun owed to a lapsed run.
func TestClusterThreeNodesMongo(t *testing.T) {
	t.Parallel()
	db := clusterDB{"--store", mongotest.DB(t)}
	clusterThreeNodesOf(t, func(id string) *clusterNode { return startNode(t, db, id) }, clusterTasksMongo)
}
