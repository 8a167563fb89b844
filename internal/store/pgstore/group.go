package pgstore

import "context"

// This file holds the group commit both the inserters and the completers
// run: a few goroutines each take a request from a queue, with it whatever
// else is queued at that moment (up to a bound), and apply them together in
// one transaction. An idle store applies a lone request at once; a busy one
// commits what arrived during the previous commit in the next.

// serveGroups takes groups of requests from q and applies them until the
// store closes. A group is the first request waited for, then those q
// holds right now while the group's size (the sum of size) is below max.
func serveGroups[R any](s *Store, q <-chan R, max int, size func(R) int, apply func(group []R)) {
	for {
		var first R
		select {
		case first = <-q:
		case <-s.closed:
			return
		}
		group, n := []R{first}, size(first)
	gather:
		for n < max {
			select {
			case r := <-q:
				group = append(group, r)
				n += size(r)
			default:
				break gather
			}
		}
		apply(group)
	}
}

// liveRequests returns the requests of group whose context is still live,
// after answering each of the others with fail and its context's error.
func liveRequests[R any](group []R, ctx func(R) context.Context, fail func(R, error)) []R {
	live := group[:0:0]
	for _, r := range group {
		if err := ctx(r).Err(); err != nil {
			fail(r, err)
			continue
		}
		live = append(live, r)
	}
	return live
}
