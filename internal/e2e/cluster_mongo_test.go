package e2e

import (
	"testing"
	"time"
)

// TestLeaderKilledHandsOverMongo is TestLeaderKilledHandsOver on MongoDB:
// the embedded FerretDB in a process of its own (or ROTA_TEST_MONGODB), a
// database of its own.
func TestLeaderKilledHandsOverMongo(t *testing.T) {
	t.Parallel()
	db := clusterDB{"--store", mongoDB(t)}
	leaderKilledHandsOver(t, func(id string) *clusterNode { return startNode(t, db, id) })
}

// The cluster test's load on FerretDB. The other stores take 2,000
// tasks with a 3 s heartbeat timeout; the embedded FerretDB v1 (one
// SQLite file behind one process, every task write three more round
// trips for its ticket, the claims of a kind in turn across the nodes)
// starts a claim of 16 tasks in seconds on this loaded 2-core machine:
// with 3 s, the runs of a claim lapsed before its worker had them (274
// of 286 runs ended "lease expired" in one try) and 600 tasks did not
// end in 5 minutes. With 30 s, 600 tasks took 243 s under a load
// average of 30 (28 reruns, each after its lease lapsed); 400 kept the
// test near 3 minutes until a CI run on 2026-11-28, with the mongostore
// and sqlitestore suites beside it, ended 172 of them in 4 minutes; 200
// keep the kills, the reruns and every check with half the load. The
// killed worker's runs lapse after 30 s. On the slower VM of 2026-11-29
// (a process start 15–30 ms), 92 of 200 ended in 4 minutes beside the
// rest of the package: 100 tasks, and 8 minutes to end them.
const (
	clusterTasksMongo  = 100
	clusterHBMongo     = 30
	clusterWithinMongo = 8 * time.Minute
)

// TestClusterThreeNodesMongo is TestClusterThreeNodes on MongoDB (the
// embedded FerretDB, or ROTA_TEST_MONGODB): three nodes, workers spread,
// a node and a worker killed with SIGKILL, every task SUCCESS, every
// rerun owed to a lapsed run.
func TestClusterThreeNodesMongo(t *testing.T) {
	t.Parallel()
	db := clusterDB{"--store", mongoDB(t)}
	clusterThreeNodesOf(t, func(id string) *clusterNode { return startNode(t, db, id) }, clusterTasksMongo, clusterHBMongo, clusterWithinMongo)
}
