package rotaworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// firstBeat bounds the wait for a run's first heartbeat: a stop made in a
// run's first moments reaches its handler within it. Runs shorter than this
// never heartbeat.
const firstBeat = time.Second

// beatResult is the outcome of one heartbeat.
type beatResult struct {
	sent time.Time // when it was sent: the server renewed the lease no earlier
	res  rotaclient.HeartbeatResult
	err  error
}

// beat sends one heartbeat with the progress note msg. A wait of a second
// or more lets the server hold the answer up to wait, answering at once if
// the task is stopped or the worker drained (a server too old for that is
// remembered and heartbeated plainly). It gives up when the lease ends.
func (st *runState) beat(ctx context.Context, msg string, wait time.Duration) beatResult {
	sent := time.Now()
	hctx, cancel := context.WithDeadline(ctx, st.lease())
	defer cancel()
	c, runID, id := st.w.client, st.claimed.RunID, st.w.cfg.ID
	var (
		res rotaclient.HeartbeatResult
		err error
	)
	if wait >= time.Second && msg == "" && !st.w.plainBeats.Load() {
		res, err = c.HeartbeatWait(hctx, runID, id, wait)
		var re *rota.Error
		if errors.As(err, &re) && re.Field == "wait_seconds" { // unknown_field: an older server
			st.w.plainBeats.Store(true)
			st.log().Info("rotaworker: the server cannot hold heartbeats: a stop reaches handlers at their next heartbeat", "err", err)
			res, err = c.Heartbeat(hctx, runID, id, msg)
		}
	} else {
		res, err = c.Heartbeat(hctx, runID, id, msg)
	}
	st.log().Debug("rotaworker: heartbeat", "took", time.Since(sent), "wait", wait, "err", err)
	return beatResult{sent: sent, res: res, err: err}
}

// startBeats heartbeats the run in a goroutine of its own until the loop
// ends it; the outcomes come on l.beats. The loop starts it when the first
// heartbeat is due, min(interval, firstBeat) after the start; then one
// goes out per interval, each held by the server up to the interval's
// whole seconds: a heartbeat is pending nearly all the time, so a stop
// reaches the handler at once, without heartbeating more often than every
// interval.
func (l *runLoop) startBeats() {
	out := make(chan beatResult)
	ended := make(chan struct{})
	ctx, stop := context.WithCancel(l.base)
	l.beats, l.stopBeats, l.beatsEnded = out, stop, ended
	st := l.st
	go func() {
		defer close(ended)
		for {
			iv := st.interval()
			b := st.beat(ctx, "", iv.Truncate(time.Second))
			if ctx.Err() != nil {
				return
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
			if !sleepUntil(ctx, b.sent.Add(iv)) {
				return
			}
		}
	}()
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// onBeat applies a heartbeat's outcome: a renewed lease (following a
// changed heartbeat timeout), a drain, a stop, or the loss of the lease. It
// returns what Progress returns.
func (l *runLoop) onBeat(b beatResult) error {
	st := l.st
	if l.lost {
		return context.Cause(l.ctx)
	}
	switch err := b.err; {
	case err == nil:
		hb := st.heartbeatTimeout()
		if b.res.HeartbeatTimeout > 0 && b.res.HeartbeatTimeout != hb {
			// The task's heartbeat timeout was changed: follow it.
			hb = b.res.HeartbeatTimeout
			st.hb.Store(int64(hb))
		}
		st.renew(b.sent, hb)
		if b.res.Drain {
			st.log().Info("rotaworker: the server asked this worker to stop")
			st.w.graceful()
		}
		if b.res.Stop {
			l.cancelWith(ErrTaskStopped)
			return ErrTaskStopped
		}
		return nil
	case errors.Is(err, rota.ErrLeaseLost):
		l.loseLease(err)
		return err
	case errors.Is(err, rota.ErrNotFound):
		err = fmt.Errorf("%w: %v", rota.ErrLeaseLost, err)
		l.loseLease(err)
		return err
	case !time.Now().Before(st.lease()):
		err = fmt.Errorf("%w: no heartbeat acknowledged within %s (last error: %v)", rota.ErrLeaseLost, st.heartbeatTimeout(), err)
		l.loseLease(err)
		return err
	default:
		st.log().Warn("rotaworker: heartbeat failed", "err", err)
		return err
	}
}

// loseLease gives the run up: it is no longer ours.
func (l *runLoop) loseLease(err error) {
	l.lost = true
	l.endBeats()
	l.cancelWith(err)
}

// beatRequest asks the run loop for a heartbeat now, with a progress note.
type beatRequest struct {
	msg   string
	reply chan error
}

// progress heartbeats at once through the run loop.
func (st *runState) progress(ctx context.Context, msg string) error {
	reqs, loopDone, ok := st.loop.wakeForProgress() // the loop serves it
	if !ok {
		return fmt.Errorf("rotaworker: progress after the run ended")
	}
	req := beatRequest{msg: msg, reply: make(chan error, 1)}
	select {
	case reqs <- req:
	case <-loopDone:
		return fmt.Errorf("rotaworker: progress after the run ended")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
