package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota/internal/store"
)

// queues makes three queues of n0 high, n1 mid and n2 low items named
// "h0", "m0", "l0"...
func queues(n0, n1, n2 int) [3][]string {
	var q [3][]string
	for l, n := range []int{n0, n1, n2} {
		for i := range n {
			q[l] = append(q[l], fmt.Sprintf("%c%d", "hml"[l], i))
		}
	}
	return q
}

func TestWeightedPick(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		q           [3][]string
		f, pos, max int
		want        string
		wantPos     int
	}{
		{"a round of factor 2 (4 high, 2 mid, 1 low)", queues(9, 9, 9), 2, 0, 14, "h0 h1 h2 h3 m0 m1 l0 h4 h5 h6 h7 m2 m3 l1", 0},
		{"factor 1", queues(3, 3, 3), 1, 0, 6, "h0 m0 l0 h1 m1 l1", 0},
		{"factor below 1 counts as 1", queues(3, 3, 3), -4, 0, 3, "h0 m0 l0", 0},
		{"resumes at pos", queues(9, 9, 9), 2, 4, 4, "m0 m1 l0 h0", 1},
		{"pos past the round restarts it", queues(9, 9, 9), 2, 7, 2, "h0 h1", 2},
		{"negative pos restarts the round", queues(9, 9, 9), 2, -1, 1, "h0", 1},
		{"empty high skips to mid", queues(0, 3, 3), 2, 0, 3, "m0 m1 l0", 0},
		{"empty mid skips to low", queues(9, 0, 3), 2, 3, 3, "h0 l0 h1", 1},
		{"only low", queues(0, 0, 2), 3, 5, 5, "l0 l1", 0},
		{"max 0 picks nothing, keeps pos", queues(1, 1, 1), 2, 3, 0, "", 3},
		{"all empty keeps pos", queues(0, 0, 0), 2, 5, 4, "", 5},
		{"fewer items than max", queues(1, 1, 0), 2, 0, 5, "h0 m0", 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			before := [3][]string{slices.Clone(c.q[0]), slices.Clone(c.q[1]), slices.Clone(c.q[2])}
			got, pos := store.WeightedPick(c.q, c.f, c.pos, c.max)
			if diff := cmp.Diff(c.want, strings.Join(got, " ")); diff != "" {
				t.Errorf("picks (-want +got):\n%s", diff)
			}
			if pos != c.wantPos {
				t.Errorf("next pos = %d, want %d", pos, c.wantPos)
			}
			if diff := cmp.Diff(before, c.q); diff != "" {
				t.Errorf("queues changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestWeightedPickResumes checks that picking in several claims from the
// returned position hands out the same order as one claim of them all.
func TestWeightedPickResumes(t *testing.T) {
	t.Parallel()
	for f := 0; f <= 3; f++ {
		for per := 1; per <= 5; per++ {
			q := queues(7, 5, 4)
			all, wantPos := store.WeightedPick(q, f, 0, 16)
			var got []string
			pos := 0
			for len(got) < len(all) {
				picked, next := store.WeightedPick(q, f, pos, per)
				got = append(got, picked...)
				for _, p := range picked {
					l := strings.IndexByte("hml", p[0])
					q[l] = q[l][1:]
				}
				pos = next
			}
			if !slices.Equal(got, all) || pos != wantPos {
				t.Errorf("f=%d, %d per claim: %v pos %d, want %v pos %d", f, per, got, pos, all, wantPos)
			}
		}
	}
}

func TestRoundPos(t *testing.T) {
	t.Parallel()
	cases := []struct{ f, pos, want, round int }{
		{2, 0, 0, 7}, {2, 6, 6, 7}, {2, 7, 0, 7}, {2, -1, 0, 7}, {0, 2, 2, 3}, {0, 3, 0, 3}, {3, 12, 12, 13},
	}
	for _, c := range cases {
		if got := store.RoundPos(c.f, c.pos); got != c.want {
			t.Errorf("RoundPos(%d, %d) = %d, want %d", c.f, c.pos, got, c.want)
		}
		if got := store.RoundLen(c.f); got != c.round {
			t.Errorf("RoundLen(%d) = %d, want %d", c.f, got, c.round)
		}
	}
}
