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
