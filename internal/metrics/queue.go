package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// queueScrapeTimeout bounds the store reads of one scrape.
const queueScrapeTimeout = 5 * time.Second

// queueLatencyBuckets span a busy queue's milliseconds to a starved one's
// hour, in seconds.
var queueLatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Queue exposes the task queue's metrics:
//
//   - rota_tasks{kind,status}: tasks by kind and status (gauge),
//   - rota_queue_oldest_waiting_seconds{kind}: age of the oldest task ready
//     to be claimed (gauge),
//   - rota_kind_paused{kind}: 1 when the kind is paused (gauge),
//   - rota_workers{status}: workers by status, active, lost or stopped
//     (gauge),
//
// all four read from the store at scrape time, so that every node reports
// the whole cluster; and, counted from this node's dispatcher events
// (Observe):
//
//   - rota_tasks_submitted_total{kind}: tasks submitted,
//   - rota_task_runs_total{kind,status}: runs started (RUNNING) and ended
//     (SUCCESS, FAILED, TIMEOUT, CANCELED),
//   - rota_claim_latency_seconds{kind}: for every run start, the time the
//     task had been claimable (start − run_at: ready time to claim),
//   - rota_task_start_latency_seconds{kind}: the same for first attempts
//     only: enqueue → first start of a task due at submit (for a delayed
//     task, from its due time);
//
// and, set by the dispatcher's no-worker alarm (SetNoWorker):
//
//   - rota_kind_no_worker{kind}: 1 while the kind's ready tasks have had no
//     live worker for --no-worker-after, else 0 (gauge).
//
// Every label value of a kind known at start, or seen since, and of every
// status exists from the start at zero. Create it with NewQueue.
type Queue struct {
	// Immutable after NewQueue.
	st  store.Store
	now func() time.Time

	tasksDesc, oldestDesc, pausedDesc, workersDesc *prometheus.Desc

	submitted    *prometheus.CounterVec
	runs         *prometheus.CounterVec
	claimLatency *prometheus.HistogramVec
	startLatency *prometheus.HistogramVec
	noWorker     *prometheus.GaugeVec

	mu    sync.Mutex          // guards kinds
	kinds map[string]struct{} // kinds whose series exist

	statsMu  sync.Mutex    // guards the fields below; held across a read (scrapes take turns)
	stats    store.Stats   // the last read, when it was slow
	statsAt  time.Time     // when it was read (real clock)
	statsFor time.Duration // how long it serves scrapes; 0: read at every scrape
}

// A Stats read that takes slowStats or more and counted deepStats tasks or
// more (it counts every task: 1.27 s with 1,000,000 on PostgreSQL) serves
// the scrapes of ten times its duration, at most maxStatsAge: a deep queue
// then costs the store about a tenth of a core however often it is scraped.
// Quick reads are never reused, nor slow reads of a shallow queue (the
// machine was busy: the next read is not slow for the queue's depth, and
// a small queue's counts move too fast to be served late).
const (
	slowStats   = 100 * time.Millisecond
	deepStats   = 10_000
	maxStatsAge = 30 * time.Second
)

// queueRunStatuses are the run statuses rota_task_runs_total counts.
var queueRunStatuses = []rota.Status{rota.StatusRunning, rota.StatusSuccess, rota.StatusFailed, rota.StatusTimeout, rota.StatusCanceled}

// NewQueue creates the queue metrics, registers them on reg and creates
// the series of the kinds the store knows now. st is read at each scrape;
// now is the clock of those reads (nil: time.Now).
func NewQueue(reg prometheus.Registerer, st store.Store, now func() time.Time) (*Queue, error) {
	if st == nil {
		return nil, fmt.Errorf("metrics: NewQueue: nil store")
	}
	if now == nil {
		now = time.Now
	}
	q := &Queue{
		st:  st,
		now: now,
		tasksDesc: prometheus.NewDesc("rota_tasks",
			"Tasks by kind and status, read from the store at scrape time.", []string{"kind", "status"}, nil),
		oldestDesc: prometheus.NewDesc("rota_queue_oldest_waiting_seconds",
			"Age of the oldest task of the kind that is ready to be claimed (0 when none waits).", []string{"kind"}, nil),
		pausedDesc: prometheus.NewDesc("rota_kind_paused",
			"1 when the kind is paused (it hands out no tasks), else 0.", []string{"kind"}, nil),
		workersDesc: prometheus.NewDesc("rota_workers",
			"Workers by status (active, lost, stopped), read from the store at scrape time.", []string{"status"}, nil),
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rota_tasks_submitted_total",
			Help: "Tasks submitted through this node, by kind.",
		}, []string{"kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rota_task_runs_total",
			Help: "Task runs started (RUNNING) and ended (SUCCESS, FAILED, TIMEOUT, CANCELED) through this node, by kind.",
		}, []string{"kind", "status"}),
		claimLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rota_claim_latency_seconds",
			Help:    "For each run start, how long its task had been ready to be claimed (start − run_at), retries included.",
			Buckets: queueLatencyBuckets,
		}, []string{"kind"}),
		startLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rota_task_start_latency_seconds",
			Help:    "Enqueue to first start: for each first attempt, the time from the task's due time (its submit, unless delayed) to its start.",
			Buckets: queueLatencyBuckets,
		}, []string{"kind"}),
		noWorker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rota_kind_no_worker",
			Help: "1 while the kind's ready tasks have had no live worker serving the kind for --no-worker-after, else 0.",
		}, []string{"kind"}),
		kinds: map[string]struct{}{},
	}
	for _, c := range []prometheus.Collector{q, q.submitted, q.runs, q.claimLatency, q.startLatency, q.noWorker} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register queue metrics: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueScrapeTimeout)
	defer cancel()
	kinds, err := st.KindList(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics: list kinds: %w", err)
	}
	for _, k := range kinds {
		q.addKind(k.Name)
	}
	return q, nil
}

// addKind creates the event-counted series of kind at zero.
func (q *Queue) addKind(kind string) {
	if kind == "" {
		return
	}
	q.mu.Lock()
	_, known := q.kinds[kind]
	q.kinds[kind] = struct{}{}
	q.mu.Unlock()
	if known {
		return
	}
	q.submitted.WithLabelValues(kind)
	for _, s := range queueRunStatuses {
		q.runs.WithLabelValues(kind, string(s))
	}
	q.claimLatency.WithLabelValues(kind)
	q.startLatency.WithLabelValues(kind)
	q.noWorker.WithLabelValues(kind)
}

// SetNoWorker sets rota_kind_no_worker of kind. Its signature fits
// dispatch.Config.NoWorkerChanged.
func (q *Queue) SetNoWorker(kind string, on bool) {
	q.addKind(kind)
	q.noWorker.WithLabelValues(kind).Set(boolFloat(on))
}

// Observe counts one dispatcher event. Its signature fits
// dispatch.Config.Events (next to the event hub's Publish); it does not
// block.
func (q *Queue) Observe(ev rota.Event) {
	q.addKind(ev.Kind)
	switch ev.Type {
	case rota.EventTask:
		if ev.Status == rota.StatusScheduled && ev.Attempt == 0 {
			q.submitted.WithLabelValues(ev.Kind).Inc()
		}
	case rota.EventRun:
		switch ev.Status {
		case rota.StatusRunning:
			q.runs.WithLabelValues(ev.Kind, string(ev.Status)).Inc()
			if ev.RunAt.IsZero() || ev.Time.IsZero() {
				return
			}
			wait := max(ev.Time.Sub(ev.RunAt), 0).Seconds()
			q.claimLatency.WithLabelValues(ev.Kind).Observe(wait)
			if ev.Attempt == 1 {
				q.startLatency.WithLabelValues(ev.Kind).Observe(wait)
			}
		case rota.StatusSuccess, rota.StatusFailed, rota.StatusTimeout, rota.StatusCanceled:
			q.runs.WithLabelValues(ev.Kind, string(ev.Status)).Inc()
		}
	}
}

// Describe sends the descriptors of the scrape-time gauges.
func (q *Queue) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.tasksDesc
	ch <- q.oldestDesc
	ch <- q.pausedDesc
	ch <- q.workersDesc
}

// readStats reads the store's Stats, or reuses a slow read while it is
// fresh enough (see slowStats), its oldest-waiting ages moved on by the
// time since.
func (q *Queue) readStats(ctx context.Context, now time.Time) (store.Stats, error) {
	q.statsMu.Lock()
	defer q.statsMu.Unlock()
	if since := time.Since(q.statsAt); q.statsFor > 0 && since < q.statsFor {
		kinds := make([]store.KindStats, len(q.stats.Kinds))
		for i, k := range q.stats.Kinds {
			if k.OldestWaitingAge > 0 {
				k.OldestWaitingAge += since
			}
			kinds[i] = k
		}
		return store.Stats{Kinds: kinds}, nil
	}
	began := time.Now()
	stats, err := q.st.Stats(ctx, now)
	if err != nil {
		return stats, err
	}
	q.stats, q.statsAt, q.statsFor = stats, time.Now(), 0
	if took := q.statsAt.Sub(began); took >= slowStats && taskCount(stats) >= deepStats {
		q.statsFor = min(10*took, maxStatsAge)
	}
	return stats, nil
}

// taskCount is the number of tasks stats counted.
func taskCount(stats store.Stats) int {
	n := 0
	for _, k := range stats.Kinds {
		for _, c := range k.Counts {
			n += c
		}
	}
	return n
}

// Collect reads the store and sends the scrape-time gauges: every status
// of every kind (zeros included) and every worker status. A failing store
// read is reported as an invalid metric (the handler logs it and serves the
// rest).
func (q *Queue) Collect(ch chan<- prometheus.Metric) {
	// prometheus.Collector passes no context: a scrape is bounded by its
	// timeout instead (it is no background loop).
	ctx, cancel := context.WithTimeout(context.Background(), queueScrapeTimeout)
	defer cancel()
	now := q.now()
	if stats, err := q.readStats(ctx, now); err != nil {
		ch <- prometheus.NewInvalidMetric(q.tasksDesc, fmt.Errorf("read queue stats: %w", err))
	} else {
		seen := map[string]bool{}
		for _, k := range stats.Kinds {
			seen[k.Kind] = true
			q.addKind(k.Kind)
			for _, s := range rota.Statuses() {
				ch <- prometheus.MustNewConstMetric(q.tasksDesc, prometheus.GaugeValue, float64(k.Counts[s]), k.Kind, string(s))
			}
			ch <- prometheus.MustNewConstMetric(q.oldestDesc, prometheus.GaugeValue, max(k.OldestWaitingAge, 0).Seconds(), k.Kind)
			ch <- prometheus.MustNewConstMetric(q.pausedDesc, prometheus.GaugeValue, boolFloat(k.Paused), k.Kind)
		}
		// Kinds the store's stats leave out (no task yet) still get zeros.
		q.mu.Lock()
		var rest []string
		for k := range q.kinds {
			if !seen[k] {
				rest = append(rest, k)
			}
		}
		q.mu.Unlock()
		for _, k := range rest {
			for _, s := range rota.Statuses() {
				ch <- prometheus.MustNewConstMetric(q.tasksDesc, prometheus.GaugeValue, 0, k, string(s))
			}
			ch <- prometheus.MustNewConstMetric(q.oldestDesc, prometheus.GaugeValue, 0, k)
		}
	}
	if workers, err := q.st.WorkerList(ctx, now); err != nil {
		ch <- prometheus.NewInvalidMetric(q.workersDesc, fmt.Errorf("list workers: %w", err))
	} else {
		counts := map[rota.WorkerStatus]int{}
		for _, w := range workers {
			counts[w.Status]++
		}
		for _, s := range []rota.WorkerStatus{rota.WorkerActive, rota.WorkerLost, rota.WorkerStopped} {
			ch <- prometheus.MustNewConstMetric(q.workersDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
