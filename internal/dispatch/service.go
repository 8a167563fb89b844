package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rotahq/rota/internal/clock"
)

// service is the lifecycle every background service of the package shares:
// start backgrounds a loop under a context derived from the caller's (the
// loop ends when that context ends or at stop); stop cancels the loop and
// waits for it, is idempotent, and is safe before start.
type service struct {
	name string // immutable: names the service in errors

	mu      sync.Mutex         // guards the fields below
	cancel  context.CancelFunc // nil until started
	done    chan struct{}      // closed when the loop returned
	stopped bool
}

// start runs loop in the background. A second start, or one after stop,
// fails.
func (s *service) start(ctx context.Context, loop func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		return fmt.Errorf("dispatch: %s: started after Stop", s.name)
	case s.cancel != nil:
		return fmt.Errorf("dispatch: %s: already started", s.name)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.cancel, s.done = cancel, done
	go func() {
		defer close(done)
		loop(ctx)
	}()
	return nil
}

// stop ends the loop and waits for it to return.
func (s *service) stop() {
	s.mu.Lock()
	s.stopped = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// sleep waits d on c, or until kick (may be nil) receives; it reports false
// when ctx ended first.
func sleep(ctx context.Context, c clock.Clock, d time.Duration, kick <-chan struct{}) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-kick:
	case <-ctx.Done():
		return false
	}
	return true
}
