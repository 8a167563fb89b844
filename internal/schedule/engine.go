package schedule

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/schedule/firetime"
	"github.com/rotahq/rota/internal/store"
)

// Defaults of EngineConfig.
const (
	// DefaultMaxCatchUp caps the fire times one schedule fires after a
	// stall or downtime (FIRE_NOW, CATCH_UP_LIMITED): the latest ones are
	// kept, so a schedule stopped for a year does not flood the queue.
	DefaultMaxCatchUp = 100
	// DefaultMaxMisfireRecords caps the dropped fire times recorded as
	// SKIPPED runs (reason misfire) at one catch-up; the others are only
	// counted (Schedule.MisfireDropped, rota_misfire_dropped_total).
	DefaultMaxMisfireRecords = 100
	// DefaultMaxQueued caps the runs a QUEUE schedule holds back; fires
	// beyond it are SKIPPED with reason queue_full.
	DefaultMaxQueued = 100
	// DefaultMisfireGrace is how late a fire time may be handled and still
	// count as on time rather than missed.
	DefaultMisfireGrace = time.Second
	// DefaultPollInterval is how often the engine looks for schedules
	// changed on other nodes and for the ends of runs it waits for.
	DefaultPollInterval = time.Second
	// DefaultBatchSize is the number of schedules fired by one store call.
	DefaultBatchSize = 256
	// DefaultFireAhead bounds how early the engine may decide a large batch
	// of fires (see EngineConfig.FireAhead).
	DefaultFireAhead = time.Second
)

// Dispatcher is what the engine needs of the dispatcher: waking the
// workers of a kind when runs become claimable, and the normal stop path
// for CANCEL_PREV. *dispatch.Dispatcher implements it.
type Dispatcher interface {
	Notify(kind string, n int)
	StopTask(ctx context.Context, id, message string) (*rota.Task, error)
}

// EngineConfig configures an Engine. Zero values mean the defaults.
type EngineConfig struct {
	Store      store.ScheduleStore // required
	Dispatcher Dispatcher          // required
	Clock      clock.Clock         // default clock.Real
	Logger     *slog.Logger        // default slog.Default()
	Metrics    *metrics.Metrics    // optional
	IDs        *rota.IDGenerator   // task ids of new runs; default a new one
	// Events, optional, receives the task event of each new run and a
	// schedule.fired or schedule.skipped event (Message: the reason).
	Events func(rota.Event)

	MaxCatchUp        int           // default DefaultMaxCatchUp
	MaxMisfireRecords int           // default DefaultMaxMisfireRecords
	MaxQueued         int           // default DefaultMaxQueued
	MisfireGrace      time.Duration // default DefaultMisfireGrace
	PollInterval      time.Duration // default DefaultPollInterval
	BatchSize         int           // default DefaultBatchSize
	// FireAhead bounds how long before their fire time the engine may
	// decide the schedules due at one instant, so that their runs exist
	// when the time comes however many there are: the lead is 1.5 times
	// the measured store time of that many fires plus 5 ms, at most FireAhead
	// (default DefaultFireAhead; negative: never ahead). Runs decided
	// ahead are stored with RunAt = their fire time, so no worker gets
	// them early; their workers are woken and CANCEL_PREV stops are sent
	// at the fire time. The policies then see the run state of up to the
	// lead before the fire time.
	FireAhead time.Duration
	// RetryBackoff is the delay before a plan re-runs an occurrence whose
	// run failed n times (failure_action RETRY); default 1s·2^(n−1),
	// at most 5 minutes.
	RetryBackoff func(n int) time.Duration
	// Term returns the fencing term of this node's leadership (see
	// store.CheckFence), which every fire batch carries: the store refuses
	// the batches of a deposed leader. Nil: 0, unfenced.
	Term func() int64
}

// Engine fires schedules. It runs on the leader only (SetLeader): it loads
// every schedule into a min-heap of next fire times, sleeps on the clock
// until the earliest, and fires the due schedules in batches, each
// schedule's fire one atomic, compare-and-set store call (ScheduleFire)
// whose decision is computed from the live run state inside the store's
// transaction. A (schedule, fire time) yields at most one run whatever
// happens: the store's unique key makes sure.
//
// Create it with NewEngine, Start it, and Stop it before the store closes.
// Tests drive it with a fake clock and RunOnce instead of Start.
type Engine struct {
	cfg EngineConfig // immutable after NewEngine

	runMu sync.Mutex // serialises passes (the loop and RunOnce)
	// Owned by the holder of runMu.
	entries   map[string]*entry
	due       entryHeap
	awaiting  map[string]bool // schedules waiting for a run to end
	rev       int64           // store revision loaded
	loadedGen int64           // leaderGen of the last full load
	nextPoll  time.Time
	perItem   float64 // measured store time of one fire, ns (moving average)
	posts     sync.WaitGroup

	mu        sync.Mutex // guards the fields below
	leader    bool
	leaderGen int64
	dirty     map[string]bool // schedules to reload (local changes)

	kick    chan struct{} // buffered 1: wakes the loop
	quit    chan struct{}
	done    chan struct{}
	started atomic.Bool
	stop    sync.Once
}

// entry is one schedule in memory.
type entry struct {
	s     rota.Schedule
	c     firetime.Timetable
	next  time.Time // due instant; zero when not in the heap
	index int       // in the heap; -1 when not
	bad   error     // the timetable does not compile
}

// NewEngine checks cfg and applies its defaults.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("schedule: nil Store")
	}
	if cfg.Dispatcher == nil {
		return nil, errors.New("schedule: nil Dispatcher")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.IDs == nil {
		cfg.IDs = &rota.IDGenerator{}
	}
	if cfg.MaxCatchUp <= 0 {
		cfg.MaxCatchUp = DefaultMaxCatchUp
	}
	if cfg.MaxMisfireRecords <= 0 {
		cfg.MaxMisfireRecords = DefaultMaxMisfireRecords
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = DefaultMisfireGrace
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.FireAhead == 0 {
		cfg.FireAhead = DefaultFireAhead
	}
	if cfg.RetryBackoff == nil {
		cfg.RetryBackoff = func(n int) time.Duration {
			if n > 9 {
				return 5 * time.Minute
			}
			return min(time.Second<<max(n-1, 0), 5*time.Minute)
		}
	}
	return &Engine{
		cfg:      cfg,
		entries:  map[string]*entry{},
		awaiting: map[string]bool{},
		dirty:    map[string]bool{},
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}, nil
}

// SetLeader tells the engine whether this node leads: only a leader fires.
// Gaining leadership reloads every schedule from the store; losing it
// forgets them. Safe to call from any goroutine (membership hooks).
func (e *Engine) SetLeader(leader bool) {
	e.mu.Lock()
	if e.leader != leader {
		e.leader = leader
		e.leaderGen++
	}
	e.mu.Unlock()
	e.wake()
}

// Changed tells the engine that schedule id was created, edited, paused,
// resumed, triggered or deleted on this node, so it reloads it at once
// instead of at its next poll. Safe from any goroutine.
func (e *Engine) Changed(id string) {
	e.mu.Lock()
	e.dirty[id] = true
	e.mu.Unlock()
	e.wake()
}

func (e *Engine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Start runs the engine's loop in the background until Stop or until ctx
// ends.
func (e *Engine) Start(ctx context.Context) error {
	if e.started.Swap(true) {
		return errors.New("schedule: engine already started")
	}
	go e.loop(ctx)
	return nil
}

// Stop ends the loop and waits for it (and for a fire in progress). It is
// idempotent; an engine never started stops at once.
func (e *Engine) Stop() {
	e.stop.Do(func() { close(e.quit) })
	if e.started.Load() {
		<-e.done
	}
	e.posts.Wait()
}

func (e *Engine) loop(ctx context.Context) {
	defer close(e.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := e.cfg.Clock
	for {
		sleep, err := e.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			e.cfg.Logger.Error("schedule engine", "err", err)
			sleep = e.cfg.PollInterval // back off while the store fails
		}
		t := c.NewTimer(sleep)
		select {
		case <-t.C():
		case <-e.kick:
		case <-e.quit:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// RunOnce makes one pass: it (re)loads what changed, fires every schedule
// due at the clock's now and returns how long the loop may sleep before
// the next pass. Tests call it after moving a fake clock.
func (e *Engine) RunOnce(ctx context.Context) (time.Duration, error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.mu.Lock()
	leader, gen := e.leader, e.leaderGen
	dirty := e.dirty
	e.dirty = map[string]bool{}
	e.mu.Unlock()
	if !leader {
		if e.loadedGen != 0 || len(e.entries) > 0 {
			e.forget()
		}
		return time.Hour, nil
	}
	c := e.cfg.Clock
	if e.loadedGen != gen {
		if err := e.loadAll(ctx); err != nil {
			return e.cfg.PollInterval, err
		}
		e.loadedGen = gen
		e.nextPoll = c.Now().Add(e.cfg.PollInterval)
	}
	var errs []error
	for id := range dirty {
		if err := e.reload(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if now := c.Now(); !now.Before(e.nextPoll) {
		if err := e.poll(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := e.watch(ctx); err != nil {
			errs = append(errs, err)
		}
		e.nextPoll = now.Add(e.cfg.PollInterval)
	}
	// Fire until nothing is due (a fire can make another due at once, e.g.
	// a plan occurrence skipped by a policy), within reason. The schedules
	// due at the next instant are taken ahead of it by the lead their
	// number needs.
	for range 1000 {
		if ctx.Err() != nil || e.stopping() {
			break
		}
		now := c.Now()
		var due []*entry
		at := now
		if len(e.due) > 0 {
			switch t := e.due[0].next; {
			case !t.After(now):
				due = e.popDue(now)
			case !t.After(now.Add(e.leadFor(e.countAt(t)))):
				due, at = e.popDue(t), t
			}
		}
		if len(due) == 0 {
			break
		}
		if err := e.fire(ctx, due, now, at); err != nil {
			errs = append(errs, err)
			break
		}
	}
	now := c.Now()
	sleep := e.nextPoll.Sub(now)
	if len(e.due) > 0 {
		t := e.due[0].next
		sleep = min(sleep, t.Add(-e.leadFor(e.countAt(t))).Sub(now))
	}
	return max(sleep, 0), errors.Join(errs...)
}

// stopping reports whether Stop was called.
func (e *Engine) stopping() bool {
	select {
	case <-e.quit:
		return true
	default:
		return false
	}
}

// countAt counts the schedules due at t.
func (e *Engine) countAt(t time.Time) int {
	n := 0
	for _, ent := range e.due {
		if ent.next.Equal(t) {
			n++
		}
	}
	return n
}

// leadFor is how long before their fire time the engine takes n
// schedules due at the same instant.
func (e *Engine) leadFor(n int) time.Duration {
	if e.cfg.FireAhead <= 0 {
		return 0
	}
	per := e.perItem
	if per == 0 {
		per = float64(500 * time.Microsecond)
	}
	// Half as much again as measured: the store's pace varies.
	return min(time.Duration(1.5*per*float64(n))+5*time.Millisecond, e.cfg.FireAhead)
}

// forget drops every schedule (leadership lost).
func (e *Engine) forget() {
	e.entries = map[string]*entry{}
	e.due = nil
	e.awaiting = map[string]bool{}
	e.rev = 0
	e.loadedGen = 0
}

func (e *Engine) loadAll(ctx context.Context) error {
	res, err := e.cfg.Store.ScheduleLoad(ctx, 0)
	if err != nil {
		return fmt.Errorf("schedule engine: load schedules: %w", err)
	}
	e.forget()
	for i := range res.Schedules {
		e.put(&res.Schedules[i])
	}
	e.rev = res.Rev
	// Every schedule may have held runs or an awaited plan run: look once.
	for id := range e.entries {
		e.awaiting[id] = true
	}
	return e.watch(ctx)
}

// poll loads the schedules changed since the last load (by any node).
func (e *Engine) poll(ctx context.Context) error {
	res, err := e.cfg.Store.ScheduleLoad(ctx, e.rev)
	if err != nil {
		return fmt.Errorf("schedule engine: load changes: %w", err)
	}
	for _, id := range res.Deleted {
		e.remove(id)
	}
	for i := range res.Schedules {
		s := &res.Schedules[i]
		if ent, ok := e.entries[s.ID]; ok && ent.s.Version >= s.Version {
			continue
		}
		e.put(s)
		e.awaiting[s.ID] = true
	}
	e.rev = max(e.rev, res.Rev)
	return nil
}

// reload reads one schedule again.
func (e *Engine) reload(ctx context.Context, id string) error {
	s, err := e.cfg.Store.ScheduleGet(ctx, id)
	switch {
	case errors.Is(err, rota.ErrNotFound):
		e.remove(id)
		return nil
	case err != nil:
		return fmt.Errorf("schedule engine: reload %s: %w", id, err)
	}
	e.put(s)
	e.awaiting[id] = true
	return nil
}

func (e *Engine) remove(id string) {
	if ent, ok := e.entries[id]; ok {
		if ent.index >= 0 {
			heap.Remove(&e.due, ent.index)
		}
		delete(e.entries, id)
	}
	delete(e.awaiting, id)
}

// put stores s in memory and places it in the heap.
func (e *Engine) put(s *rota.Schedule) {
	ent, ok := e.entries[s.ID]
	if !ok {
		ent = &entry{index: -1}
		e.entries[s.ID] = ent
	}
	recompile := !ok || ent.s.CronExpr != s.CronExpr || ent.s.Timezone != s.Timezone || ent.s.Name != s.Name ||
		(ent.s.Plan == nil) != (s.Plan == nil) || (s.Plan != nil && *ent.s.Plan != *s.Plan)
	ent.s = *s
	if recompile {
		ent.c, ent.bad = firetime.Compile(s)
		if ent.bad != nil {
			e.cfg.Logger.Warn("schedule engine: schedule cannot fire", "schedule", s.ID, "name", s.Name, "err", ent.bad)
		}
	}
	e.place(ent)
}

// place computes ent's next due instant and (re)positions it in the heap.
func (e *Engine) place(ent *entry) {
	s := &ent.s
	var next time.Time
	switch {
	case s.ErrorMessage != "" || !s.Enabled || s.Ended:
	case ent.bad != nil || stuck(ent):
		// Due at once: the fire records the error state.
		next = s.UpdatedAt
	case ent.c.Cron != nil:
		hw := s.HighWater
		if hw.IsZero() {
			hw = s.CreatedAt
		}
		if n, ok := ent.c.Cron.Next(hw); ok {
			next = n
		}
	case s.PlanRunID == "":
		next = s.NextFire
	}
	ent.next = next
	switch {
	case next.IsZero() && ent.index >= 0:
		heap.Remove(&e.due, ent.index)
	case !next.IsZero() && ent.index >= 0:
		heap.Fix(&e.due, ent.index)
	case !next.IsZero():
		heap.Push(&e.due, ent)
	}
	if s.PlanRunID != "" && s.Enabled {
		e.awaiting[s.ID] = true
	}
}

func (e *Engine) popDue(now time.Time) []*entry {
	var out []*entry
	for len(e.due) > 0 && !e.due[0].next.After(now) {
		out = append(out, heap.Pop(&e.due).(*entry))
	}
	return out
}

// watch looks at the unfinished runs of the schedules waiting for a run to
// end (a plan's run, held runs to release) and advances those whose wait
// is over.
func (e *Engine) watch(ctx context.Context) error {
	if len(e.awaiting) == 0 {
		return nil
	}
	ids := make([]string, 0, len(e.awaiting))
	for id := range e.awaiting {
		ids = append(ids, id)
	}
	open, err := e.cfg.Store.ScheduleOpenRuns(ctx, ids)
	if err != nil {
		return fmt.Errorf("schedule engine: watch runs: %w", err)
	}
	var ready []*entry
	for _, id := range ids {
		ent, ok := e.entries[id]
		if !ok || ent.bad != nil || !ent.s.Enabled {
			delete(e.awaiting, id)
			continue
		}
		runs := open[id]
		planEnded := ent.s.PlanRunID != ""
		held, active := 0, 0
		for i := range runs {
			r := &runs[i]
			if r.TaskID == ent.s.PlanRunID {
				planEnded = false
			}
			if r.StopRequested {
				continue
			}
			if r.Held {
				held++
			} else {
				active++
			}
		}
		releasable := held > 0 && active < max(ent.s.MaxConcurrency, 1)
		if ent.s.PlanRunID == "" && held == 0 {
			delete(e.awaiting, id)
		}
		if planEnded || releasable {
			if ent.index >= 0 {
				heap.Remove(&e.due, ent.index)
			}
			ready = append(ready, ent)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	now := e.cfg.Clock.Now()
	return e.fire(ctx, ready, now, now)
}

// fireItem is one schedule of a fire batch.
type fireItem struct {
	ent     *entry
	latest  []time.Time // due cron fire times (the latest ones)
	earlier int64       // due fire times before latest
	// Set by Decide (inside the store call; read after it returns).
	verdicts []verdict
	misfires int64
	waiting  bool // held runs or an awaited plan run remain
	start    time.Time
}

// fire fires the due schedules in batches of BatchSize, the batches
// concurrently (the store commits them together). now is the clock's
// reading; at (≥ now) the instant the fires are decided for: fire times up
// to at are due.
func (e *Engine) fire(ctx context.Context, due []*entry, now, at time.Time) error {
	items := make([]*fireItem, len(due))
	params := make([]store.ScheduleFireParams, len(due))
	keep := e.cfg.MaxCatchUp + e.cfg.MaxMisfireRecords
	var term int64
	if e.cfg.Term != nil {
		term = e.cfg.Term()
	}
	for i, ent := range due {
		it := &fireItem{ent: ent}
		if ent.c.Cron != nil && !ent.next.IsZero() && !ent.next.After(at) {
			it.latest, it.earlier = firetime.DueTimes(ent.c.Cron, ent.s.HighWater, at, keep)
		}
		items[i] = it
		params[i] = store.ScheduleFireParams{
			ID: ent.s.ID, Version: ent.s.Version, Now: now, Term: term,
			Decide: func(st store.ScheduleRunState) (store.ScheduleDecision, error) {
				dec, err := e.decide(it, st, at)
				for i := range dec.Runs {
					r := &dec.Runs[i]
					// Claimable at the fire time (decided ahead), or at
					// the jittered instant.
					runAt := r.FireTime.Add(firetime.Jitter(st.Schedule.ID, r.FireTime, st.Schedule.JitterSeconds))
					if r.Skip == "" && !r.Triggered && runAt.After(now) {
						r.RunAt = runAt
					}
				}
				return dec, err
			},
		}
	}
	results, errs := e.fireBatches(ctx, params)
	created := e.cfg.Clock.Now()
	var posts []func()
	i := 0
	for slot, res := range results {
		n := min(e.cfg.BatchSize, len(items)-slot*e.cfg.BatchSize)
		if res == nil {
			// The batch failed: put its schedules back; they are retried
			// at the next pass.
			for _, it := range items[i : i+n] {
				e.place(it.ent)
			}
			i += n
			continue
		}
		for j := range res {
			if post := e.settle(ctx, items[i+j], &res[j], created, at); post != nil {
				posts = append(posts, post)
			}
		}
		i += n
	}
	e.after(at, posts)
	return errors.Join(errs...)
}

// fireBatches applies params in batches of BatchSize, the batches
// concurrently (the store commits them together), and measures the
// store's pace. A failed batch's slot in the results is nil.
func (e *Engine) fireBatches(ctx context.Context, params []store.ScheduleFireParams) ([][]store.ScheduleFireResult, []error) {
	start := time.Now()
	results := make([][]store.ScheduleFireResult, (len(params)+e.cfg.BatchSize-1)/e.cfg.BatchSize)
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for slot := range results {
		lo := slot * e.cfg.BatchSize
		hi := min(lo+e.cfg.BatchSize, len(params))
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.cfg.Store.ScheduleFire(ctx, params[lo:hi])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("schedule engine: fire: %w", err))
				return
			}
			results[slot] = res
		}()
	}
	wg.Wait()
	if took := time.Since(start); len(params) >= 16 && len(errs) == 0 {
		per := float64(took) / float64(len(params))
		if e.perItem == 0 {
			e.perItem = per
		} else {
			e.perItem = 0.7*e.perItem + 0.3*per
		}
	}
	return results, errs
}

// after runs the wake-ups and stops of fires decided for at: now when at
// has come, else at at (on the clock, in the background).
func (e *Engine) after(at time.Time, posts []func()) {
	if len(posts) == 0 {
		return
	}
	run := func() {
		for _, p := range posts {
			p()
		}
	}
	wait := at.Sub(e.cfg.Clock.Now())
	if wait <= 0 {
		run()
		return
	}
	t := e.cfg.Clock.NewTimer(wait) // before the goroutine: the clock may move meanwhile
	e.posts.Add(1)
	go func() {
		defer e.posts.Done()
		defer t.Stop()
		select {
		case <-t.C():
		case <-e.quit:
		}
		run()
	}()
}

// settle takes in the outcome of one schedule's fire and returns what to
// do at the fire instant (wake workers, stop canceled runs).
func (e *Engine) settle(ctx context.Context, it *fireItem, res *store.ScheduleFireResult, created, at time.Time) func() {
	ent := it.ent
	if res.Err != nil {
		if !errors.Is(res.Err, rota.ErrConflict) && !errors.Is(res.Err, rota.ErrNotFound) {
			e.cfg.Logger.Error("schedule engine: fire", "schedule", ent.s.ID, "err", res.Err)
		}
		// Someone else changed it (an edit, a trigger, another engine):
		// read it again and decide anew.
		if err := e.reload(ctx, ent.s.ID); err != nil {
			e.cfg.Logger.Warn("schedule engine", "err", err)
			e.place(ent)
		}
		return nil
	}
	s := res.Schedule
	ready := 0
	m := e.cfg.Metrics
	for i := range res.Inserted {
		r := &res.Inserted[i]
		m.Run(r.Status)
		emitRun(e.cfg.Events, s, r)
		if j := firetime.Jitter(s.ID, r.FireTime, s.JitterSeconds); j > 0 && r.Status == rota.StatusScheduled && !r.Held {
			// Claimable at the jittered instant: wake its workers then.
			kind, n := s.Kind, 1
			if s.Target != nil {
				n = -1
			}
			e.after(r.FireTime.Add(j), []func(){func() { e.cfg.Dispatcher.Notify(kind, n) }})
		} else if r.Status == rota.StatusScheduled && !r.Held {
			ready++
			if !r.Triggered {
				// When the run became claimable: its creation, or its
				// fire time for a run decided ahead.
				m.Lateness(firetime.LaterOf(created, r.FireTime).Sub(r.FireTime))
			}
		}
	}
	for _, v := range it.verdicts {
		switch {
		case v.kind == verdictSkip:
			m.Skip(v.reason)
		case v.retry:
			m.Retry()
		}
	}
	m.Misfires(it.misfires)
	ready += len(res.Released)
	if len(res.Duplicates) > 0 {
		e.cfg.Logger.Info("schedule engine: fire times already had runs", "schedule", s.ID, "count", len(res.Duplicates))
	}
	ent.s = *s
	if it.waiting {
		e.awaiting[s.ID] = true
	}
	e.place(ent)
	if ready == 0 && len(res.Cancel) == 0 {
		return nil
	}
	kind, target, cancel := s.Kind, s.Target != nil, res.Cancel
	return func() {
		if ready > 0 {
			n := ready
			if target {
				n = -1 // pinned runs: wake every waiter of the kind
			}
			e.cfg.Dispatcher.Notify(kind, n)
		}
		stopCanceled(ctx, e.cfg.Dispatcher, s, cancel, func(id string, err error) {
			e.cfg.Logger.Warn("schedule engine: cancel previous run", "schedule", s.ID, "task", id, "err", err)
		})
	}
}

// stuck reports whether an enabled cron schedule has no fire time left
// after its high-water mark: its next time cannot be computed.
func stuck(ent *entry) bool {
	s := &ent.s
	if ent.c.Cron == nil || !s.Enabled || s.Ended || s.ErrorMessage != "" {
		return false
	}
	hw := s.HighWater
	if hw.IsZero() {
		hw = s.CreatedAt
	}
	_, ok := ent.c.Cron.Next(hw)
	return !ok
}

// errorOf returns why ent cannot go on ("" when it can): its timetable
// no longer compiles, or its next time cannot be computed.
func errorOf(ent *entry) string {
	switch {
	case ent.bad != nil:
		return "the timetable cannot be read: " + ent.bad.Error()
	case stuck(ent):
		return fmt.Sprintf("no fire time of cron_expr %q after %s: the next time cannot be computed", ent.s.CronExpr, ent.s.HighWater.Format(time.RFC3339))
	}
	return ""
}

// decide computes one schedule's decision from its live state. It runs
// inside the store's transaction. A schedule that cannot go on goes to
// the error state (ErrorMessage) and fires nothing until resumed.
func (e *Engine) decide(it *fireItem, st store.ScheduleRunState, now time.Time) (store.ScheduleDecision, error) {
	it.verdicts, it.misfires, it.waiting = nil, 0, false
	ent := it.ent
	if st.Schedule.ErrorMessage == "" {
		if msg := errorOf(ent); msg != "" {
			state := st.Schedule.ScheduleState
			state.ErrorMessage, state.NextFire = msg, time.Time{}
			e.cfg.Logger.Warn("schedule engine: schedule goes to the error state", "schedule", ent.s.ID, "name", ent.s.Name, "err", msg)
			return store.ScheduleDecision{State: state}, nil
		}
	}
	if ent.c.Cron != nil {
		return e.decideCron(it, &st, now), nil
	}
	if ent.c.Plan != nil {
		return e.decidePlan(it, &st, now), nil
	}
	return store.ScheduleDecision{State: st.Schedule.ScheduleState}, nil
}

func (e *Engine) newID() string { return e.cfg.IDs.New(e.cfg.Clock.Now()) }

// runsOf turns verdicts into run inserts.
func runsOf(vs []verdict) []store.ScheduleRunInsert {
	out := make([]store.ScheduleRunInsert, 0, len(vs))
	for _, v := range vs {
		in := store.ScheduleRunInsert{TaskID: v.taskID, FireTime: v.fireTime, Attempt: v.attempt}
		switch v.kind {
		case verdictSkip:
			in.Skip = v.reason
			in.Message = skipMessage(v.reason)
		case verdictHold:
			in.Held = true
			in.Message = "queued: waiting for a concurrency slot (concurrency_policy QUEUE)"
		}
		out = append(out, in)
	}
	return out
}

func skipMessage(r rota.SkipReason) string {
	switch r {
	case rota.SkipOverlap:
		return "skipped: the previous run was still unfinished (overlap_action SKIP)"
	case rota.SkipFailure:
		return "skipped: the previous run failed (failure_action SKIP)"
	case rota.SkipConcurrency:
		return "skipped: max_concurrency runs were unfinished (concurrency_policy SKIP)"
	case rota.SkipQueueFull:
		return "skipped: the queue of held runs was full (concurrency_policy QUEUE)"
	case rota.SkipMisfire:
		return "skipped: missed fire time (misfire_policy)"
	case rota.SkipBackoff:
		return "skipped: waiting after a failed run (failure_action BACKOFF)"
	case rota.SkipCircuitOpen:
		return "skipped: the circuit is open after failed runs (failure_action HALF_OPEN)"
	}
	return "skipped"
}

func (e *Engine) decideCron(it *fireItem, st *store.ScheduleRunState, now time.Time) store.ScheduleDecision {
	s := &st.Schedule
	state := s.ScheduleState
	sel := selectMisfires(s.MisfirePolicy, s.CatchupLimit, it.latest, it.earlier, now, e.cfg.MisfireGrace,
		e.cfg.MaxCatchUp, e.cfg.MaxMisfireRecords)
	var runs []store.ScheduleRunInsert
	for _, t := range sel.record {
		runs = append(runs, store.ScheduleRunInsert{
			TaskID: e.newID(), FireTime: t, Attempt: 1, Skip: rota.SkipMisfire,
			Message: fmt.Sprintf("skipped: fire time missed while no engine ran (misfire_policy %s)", s.MisfirePolicy),
		})
	}
	state.MisfireDropped += sel.dropped
	it.misfires = sel.dropped
	var d decision
	fs := failStateOf(&state)
	if s.Enabled {
		d = decideFailing(policyOf(s, e.cfg.MaxQueued), st.Open, st.Last, sel.fire, e.newID, fs)
	} else {
		d = decide(policyOf(s, e.cfg.MaxQueued), st.Open, st.Last, nil, e.newID)
	}
	fs.store(&state)
	it.verdicts = d.verdicts
	runs = append(runs, runsOf(d.verdicts)...)
	if n := len(it.latest); n > 0 && it.latest[n-1].After(state.HighWater) {
		state.HighWater = it.latest[n-1]
	}
	state.NextFire = time.Time{}
	if next, ok := it.ent.c.Cron.Next(state.HighWater); ok && s.Enabled {
		state.NextFire = next
	}
	if d.last != "" {
		state.LastRunID = d.last
	}
	it.waiting = d.heldLeft > 0
	return store.ScheduleDecision{Runs: runs, Release: d.release, Cancel: d.cancel, State: state}
}

func (e *Engine) decidePlan(it *fireItem, st *store.ScheduleRunState, now time.Time) store.ScheduleDecision {
	pd := &planDecision{e: e, it: it, st: st, now: now, state: st.Schedule.ScheduleState,
		p: it.ent.c.Plan, loc: it.ent.c.Loc, pol: policyOf(&st.Schedule, e.cfg.MaxQueued)}
	if pd.state.PlanRunID != "" && !pd.awaited() {
		pd.dec.State = pd.state
		return pd.dec
	}
	s := &st.Schedule
	if s.Enabled && !pd.state.Ended && pd.state.PlanRunID == "" && !pd.state.NextFire.IsZero() && !pd.state.NextFire.After(now) {
		pd.due()
	}
	pd.dec.State = pd.state
	return pd.dec
}

// planDecision is one plan schedule's decision in the making.
type planDecision struct {
	e     *Engine
	it    *fireItem
	st    *store.ScheduleRunState
	now   time.Time
	p     *firetime.Plan
	loc   *time.Location
	pol   policy
	state rota.ScheduleState
	dec   store.ScheduleDecision
}

// end ends the plan: no occurrence left.
func (pd *planDecision) end() {
	pd.state.Ended, pd.state.EndedAt, pd.state.NextFire = true, pd.now, time.Time{}
	pd.dec.Disable = true
}

// advance moves to the occurrence after the pending one, its execution
// having ended at from.
func (pd *planDecision) advance(from time.Time) {
	occ, ok := pd.p.After(firetime.Occurrence{At: pd.state.PlanAt, Seq: pd.state.PlanSeq}, from, pd.loc)
	if !ok {
		pd.end()
		return
	}
	pd.state.PlanSeq, pd.state.PlanAt, pd.state.NextFire, pd.state.PlanRetry = occ.Seq, occ.At, firetime.LaterOf(occ.At, from), false
}

// awaited handles the run the plan waits for: false while it is
// unfinished (a held run may be released meanwhile); else the plan is put
// back (an error with failure_action RETRY) or advanced.
func (pd *planDecision) awaited() bool {
	r, state := pd.st.PlanRun, &pd.state
	if r != nil && r.Unfinished() {
		d := decide(pd.pol, pd.st.Open, pd.st.Last, nil, pd.e.newID) // release a held run if a slot freed
		pd.dec.Release = d.release
		pd.it.waiting = true
		return false
	}
	from := firetime.LaterOf(pd.now, state.HighWater)
	if r != nil && !r.EndTime.IsZero() {
		from = firetime.LaterOf(r.EndTime, state.HighWater)
	}
	state.PlanRunID = ""
	switch {
	case r != nil && r.Failed() && pd.st.Schedule.FailureAction == rota.FailureRetry:
		// An error puts the plan back without advancing
		// its time; it runs again after a backoff.
		state.PlanRetry = true
		state.NextFire = from.Add(pd.e.cfg.RetryBackoff(r.Attempt))
	default:
		if r != nil && r.Status == rota.StatusSuccess {
			state.RealRepet++
		}
		pd.advance(from)
	}
	return true
}

// due fires the pending occurrence, or records it missed (misfire SKIP).
func (pd *planDecision) due() {
	state, now, e := &pd.state, pd.now, pd.e
	fireTime := state.PlanAt
	if state.PlanRetry {
		fireTime = now
	}
	late := now.Sub(state.NextFire) >= e.cfg.MisfireGrace && !state.PlanRetry && !firetime.NeverSkips(pd.p)
	if mp := pd.st.Schedule.MisfirePolicy; late && (mp == rota.MisfireSkip || mp == "") {
		pd.dec.Runs = append(pd.dec.Runs, store.ScheduleRunInsert{
			TaskID: e.newID(), FireTime: fireTime, Attempt: 1, Skip: rota.SkipMisfire,
			Message: "skipped: plan occurrence missed while no engine ran (misfire_policy SKIP)",
		})
		state.MisfireDropped++
		pd.it.misfires = 1
		if occ, ok := firetime.LateAdvance(pd.p, firetime.Occurrence{At: state.PlanAt, Seq: state.PlanSeq}, now, pd.loc); ok {
			state.PlanSeq, state.PlanAt, state.NextFire = occ.Seq, occ.At, firetime.LaterOf(occ.At, now)
		} else {
			pd.end()
		}
		return
	}
	fs := failStateOf(state)
	d := decideFailing(pd.pol, pd.st.Open, pd.st.Last, []time.Time{fireTime}, e.newID, fs)
	fs.store(state)
	pd.it.verdicts = d.verdicts
	pd.dec.Runs = append(pd.dec.Runs, runsOf(d.verdicts)...)
	pd.dec.Release, pd.dec.Cancel = d.release, d.cancel
	if d.last != "" {
		state.LastRunID = d.last
	}
	state.HighWater = firetime.LaterOf(state.HighWater, fireTime)
	if v := d.verdicts[0]; v.kind == verdictSkip {
		pd.advance(now) // a skipped occurrence is used up
	} else {
		state.PlanRunID, state.NextFire = v.taskID, time.Time{}
		pd.it.waiting = true
	}
}

// entryHeap orders entries by next due instant.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

// Push implements heap.Interface.
func (h *entryHeap) Push(x any) {
	ent := x.(*entry)
	ent.index = len(*h)
	*h = append(*h, ent)
}

// Pop implements heap.Interface.
func (h *entryHeap) Pop() any {
	old := *h
	n := len(old)
	ent := old[n-1]
	old[n-1] = nil
	ent.index = -1
	*h = old[:n-1]
	return ent
}
