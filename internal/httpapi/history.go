package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// Bounds of GET /api/stats/history.
const (
	maxHistoryHours   = 7 * 24
	maxHistoryBuckets = 1000
	minHistoryBucket  = time.Minute
)

// mountHistory registers the history route.
func (a *API) mountHistory(mux *http.ServeMux) {
	mount(a, mux, "GET /api/stats/history", bodyNone, a.statsHistory)
}

// historyRequest holds the query of GET /api/stats/history.
type historyRequest struct {
	hours  int
	bucket time.Duration
}

func (h *historyRequest) readRequest(r *http.Request) error {
	h.hours = 24
	err := readQuery(r,
		queryParam{"hours", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxHistoryHours {
				return rota.Invalid("hours", "must be an integer from 1 to %d, got %s", maxHistoryHours, shortQuote(v))
			}
			h.hours = n
			return nil
		}},
		queryParam{"bucket", func(v string) error {
			d, err := time.ParseDuration(v)
			if n, nerr := strconv.Atoi(v); nerr == nil {
				d, err = time.Duration(n)*time.Second, nil
			}
			if err != nil || d < minHistoryBucket || d%time.Minute != 0 {
				return rota.Invalid("bucket", "must be whole minutes, at least 1m, as a duration (15m, 1h) or seconds (900), got %s", shortQuote(v))
			}
			h.bucket = d
			return nil
		}})
	if err != nil {
		return err
	}
	window := time.Duration(h.hours) * time.Hour
	if h.bucket == 0 {
		h.bucket = max(minHistoryBucket, window/96) // 15m for a day
	}
	if n := window / h.bucket; n < 1 || n > maxHistoryBuckets {
		return rota.Invalid("bucket", "makes %d buckets of the %d hours; 1 to %d allowed", n, h.hours, maxHistoryBuckets)
	}
	return nil
}

// statsHistory aggregates the finished tasks of the last hours by bucket
// of end time: outcomes, queue wait and run duration. It reads the
// tasks table (every node sees the same), not any node's memory; tasks
// deleted by their kind's retention are no longer counted.
//
// GET /api/stats/history?hours=24&bucket=15m
func (a *API) statsHistory(ctx context.Context, req *historyRequest) (*rotaapi.History, error) {
	n := int(time.Duration(req.hours) * time.Hour / req.bucket)
	end := a.now().Truncate(req.bucket).Add(req.bucket) // the last bucket holds now
	p := store.HistoryParams{From: end.Add(-time.Duration(n) * req.bucket), Bucket: req.bucket, Buckets: n}
	hs, err := a.store.TaskHistory(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("task history: %w", err)
	}
	out := &rotaapi.History{BucketSeconds: int(req.bucket / time.Second), Buckets: make([]rotaapi.HistoryBucket, len(hs))}
	for i, b := range hs {
		o := rotaapi.HistoryBucket{Time: b.Start.Unix(), Succeeded: b.Succeeded, Failed: b.Failed, Canceled: b.Canceled,
			Started: b.Started, WaitMaxMs: b.WaitMaxMs, DurationMaxMs: b.DurationMaxMs}
		if b.Started > 0 {
			o.WaitAvgMs = b.WaitSumMs / int64(b.Started)
			o.DurationAvgMs = b.DurationSumMs / int64(b.Started)
		}
		out.Buckets[i] = o
	}
	return out, nil
}
