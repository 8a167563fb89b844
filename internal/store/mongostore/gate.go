package mongostore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/rotahq/rota/internal/store/storecost"
)

// writeGate makes this process's writes to FerretDB take turns. FerretDB's
// SQLite backend writes under the database file's one write lock: writers
// that meet there back off in SQLite's busy handler (sleeps of up to
// 100 ms), so concurrent writes from one process are much slower than the
// same writes in a row. The gate works at the command monitor (a write
// command waits at its start for the previous one to finish); a command
// that never reports its end frees the gate after gateTimeout.
type writeGate struct {
	cost *storecost.Counter // counts every command: one statement, one round trip (writes: one commit)
	on   atomic.Bool
	sem  chan struct{}
	held sync.Map // request id → true, for the commands holding the gate
	next *event.CommandMonitor
}

const gateTimeout = 5 * time.Second

var writeCommands = map[string]bool{"insert": true, "update": true, "delete": true, "findAndModify": true}

func newWriteGate(next *event.CommandMonitor, cost *storecost.Counter) *writeGate {
	return &writeGate{sem: make(chan struct{}, 1), next: next, cost: cost}
}

func (g *writeGate) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			d := storecost.Counts{Statements: 1, RoundTrips: 1}
			if writeCommands[e.CommandName] {
				d.Commits = 1
			}
			g.cost.Add(ctx, d)
			if g.on.Load() && writeCommands[e.CommandName] {
				select {
				case g.sem <- struct{}{}:
					g.held.Store(e.RequestID, true)
				case <-time.After(gateTimeout):
				case <-ctx.Done():
				}
			}
			if g.next != nil && g.next.Started != nil {
				g.next.Started(ctx, e)
			}
		},
		Succeeded: func(ctx context.Context, e *event.CommandSucceededEvent) {
			g.release(e.RequestID)
			if g.next != nil && g.next.Succeeded != nil {
				g.next.Succeeded(ctx, e)
			}
		},
		Failed: func(ctx context.Context, e *event.CommandFailedEvent) {
			g.release(e.RequestID)
			if g.next != nil && g.next.Failed != nil {
				g.next.Failed(ctx, e)
			}
		},
	}
}

func (g *writeGate) release(requestID int64) {
	if _, ok := g.held.LoadAndDelete(requestID); ok {
		select {
		case <-g.sem:
		default:
		}
	}
}
