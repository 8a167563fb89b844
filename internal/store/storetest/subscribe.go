package storetest

import (
	"context"
	"testing"

	"github.com/rotahq/rota/internal/store"
)

// Subscribe runs st.Subscribe in the background until the test ends and
// returns the channel of what it delivers (up to 4096 queued; more are
// dropped, as a receiver's hints may be). At the end it fails t unless
// Subscribe returned nil once its context ended. For the notification
// tests of the backends that notify.
func Subscribe(t *testing.T, st store.Store) <-chan store.Notification {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan store.Notification, 4096)
	done := make(chan error, 1)
	go func() {
		done <- st.Subscribe(ctx, func(n store.Notification) {
			select {
			case ch <- n:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Subscribe returned %v, want nil when its context ends", err)
		}
	})
	return ch
}
