package store

// WeightedPick takes up to max items from three FIFO queues (high, mid,
// low) in weighted rounds of f² high, f mid and 1 low slots (f below 1
// counts as 1), starting at position pos of the round (a position outside
// the round counts as 0) and skipping the rest of a level's slots when its
// queue is empty. It returns the picks in order and the position the next
// pick resumes from; the queues are not modified.
//
// It is the definition of the weighted priority (f² high, f mid, 1 low slots a round): sqlitestore
// applies it to its candidates, and pgstore's SQL restatement of the round
// is tested against it.
func WeightedPick[T any](queues [3][]T, f, pos, max int) ([]T, int) {
	f = max1(f)
	bounds := [3]int{f * f, f*f + f, f*f + f + 1} // end of each level's slots
	round := bounds[2]
	pos = RoundPos(f, pos)
	levelAt := func(p int) int {
		switch {
		case p < bounds[0]:
			return 0
		case p < bounds[1]:
			return 1
		}
		return 2
	}
	var out []T
	for len(out) < max {
		if len(queues[0])+len(queues[1])+len(queues[2]) == 0 {
			break
		}
		l := levelAt(pos)
		if len(queues[l]) == 0 {
			pos = bounds[l] % round // first slot of the next level
			continue
		}
		out = append(out, queues[l][0])
		queues[l] = queues[l][1:]
		pos = (pos + 1) % round
	}
	return out, pos
}

// RoundLen is the number of slots of a weighted round with factor f
// (f below 1 counts as 1): f² + f + 1.
func RoundLen(f int) int {
	f = max1(f)
	return f*f + f + 1
}

// RoundPos is pos as a position of the weighted round with factor f: pos
// itself inside the round, 0 outside it (a stored position from before a
// change of factor).
func RoundPos(f, pos int) int {
	if pos < 0 || pos >= RoundLen(f) {
		return 0
	}
	return pos
}

func max1(f int) int {
	if f < 1 {
		return 1
	}
	return f
}
