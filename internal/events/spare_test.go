package events

import "testing"

// TestKeepSpare: the array of an appended batch is kept for the next turn
// while it is small or fits the batch, and let go once a burst made it
// much longer than the batches that follow.
func TestKeepSpare(t *testing.T) {
	for _, c := range []struct {
		n, c int
		want bool
	}{
		{200, 256, true},
		{10, 1024, true},     // small: kept whatever the batch
		{300, 1200, true},    // within 4× the batch
		{200, 4096, false},   // a burst's array, the load gone
		{10000, 10000, true}, // a full batch
		{10000, 16384, false},
	} {
		if got := keepSpare(c.n, c.c); got != c.want {
			t.Errorf("keepSpare(%d, %d) = %v, want %v", c.n, c.c, got, c.want)
		}
	}
}
