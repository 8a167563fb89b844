package rota_test

import (
	"fmt"
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

// TestNewBlock checks that the ids of a block, made as NewBlock documents,
// are valid and sort between the ids made before and after it, including
// blocks that would wrap the counter or cross 2⁶³, and that no id of a
// block is made twice.
func TestNewBlock(t *testing.T) {
	t.Parallel()
	var g rota.IDGenerator
	now := time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)
	var ids []string
	block := func(at time.Time, n int) {
		prefix, first := g.NewBlock(at, n)
		if int64(first) < 0 != (int64(first+uint64(n-1)) < 0) || first+uint64(n-1) < first {
			t.Fatalf("block of %d from %x wraps or changes sign", n, first)
		}
		// The first, second and last ids of the block (a big one is not
		// made whole).
		for _, i := range []int{0, min(1, n-1), n - 1} {
			if id := fmt.Sprintf("%s%016x", prefix, first+uint64(i)); len(ids) == 0 || id != ids[len(ids)-1] {
				ids = append(ids, id)
			}
		}
	}
	for i := range 200 {
		at := now.Add(time.Duration(i/8) * time.Millisecond)
		switch i % 4 {
		case 0:
			ids = append(ids, g.New(at))
		case 1:
			block(at, 1+i%7)
		case 2:
			block(at, 3)
		default:
			// Blocks big enough to reach 2⁶³ or the end of the counter
			// from a random start, now and then.
			block(at, 1<<62)
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
}
