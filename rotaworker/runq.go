package rotaworker

import (
	"context"
	"sync"
)

// runQueue runs a kind's claimed runs on goroutines that go on to the
// next run when theirs ends, rather than on one new goroutine a run: a
// goroutine's stack grows as it runs a handler (decoding a payload with
// reflection needs several times the initial stack), and a goroutine that
// is reused keeps its grown stack, and costs no new goroutine. A goroutine
// whose run ended waits, idle, to be handed the next one; idle goroutines
// end when the worker stops claiming.
//
// The goroutines are at most the runs the kind may hold (its concurrency
// plus its prefetch; see hand), busy or idle: a run waits in the queue
// only while a goroutine finishes the end of its previous run (its
// handler returned, its report queued, neither of which blocks), never
// for a handler.
type runQueue struct {
	// Immutable.
	max  int             // the most goroutines
	base context.Context // the runs' base context (Run's)
	runs *sync.WaitGroup // Run's count of its runs
	stop <-chan struct{} // the worker stops claiming: idle goroutines end

	mu      sync.Mutex
	runners int         // goroutines, busy or idle
	idle    []*runner   // idle goroutines, the last idle first (its stack is warmest)
	queue   []*runState // runs waiting for a goroutine, in arrival order
}

// runner is one goroutine of a runQueue.
type runner struct {
	next chan *runState // buffered 1: its next run, when it is idle
}

// start runs st's execute on a goroutine of the queue.
func (q *runQueue) start(st *runState) {
	q.mu.Lock()
	if n := len(q.idle); n > 0 {
		r := q.idle[n-1]
		q.idle[n-1] = nil
		q.idle = q.idle[:n-1]
		q.mu.Unlock()
		r.next <- st // never blocks: an idle runner's channel is empty
		return
	}
	if q.runners < q.max {
		q.runners++
		q.mu.Unlock()
		go q.run(st)
		return
	}
	q.queue = append(q.queue, st)
	q.mu.Unlock()
}

// run executes st, then the runs it is handed, until the worker stops
// claiming and it is idle.
func (q *runQueue) run(st *runState) {
	var r *runner
	for st != nil {
		st.execute(q.base, q.runs)
		if r == nil {
			r = &runner{next: make(chan *runState, 1)}
		}
		st = q.next(r)
	}
}

// next returns r's next run: the one that waited longest, else the one it
// is handed while idle; nil when the worker stops claiming (r is then
// done).
func (q *runQueue) next(r *runner) *runState {
	q.mu.Lock()
	if len(q.queue) > 0 {
		st := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		q.mu.Unlock()
		return st
	}
	q.queue = nil // let the backing array go
	select {
	case <-q.stop:
		q.runners--
		q.mu.Unlock()
		return nil
	default:
	}
	q.idle = append(q.idle, r)
	q.mu.Unlock()
	select {
	case st := <-r.next:
		return st
	case <-q.stop:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, o := range q.idle {
		if o == r { // not handed a run: done
			q.idle = append(q.idle[:i], q.idle[i+1:]...)
			q.runners--
			return nil
		}
	}
	return <-r.next // handed one as the stop began
}
