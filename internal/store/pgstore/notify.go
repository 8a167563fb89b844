package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
)

// SupportsNotify is true: nodes sharing the database hear of each other's
// changes through LISTEN/NOTIFY.
func (s *Store) SupportsNotify() bool { return true }

// Subscription timings.
const (
	// listenPing is how long the listening connection may stay silent
	// before Subscribe checks it with a ping, so a connection that died
	// without a word is noticed.
	listenPing = 30 * time.Second
	// pingTimeout bounds that check.
	pingTimeout = 5 * time.Second
	// Reconnection backoff: from minBackoff, doubling up to maxBackoff,
	// with jitter.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// Subscribe implements store.Store. It LISTENs on a connection of its own
// (not from the pool) on the schema's channel and calls fn, from the
// calling goroutine, for every notification, whichever node sent it. When
// the connection drops it reconnects with backoff; as notifications sent
// meanwhile are lost, it then calls fn once per known kind with a zero
// RunAt, so that receivers look again. It returns nil when ctx ends or the
// store is closed; it never gives up otherwise.
func (s *Store) Subscribe(ctx context.Context, fn func(store.Notification)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // Close ends the subscription too
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := minBackoff
	for attempt := 0; ; attempt++ {
		listening, err := s.listen(ctx, fn, attempt > 0)
		if ctx.Err() != nil {
			return nil
		}
		if listening {
			backoff = minBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		s.log.Warn("pgstore: notification connection lost; reconnecting", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listen opens the dedicated connection, LISTENs and delivers until the
// connection fails or ctx ends. listening reports whether LISTEN
// succeeded; resync makes it announce every kind once it has.
func (s *Store) listen(ctx context.Context, fn func(store.Notification), resync bool) (listening bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	if resync {
		kinds, err := s.KindList(ctx)
		if err != nil {
			return true, fmt.Errorf("list kinds after reconnecting: %w", err)
		}
		for _, k := range kinds {
			fn(store.Notification{Kind: k.Name})
		}
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, fmt.Errorf("ping: %w", err)
			}
			continue
		case err != nil:
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		if note, _, ok := decodePayload(n.Payload); ok {
			fn(note)
		}
	}
}
