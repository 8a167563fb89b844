package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rotahq/rota/rotaclient"
)

// scaleBatch is the size of the batches that fill and refill the queue of
// the scale scenario (the API's largest).
const scaleBatch = 1000

// scale measures the claim throughput with a deep queue: for each depth N
// of Config.ScaleWaiting it submits N waiting tasks of a new kind (batches
// of 1,000 from 8 clients: "fill"), then starts the SDK worker and times
// Config.ScaleTasks claims and completions while a feeder submits one task
// for each one done, so that about N tasks wait throughout. Comparing the
// rates of a shallow and a deep queue shows what the depth costs a claim;
// the server's peak RSS after the fill is the memory a deep queue takes.
func (b *bench) scale(ctx context.Context, run int, add addFunc) error {
	for _, n := range b.cfg.ScaleWaiting {
		if err := b.scaleDepth(ctx, run, n, add); err != nil {
			return fmt.Errorf("%d waiting: %w", n, err)
		}
	}
	return nil
}

func (b *bench) scaleDepth(ctx context.Context, run, n int, add addFunc) error {
	kind := fmt.Sprintf("bench-scale-%d-%d-%d", run, n, time.Now().UnixNano())
	m0 := b.meter(ctx)
	start := time.Now()
	var next atomic.Int64
	err := parallel(8, func() error {
		for {
			i := next.Add(scaleBatch) - scaleBatch
			if i >= int64(n) {
				return nil
			}
			if err := b.submitN(ctx, kind, int(min(scaleBatch, int64(n)-i))); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return err
	}
	scn := fmt.Sprintf("scale, %d waiting", n)
	add(scn, "fill: batches of 1000, 8 clients", "tasks/s", float64(n)/time.Since(start).Seconds())
	b.addCost(ctx, add, scn, "fill", m0, n)

	m := b.cfg.ScaleTasks
	var done atomic.Int64
	finished := make(chan struct{})
	kick := make(chan struct{}, refillers)
	stop, err := b.worker(ctx, kind, func(payload, time.Time) {
		d := done.Add(1)
		if d == int64(m) {
			close(finished)
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer stop()
	m1 := b.meter(ctx)
	start = time.Now()
	fed := make(chan error, 1)
	go func() { fed <- b.refill(ctx, kind, m, &done, kick, finished) }()
	select {
	case <-finished:
	case err := <-fed:
		if err != nil {
			return err
		}
		<-finished
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("only %d of %d tasks done after 10 minutes", done.Load(), m)
	}
	add(scn, fmt.Sprintf("claim + complete through the SDK worker (%d tasks, concurrency %d)", m, b.cfg.Concurrency),
		"tasks/s", float64(m)/time.Since(start).Seconds())
	stop()
	if err := <-fed; err != nil {
		return err
	}
	b.addCost(ctx, add, scn, "claim + complete", m1, m)
	return nil
}

// refillers submit concurrently: one alone fell behind a worker draining
// a 1,000-task queue, which then ran near empty.
const refillers = 4

// refill submits one task of kind for each one done (in batches of up to
// 1,000 from refillers goroutines, at most total in all) until finished is
// closed.
func (b *bench) refill(ctx context.Context, kind string, total int, done *atomic.Int64, kick, finished <-chan struct{}) error {
	var sent atomic.Int64
	return parallel(refillers, func() error {
		for {
			select {
			case <-kick:
			case <-finished:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
			for {
				s := sent.Load()
				k := min(done.Load()-s, scaleBatch, int64(total)-s)
				if s >= int64(total) {
					return nil
				}
				if k <= 0 {
					break
				}
				if !sent.CompareAndSwap(s, s+k) {
					continue
				}
				if err := b.submitN(ctx, kind, int(k)); err != nil {
					return err
				}
			}
		}
	})
}

// submitN submits k no-op tasks of kind in one batch.
func (b *bench) submitN(ctx context.Context, kind string, k int) error {
	ps := make([]rotaclient.TaskParams, k)
	for j := range ps {
		ps[j] = rotaclient.TaskParams{Kind: kind, Payload: payload{}}
	}
	_, err := b.c.SubmitBatch(ctx, ps)
	return err
}
