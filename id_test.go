package rota_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
)

// TestValidMatchesPattern checks ValidKind and ValidID, hand-written
// loops, against the patterns they document, on edge cases and on random
// strings over an alphabet with every kind of byte that matters.
func TestValidMatchesPattern(t *testing.T) {
	t.Parallel()
	kindRE, idRE := regexp.MustCompile(rota.KindPattern), regexp.MustCompile(rota.IDPattern)
	check := func(s string) {
		t.Helper()
		if got, want := rota.ValidKind(s), kindRE.MatchString(s); got != want {
			t.Errorf("ValidKind(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := rota.ValidID(s), idRE.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, the pattern says %v", s, got, want)
		}
	}
	for _, s := range []string{"", "a", "email.send", "a:b-c_d.e", "a b", "a\\n", "é", "a/b",
		strings.Repeat("k", 128), strings.Repeat("k", 129),
		strings.Repeat("0f", 16), strings.Repeat("0F", 16), strings.Repeat("0f", 16) + "\\n", strings.Repeat("g", 32),
		new(rota.IDGenerator).New(time.Now()), strings.Repeat("a", 31)} {
		check(s)
	}
	const alphabet = "azAZ09_.:-/ \x00\xff\n0123456789abcdefg|"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(40))
		if r.IntN(4) == 0 {
			b = make([]byte, 32)
		}
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

func FuzzValidKind(f *testing.F) {
	kindRE, idRE := regexp.MustCompile(rota.KindPattern), regexp.MustCompile(rota.IDPattern)
	for _, s := range []string{"email.send", "", "a b", strings.Repeat("0f", 16)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := rota.ValidKind(s), kindRE.MatchString(s); got != want {
			t.Errorf("ValidKind(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := rota.ValidID(s), idRE.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

// TestNewNContinuesNew checks that NewN makes the ids New would have made
// one after the other: valid, strictly increasing across New and NewN
// calls, within one millisecond and across them.
func TestNewNContinuesNew(t *testing.T) {
	t.Parallel()
	var g rota.IDGenerator
	now := time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 20 {
		at := now.Add(time.Duration(i/4) * time.Millisecond)
		if i%2 == 0 {
			ids = append(ids, g.New(at))
		} else {
			batch := g.NewN(at, i)
			if len(batch) != i {
				t.Fatalf("NewN(%d) made %d ids", i, len(batch))
			}
			ids = append(ids, batch...)
		}
	}
	for i, id := range ids {
		if !rota.ValidID(id) {
			t.Fatalf("id %d %q is not valid", i, id)
		}
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("id %d %q does not sort after %q", i, id, ids[i-1])
		}
	}
	if got := g.NewN(now, 0); got != nil {
		t.Fatalf("NewN(0) = %v", got)
	}
}

func BenchmarkNewN256(b *testing.B) {
	var g rota.IDGenerator
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = g.NewN(now, 256)
	}
}
