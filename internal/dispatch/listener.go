package dispatch

import (
	"context"
	"errors"
	"log/slog"

	"github.com/rotahq/rota/internal/store"
)

// ListenerStore is what the listener asks of the store.
type ListenerStore interface {
	// SupportsNotify and Subscribe: see store.Store.
	SupportsNotify() bool
	Subscribe(ctx context.Context, fn func(store.Notification)) error
}

// ListenerConfig configures a Listener. Zero values mean the defaults.
type ListenerConfig struct {
	Store ListenerStore // required
	// Handle receives each notification (from the subscription's goroutine;
	// it must not block). Required.
	Handle func(store.Notification)
	Logger *slog.Logger // default slog.Default()
}

// Listener subscribes to the store's change notifications (tasks made
// claimable by any node) and hands them to Handle: the cross-node half of
// the wake-ups. With a store whose SupportsNotify is false it does nothing.
type Listener struct {
	service
	cfg ListenerConfig // immutable after NewListener
}

// NewListener returns a Listener; Start runs it.
func NewListener(cfg ListenerConfig) (*Listener, error) {
	if cfg.Store == nil || cfg.Handle == nil {
		return nil, errors.New("dispatch: listener: Store and Handle are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Listener{service: service{name: "listener"}, cfg: cfg}, nil
}

// Start subscribes in the background until ctx ends or Stop; it does
// nothing when the store cannot notify.
func (l *Listener) Start(ctx context.Context) error {
	if !l.cfg.Store.SupportsNotify() {
		return nil
	}
	return l.start(ctx, func(ctx context.Context) {
		if err := l.runOnce(ctx); err != nil {
			l.cfg.Logger.Error("dispatch: subscribe to store notifications", "err", err)
		}
	})
}

// Stop ends the subscription and waits for it. It is idempotent.
func (l *Listener) Stop() { l.stop() }

// runOnce holds one subscription until ctx ends (nil) or it fails (its
// error). The store's Subscribe reconnects by itself; a failure here is
// final for this node's cross-node wake-ups (the safety poll remains).
func (l *Listener) runOnce(ctx context.Context) error {
	err := l.cfg.Store.Subscribe(ctx, l.cfg.Handle)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
