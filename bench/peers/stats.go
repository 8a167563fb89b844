package main

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// metric is one figure measured by one run of a case.
type metric struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// throughput is n items over d as a metric in items/s.
func throughput(name string, n int, d time.Duration) metric {
	return metric{Name: name, Unit: "tasks/s", Value: float64(n) / d.Seconds()}
}

// percentiles turns durations into p50, p99 and max metrics in ms.
func percentiles(label string, ds []time.Duration) []metric {
	s := slices.Clone(ds)
	slices.Sort(s)
	return []metric{
		{Name: label + " p50", Unit: "ms", Value: ms(pct(s, 0.50))},
		{Name: label + " p99", Unit: "ms", Value: ms(pct(s, 0.99))},
		{Name: label + " max", Unit: "ms", Value: ms(pct(s, 1))},
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the nearest-rank q-quantile of sorted (q in [0, 1]), as Rota's own
// bench computes it.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// median of v (the mean of the two middle values for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// format prints a figure with about three significant digits.
func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// recorder collects durations from concurrent handlers and closes done
// once it holds want of them.
type recorder struct {
	mu   sync.Mutex
	ds   []time.Duration
	want int
	done chan struct{}
}

func newRecorder(want int) *recorder {
	r := &recorder{ds: make([]time.Duration, 0, want), want: want, done: make(chan struct{})}
	if want == 0 {
		close(r.done)
	}
	return r
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ds = append(r.ds, d)
	if len(r.ds) == r.want {
		close(r.done)
	}
}

func (r *recorder) durations() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ds)
}

// wait waits for the recorder to fill, at most d.
func (r *recorder) wait(d time.Duration) error {
	select {
	case <-r.done:
		return nil
	case <-time.After(d):
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Errorf("only %d of %d tasks started within %s", len(r.ds), r.want, d)
	}
}

// parallel runs fn(i) in n goroutines and returns their errors joined.
func parallel(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// paced calls submit total times at rate per second, each in a goroutine,
// at most 64 at once (an open-loop load, as Rota's own bench sends it), and
// returns the first error.
func paced(rate, total int, submit func() error) error {
	interval := time.Second / time.Duration(rate)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := submit(); err != nil {
				once.Do(func() { first = err })
			}
		})
	}
	wg.Wait()
	return first
}
