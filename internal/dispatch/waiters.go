package dispatch

import (
	"slices"
	"sync"
)

// waiters is the registry of long-poll claims waiting for work, by kind:
// the wake-up half of the claims (claims.go). A claim registers before it
// looks at the store, so a wake-up that lands between the look and the
// sleep is never missed. It has no background loop.
type waiters struct {
	mu     sync.Mutex           // guards byKind
	byKind map[string][]*waiter // oldest first
}

// waiter is one waiting claim.
type waiter struct {
	kinds      []string      // immutable
	pinnedOnly bool          // immutable: the claim takes only tasks pinned to its worker
	wake       chan struct{} // buffered 1
}

func newWaiters() *waiters { return &waiters{byKind: map[string][]*waiter{}} }

// notify wakes up to n waiters of kind that may take unpinned tasks (all of
// them when n < 0), and with pinned every PinnedOnly waiter as well. A
// count n ≥ 0 stands for n unpinned tasks, which any worker may take: it
// never wakes a PinnedOnly claim unless pinned is set.
func (ws *waiters) notify(kind string, n int, pinned bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.byKind[kind] {
		if w.pinnedOnly && n >= 0 && !pinned || !w.pinnedOnly && n == 0 {
			continue
		}
		select {
		case w.wake <- struct{}{}:
			if !w.pinnedOnly && n > 0 {
				n--
			}
		default: // already woken; it will look again anyway
		}
	}
}

// count returns how many claims wait for work of kind.
func (ws *waiters) count(kind string) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.byKind[kind])
}

// kinds returns the kinds that have waiters.
func (ws *waiters) kinds() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]string, 0, len(ws.byKind))
	for k := range ws.byKind {
		out = append(out, k)
	}
	return out
}

func (ws *waiters) register(kinds []string, pinnedOnly bool) *waiter {
	w := &waiter{kinds: kinds, pinnedOnly: pinnedOnly, wake: make(chan struct{}, 1)}
	ws.mu.Lock()
	for _, k := range kinds {
		ws.byKind[k] = append(ws.byKind[k], w)
	}
	ws.mu.Unlock()
	return w
}

func (ws *waiters) unregister(w *waiter) {
	ws.mu.Lock()
	for _, k := range w.kinds {
		list := ws.byKind[k]
		if i := slices.Index(list, w); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(ws.byKind, k)
		} else {
			ws.byKind[k] = list
		}
	}
	ws.mu.Unlock()
}
