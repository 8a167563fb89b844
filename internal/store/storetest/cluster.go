package storetest

import (
	"sync"
	"testing"
	"time"
)

// testCluster covers leader election and the node registry.
func testCluster(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "ElectExtendExpire", clusterElectExtendExpire)

	parallel(t, ns, "Resign", clusterResign)

	parallel(t, ns, "ConcurrentElection", clusterConcurrentElection)

	parallel(t, ns, "NodeRegistry", clusterNodeRegistry)

	parallel(t, ns, "RegistryTerms", clusterRegistryTerms)
}

// clusterElectExtendExpire is the ElectExtendExpire subtest of testCluster.
func clusterElectExtendExpire(t *testing.T, f *Fixture) {
	ttl := 10 * time.Second
	a, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("a", ttl, f.At(0)))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Leader || a.LeaderID != "a" || a.Term < 1 || !a.ExpiresAt.Equal(f.At(ttl)) {
		t.Fatalf("first election = %+v, want a leads until %v", a, f.At(ttl))
	}
	b, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("b", ttl, f.At(5*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if b.Leader || b.LeaderID != "a" || b.Term != a.Term {
		t.Fatalf("b during a's lease = %+v, want a still leading in term %d", b, a.Term)
	}
	a2, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("a", ttl, f.At(8*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if !a2.Leader || a2.Term != a.Term || !a2.ExpiresAt.Equal(f.At(18*time.Second)) {
		t.Fatalf("a extending = %+v, want same term %d until +18s", a2, a.Term)
	}
	// a falls silent: b takes over after the lease, with a new term.
	b2, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("b", ttl, f.At(18*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if !b2.Leader || b2.LeaderID != "b" || b2.Term <= a.Term {
		t.Fatalf("b after a's lease = %+v, want b leading in a term above %d", b2, a.Term)
	}
	// The deposed a learns it is no longer leader.
	a3, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("a", ttl, f.At(19*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if a3.Leader || a3.LeaderID != "b" || a3.Term != b2.Term {
		t.Fatalf("deposed a = %+v, want b leading in term %d", a3, b2.Term)
	}
}

// clusterResign is the Resign subtest of testCluster.
func clusterResign(t *testing.T, f *Fixture) {
	ttl := time.Minute
	a, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("a", ttl, f.At(0)))
	if err != nil || !a.Leader {
		t.Fatalf("elect a: %+v, %v", a, err)
	}
	if err := f.Store.LeaderResign(f.Ctx(), "b"); err != nil { // not the leader: no effect
		t.Fatal(err)
	}
	b, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("b", ttl, f.At(time.Second)))
	if err != nil || b.Leader {
		t.Fatalf("b after b's no-op resign = %+v, %v; want a still leading", b, err)
	}
	if err := f.Store.LeaderResign(f.Ctx(), "a"); err != nil {
		t.Fatal(err)
	}
	b, err = f.Store.LeaderAttemptElect(f.Ctx(), electParams("b", ttl, f.At(2*time.Second)))
	if err != nil || !b.Leader || b.Term <= a.Term {
		t.Fatalf("b after a resigned = %+v, %v; want b leading in a new term", b, err)
	}
}

// clusterConcurrentElection is the ConcurrentElection subtest of testCluster.
func clusterConcurrentElection(t *testing.T, f *Fixture) {
	const n = 8
	var wg sync.WaitGroup
	results := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams(string(rune('a'+i)), time.Minute, f.At(0)))
			results[i], errs[i] = r.Leader, err
		}()
	}
	wg.Wait()
	leaders := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i, errs[i])
		}
		if results[i] {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d nodes think they lead, want exactly 1", leaders)
	}
}

// clusterNodeRegistry is the NodeRegistry subtest of testCluster.
func clusterNodeRegistry(t *testing.T, f *Fixture) {
	for i, id := range []string{"n1", "n2"} {
		if err := f.Store.NodeHeartbeat(f.Ctx(), nodeParams(id, f.At(0), f.At(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Store.LeaderAttemptElect(f.Ctx(), electParams("n2", time.Minute, f.At(time.Second))); err != nil {
		t.Fatal(err)
	}
	nodes, err := f.Store.NodeList(f.Ctx(), f.At(5*time.Second), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].ID != "n1" || nodes[1].ID != "n2" {
		t.Fatalf("nodes = %+v, want n1 and n2", nodes)
	}
	if nodes[0].Leader || !nodes[1].Leader {
		t.Fatalf("leader flags = %v,%v; want n2 only", nodes[0].Leader, nodes[1].Leader)
	}
	if nodes[1].Address != "n2.example:8080" || nodes[1].Version != "test" || !nodes[1].StartedAt.Equal(f.At(0)) ||
		!nodes[1].LastHeartbeat.Equal(f.At(time.Second)) {
		t.Fatalf("n2 = %+v", nodes[1])
	}
	// n1 was last seen at +0s: gone from a list at +10.5s with 10s liveness.
	nodes, err = f.Store.NodeList(f.Ctx(), f.At(10500*time.Millisecond), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].ID != "n2" {
		t.Fatalf("live nodes at +10.5s = %+v, want only n2", nodes)
	}
	if err := f.Store.NodeRemove(f.Ctx(), "n2"); err != nil {
		t.Fatal(err)
	}
	nodes, err = f.Store.NodeList(f.Ctx(), f.At(2*time.Second), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].ID != "n1" {
		t.Fatalf("after removing n2 = %+v, want only n1", nodes)
	}
}
