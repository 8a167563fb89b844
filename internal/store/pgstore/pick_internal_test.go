package pgstore

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/rotahq/rota/internal/store"
)

// roundSlots is a Go transcription of the SQL function round_slot: for
// each level (high, mid, low), the slots at which its first n tasks go out
// in weighted rounds of f² high, f mid and 1 low starting at position pos,
// counted from the start of pos's round.
func roundSlots(f, pos, n int) [3][]int64 {
	f = max(f, 1)
	count := [3]int{f * f, f, 1}       // slots per round
	first := [3]int{0, f * f, f*f + f} // first slot in the round
	round := store.RoundLen(f)
	pos = store.RoundPos(f, pos)
	var out [3][]int64
	for l := range 3 {
		from := max(pos, first[l])
		left := max(0, first[l]+count[l]-from) // the level's slots left in pos's round
		out[l] = make([]int64, n)
		for i := range n {
			if i < left {
				out[l][i] = int64(from + i)
				continue
			}
			j := i - left
			out[l][i] = int64(round*(1+j/count[l]) + first[l] + j%count[l])
		}
	}
	return out
}

// pickBySlots is what candidatesSQL does, over in-memory queues: rank each
// level's tasks, give the i-th the level's i-th slot (roundSlots), keep the
// max with the smallest slots; the position follows the last one taken.
func pickBySlots[T any](queues [3][]T, f, pos, max int) ([]T, int) {
	slots := roundSlots(f, pos, max)
	type item struct {
		slot int64
		v    T
	}
	var items []item
	for l := range 3 {
		for i, v := range queues[l][:min(max, len(queues[l]))] {
			items = append(items, item{slots[l][i], v})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.slot, b.slot) })
	items = items[:min(max, len(items))]
	if len(items) == 0 {
		return nil, store.RoundPos(f, pos)
	}
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return out, nextRoundPos(f, items[len(items)-1].slot)
}

// TestRoundSlotsMatchWeightedPick checks the slot restatement of the
// weighted round against store.WeightedPick over every small queue shape,
// factor, position and max.
func TestRoundSlotsMatchWeightedPick(t *testing.T) {
	t.Parallel()
	for f := 0; f <= 4; f++ {
		round := store.RoundLen(f)
		for pos := -1; pos <= round; pos++ {
			for n := 0; n <= 9; n++ {
				for n0 := 0; n0 <= 6; n0++ {
					for n1 := 0; n1 <= 5; n1++ {
						for n2 := 0; n2 <= 4; n2++ {
							var queues [3][]string
							for l, k := range []int{n0, n1, n2} {
								for i := range k {
									queues[l] = append(queues[l], fmt.Sprintf("%d.%d", l, i))
								}
							}
							wantOut, wantPos := store.WeightedPick(queues, f, pos, n)
							gotOut, gotPos := pickBySlots(queues, f, pos, n)
							if !slices.Equal(gotOut, wantOut) || gotPos != wantPos {
								t.Fatalf("f=%d pos=%d max=%d queues=%d/%d/%d: got %v pos %d, want %v pos %d",
									f, pos, n, n0, n1, n2, gotOut, gotPos, wantOut, wantPos)
							}
						}
					}
				}
			}
		}
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind string
		at   int64
		node string
	}{
		{"email", 0, "node-1"},
		{"a.b:c-d_e", 1767225600123, ""},
		{"k", 42, "node|with|bars"},
	}
	for _, c := range cases {
		n, node, ok := decodePayload(encodePayload(c.kind, c.at, c.node))
		want := store.Notification{Kind: c.kind, RunAt: tm(c.at)}
		if !ok || n != want || node != c.node {
			t.Errorf("round trip of %+v: %+v %q %v", c, n, node, ok)
		}
	}
	for _, bad := range []string{"", "k", "k|x|n", "|1|n"} {
		if _, _, ok := decodePayload(bad); ok {
			t.Errorf("decodePayload(%q) ok, want refusal", bad)
		}
	}
}

func TestChannelName(t *testing.T) {
	t.Parallel()
	if got := channelName("public"); got != "rota.public" {
		t.Errorf("channelName(public) = %q", got)
	}
	long := channelName(string(make([]byte, 63)))
	if len(long) > 63 || long == channelName(string(make([]byte, 62))) {
		t.Errorf("channelName of a long schema = %q (len %d)", long, len(long))
	}
}

func TestNotesMerge(t *testing.T) {
	t.Parallel()
	a := notes{}
	a.add("k", 100, 200, false)  // due: now
	a.add("k", 5000, 200, false) // later
	a.add("k", 3000, 200, false) // earlier later
	a.add("j", 9000, 200, false)
	b := notes{}
	b.add("j", 7000, 100, false)
	b.add("i", 50, 100, false)
	b.add("h", 50, 100, true) // the sender hears it too: anonymous
	a.merge(b)
	got := a.payloads("n1", false)
	want := []string{"h|0|", "i|0|n1", "j|7000|n1", "k|0|n1", "k|3000|n1"}
	if !slices.Equal(got, want) {
		t.Fatalf("payloads = %q, want %q", got, want)
	}
	// A node that knows no other listening node sends only what it must
	// hear itself.
	if got, want := a.payloads("n1", true), []string{"h|0|"}; !slices.Equal(got, want) {
		t.Fatalf("payloads alone = %q, want %q", got, want)
	}
}

func TestDecodeControl(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p, what, node string
		ok            bool
	}{
		{"|hello|n1", helloControl, "n1", true},
		{"|here|node|with|bars", hereControl, "node|with|bars", true},
		{"|other|n1", "", "", false},
		{"k|0|n1", "", "", false},
		{"|here", "", "", false},
	} {
		what, node, ok := decodeControl(c.p)
		if ok != c.ok || (ok && (what != c.what || node != c.node)) {
			t.Errorf("decodeControl(%q) = %q, %q, %v; want %q, %q, %v", c.p, what, node, ok, c.what, c.node, c.ok)
		}
		// An older node's decoder finds no kind in it.
		if _, _, old := decodePayload(c.p); c.ok && old {
			t.Errorf("decodePayload(%q) accepted a control payload", c.p)
		}
	}
}
