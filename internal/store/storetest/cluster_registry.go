package storetest

import (
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
)

// clusterRegistryTerms covers LeaderAttemptElect with a registry's term
// (LeaderElectParams.Term > 0): the store records leaderships decided
// elsewhere, keeps terms growing and refuses a stale registry leader.
func clusterRegistryTerms(t *testing.T, f *Fixture) {
	ttl := 10 * time.Second
	elect := func(node string, term int64, at time.Duration) store.LeaderElectResult {
		t.Helper()
		res, err := f.Store.LeaderAttemptElect(f.Ctx(), store.LeaderElectParams{NodeID: node, TTL: ttl, Now: f.At(at), Term: term})
		if err != nil {
			t.Fatalf("elect %s in term %d: %v", node, term, err)
		}
		return res
	}
	// The first registry leader's term is the row's.
	if a := elect("a", 40, 0); !a.Leader || a.Term != 40 || !a.ExpiresAt.Equal(f.At(ttl)) {
		t.Fatalf("a in registry term 40 = %+v, want a leading in term 40 until %v", a, f.At(ttl))
	}
	// a renews: same term, lease extended.
	if a := elect("a", 40, 5*time.Second); !a.Leader || a.Term != 40 || !a.ExpiresAt.Equal(f.At(15*time.Second)) {
		t.Fatalf("a renewing = %+v, want term 40 until +15s", a)
	}
	// A newer registry leadership takes the row at once, lease or not.
	if b := elect("b", 47, 6*time.Second); !b.Leader || b.LeaderID != "b" || b.Term != 47 {
		t.Fatalf("b in registry term 47 = %+v, want b leading in term 47 at once", b)
	}
	// The stale registry leader a (term 40) is refused while b's lease runs,
	// and a write fenced with 40 is refused.
	if a := elect("a", 40, 7*time.Second); a.Leader || a.LeaderID != "b" || a.Term != 47 {
		t.Fatalf("stale a = %+v, want b still leading in term 47", a)
	}
	if err := store.CheckFence(40, true, 47, f.At(17*time.Second), f.At(7*time.Second)); err == nil {
		t.Fatal("CheckFence accepted term 40 while 47 leads")
	}
	// A registry term at or below the row's (a fresh registry after the
	// store elected by itself) takes a lapsed row with the row's term + 1.
	if c := elect("c", 3, 20*time.Second); !c.Leader || c.LeaderID != "c" || c.Term != 48 {
		t.Fatalf("c in registry term 3 after b's lease = %+v, want c leading in term 48", c)
	}
	// c keeps its row while it renews with its registry term.
	if c := elect("c", 3, 25*time.Second); !c.Leader || c.Term != 48 {
		t.Fatalf("c renewing = %+v, want term 48", c)
	}
	// An election by lease alone meets c's running lease: refused.
	if d := elect("d", 0, 26*time.Second); d.Leader || d.LeaderID != "c" || d.Term != 48 {
		t.Fatalf("d by lease during c's lease = %+v, want c leading in 48", d)
	}
}
