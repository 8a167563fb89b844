package dispatch

import (
	"slices"
	"sync"

	"github.com/rotahq/rota"
)

// waiters is the registry of long-poll claims waiting for work, by kind:
// the wake-up half of the claims (claims.go). A claim registers before it
// looks at the store, so a wake-up that lands between the look and the
// sleep is never missed. It has no background loop.
type waiters struct {
	mu     sync.Mutex              // guards byKind, next and the nextClaims
	byKind map[string][]*waiter    // oldest first
	next   map[string][]*nextClaim // the workers' boxes by kind (between.go)
	seq    map[string]*kindSeq     // the waiting hint by kind (between.go)
}

// waiter is one waiting claim.
type waiter struct {
	kinds      []string      // immutable
	pinnedOnly bool          // immutable: the claim takes only tasks pinned to its worker
	wake       chan struct{} // buffered 1
	// The hand-off (handoff.go): the claim's worker and address
	// (immutable), whether it sleeps (parked: between two looks at the
	// store, so a submit may take it) and whether a submit took it (taken:
	// handed then gets exactly one value, the runs handed out, maybe none).
	// parked and taken are guarded by waiters.mu.
	worker, address string
	max             int // the claim's Max: a claim of none is never taken
	parked, taken   bool
	handed          chan []rota.ClaimedRun // buffered 1
}

func newWaiters() *waiters {
	return &waiters{byKind: map[string][]*waiter{}, next: map[string][]*nextClaim{}, seq: map[string]*kindSeq{}}
}

// notify wakes up to n waiters of kind that may take unpinned tasks (all of
// them when n < 0), and with pinned every PinnedOnly waiter as well. A
// count n ≥ 0 stands for n unpinned tasks, which any worker may take: it
// never wakes a PinnedOnly claim unless pinned is set.
func (ws *waiters) notify(kind string, n int, pinned bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.byKind[kind] {
		if w.taken || w.pinnedOnly && n >= 0 && !pinned || !w.pinnedOnly && n == 0 {
			// (A taken claim gets its task from the submit that took it.)
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

func (ws *waiters) register(r ClaimRequest) *waiter {
	w := &waiter{kinds: r.Kinds, pinnedOnly: r.PinnedOnly, wake: make(chan struct{}, 1),
		worker: r.WorkerID, address: r.Address, max: r.Max, handed: make(chan []rota.ClaimedRun, 1)}
	ws.mu.Lock()
	for _, k := range r.Kinds {
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

// take takes the oldest parked claim of kind that may take unpinned tasks,
// for a submit to hand it a task: from then on nothing else wakes it, and
// the submit must send it exactly one value on handed. It returns nil when
// no claim of kind sleeps.
func (ws *waiters) take(kind string) *waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.byKind[kind] {
		if w.parked && !w.taken && !w.pinnedOnly && w.max > 0 {
			w.parked, w.taken = false, true
			return w
		}
	}
	return nil
}

// park marks w as sleeping: a submit may take it until unpark.
func (ws *waiters) park(w *waiter) {
	ws.mu.Lock()
	w.parked = true
	ws.mu.Unlock()
}

// unpark ends w's sleep and reports whether a submit took it meanwhile
// (the claim must then receive from handed, which the submit sends on
// once its insert is done). w may be taken again at its next sleep.
func (ws *waiters) unpark(w *waiter) (taken bool) {
	ws.mu.Lock()
	taken = w.taken
	w.parked, w.taken = false, false
	ws.mu.Unlock()
	return taken
}
