// Package metrics defines Rota's Prometheus metrics. New registers them on
// a *prometheus.Registry the caller owns (never the default registry), so
// that tests and several servers in one process never collide; every label
// value is created at zero up front, so dashboards and alerts see a series
// before its first event.
//
// The methods of *Metrics are safe on a nil receiver (they do nothing):
// components take an optional *Metrics.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rotahq/rota"
)

// Metrics holds the collectors. Create it with New.
type Metrics struct {
	// Schedules: runs by status, skips by policy, misfires and fire lateness.

	// RunsTotal counts schedule runs by status: SCHEDULED and SKIPPED as
	// the engine records them, the terminal statuses as the runs end,
	// whoever executed them (rota_runs_total{status}).
	RunsTotal *prometheus.CounterVec
	// OverlapSkipped counts fires skipped by overlap_action SKIP
	// (rota_task_overlap_skipped_total).
	OverlapSkipped prometheus.Counter
	// FailureRetry counts runs fired as retries by failure_action RETRY
	// (rota_task_failure_retry_total).
	FailureRetry prometheus.Counter
	// Timeout counts schedule runs that ended TIMEOUT, executed by a
	// worker or the HTTP executor (rota_task_timeout_total).
	Timeout prometheus.Counter
	// ConcurrencySkipped counts fires skipped by concurrency_policy SKIP or
	// a full QUEUE (rota_concurrency_skipped_total).
	ConcurrencySkipped prometheus.Counter
	// MisfireDropped counts fire times dropped by misfire_policy or the
	// catch-up cap, recorded as SKIPPED runs or not
	// (rota_misfire_dropped_total).
	MisfireDropped prometheus.Counter
	// FireLateness observes, for each run fired, the time from its fire
	// time to its creation in the store
	// (rota_schedule_fire_lateness_seconds).
	FireLateness prometheus.Histogram
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		RunsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rota_runs_total",
			Help: "Schedule runs by status: SCHEDULED and SKIPPED as fired by the engine, terminal statuses as the runs end (workers and the HTTP executor).",
		}, []string{"status"}),
		OverlapSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rota_task_overlap_skipped_total",
			Help: "Schedule fires skipped because the previous run was unfinished (overlap_action SKIP).",
		}),
		FailureRetry: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rota_task_failure_retry_total",
			Help: "Schedule runs fired as a retry of a failed run (failure_action RETRY).",
		}),
		Timeout: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rota_task_timeout_total",
			Help: "Schedule runs that ended TIMEOUT (workers and the HTTP executor).",
		}),
		ConcurrencySkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rota_concurrency_skipped_total",
			Help: "Schedule fires skipped because max_concurrency runs were unfinished (concurrency_policy SKIP, or QUEUE full).",
		}),
		MisfireDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rota_misfire_dropped_total",
			Help: "Missed schedule fire times dropped by misfire_policy or the catch-up cap.",
		}),
		FireLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rota_schedule_fire_lateness_seconds",
			Help:    "Time from a schedule fire time to the creation of its run.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	for _, s := range rota.Statuses() {
		m.RunsTotal.WithLabelValues(string(s))
	}
	for _, c := range []prometheus.Collector{m.RunsTotal, m.OverlapSkipped, m.FailureRetry, m.Timeout,
		m.ConcurrencySkipped, m.MisfireDropped, m.FireLateness} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Run counts one schedule run in status s.
func (m *Metrics) Run(s rota.Status) {
	if m != nil {
		m.RunsTotal.WithLabelValues(string(s)).Inc()
	}
}

// Skip counts a policy skip by its reason.
func (m *Metrics) Skip(r rota.SkipReason) {
	if m == nil {
		return
	}
	switch r {
	case rota.SkipOverlap:
		m.OverlapSkipped.Inc()
	case rota.SkipConcurrency, rota.SkipQueueFull:
		m.ConcurrencySkipped.Inc()
	}
}

// Retry counts a run fired as a retry.
func (m *Metrics) Retry() {
	if m != nil {
		m.FailureRetry.Inc()
	}
}

// TimedOut counts a run of the HTTP executor that timed out.
func (m *Metrics) TimedOut() {
	if m != nil {
		m.Timeout.Inc()
	}
}

// Misfires counts n dropped fire times.
func (m *Metrics) Misfires(n int64) {
	if m != nil && n > 0 {
		m.MisfireDropped.Add(float64(n))
	}
}

// ObserveEvent counts the end of a schedule's run, whoever executed it (a
// worker or Rota's HTTP executor): a task event of a task fired by a
// schedule in a terminal status other than SKIPPED (the engine counts
// those as it records them) adds to rota_runs_total, and TIMEOUT to
// rota_task_timeout_total. Wire it to the dispatcher's event sink.
func (m *Metrics) ObserveEvent(ev rota.Event) {
	if m == nil || ev.Type != rota.EventTask || ev.ScheduleID == "" {
		return
	}
	switch ev.Status {
	case rota.StatusSuccess, rota.StatusFailed, rota.StatusCanceled:
		m.Run(ev.Status)
	case rota.StatusTimeout:
		m.Run(ev.Status)
		m.TimedOut()
	}
}

// Lateness observes the lateness of one fired run.
func (m *Metrics) Lateness(d time.Duration) {
	if m != nil {
		m.FireLateness.Observe(max(d, 0).Seconds())
	}
}
