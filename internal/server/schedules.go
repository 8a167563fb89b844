package server

import (
	"context"
	"errors"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/schedule/httpexec"
)

// scheduling holds the schedule engine (it fires on the leader only) and
// Rota's HTTP executor (it runs the runs of schedules with a target, on
// every node). Its methods are safe on nil.
type scheduling struct {
	engine *schedule.Engine
	exec   *httpexec.Executor
}

// initSchedules creates the engine and the executor over the server's
// store and dispatcher, with the server's clock, logger and schedule
// metrics, and hooks the engine to leadership changes (its fire batches
// carry the elector's term). Call it from compose once s.elector and
// s.disp are set.
func (s *Server) initSchedules() (*scheduling, error) {
	eng, err := schedule.NewEngine(schedule.EngineConfig{
		Store: s.store, Dispatcher: s.disp, Clock: s.cfg.Clock, Logger: s.cfg.Logger, Metrics: s.sched,
		Term:   s.fencingTerm,
		Events: func(ev rota.Event) { s.hub.Publish(ev) },
	})
	if err != nil {
		return nil, err
	}
	exec, err := httpexec.New(httpexec.Config{
		Schedules: s.store, Tasks: s.store, Dispatcher: s.disp, Clock: s.cfg.Clock, Logger: s.cfg.Logger, Metrics: s.sched,
		Guard: s.guard,
	})
	if err != nil {
		return nil, err
	}
	s.elector.OnChange(eng.SetLeader)
	return &scheduling{engine: eng, exec: exec}, nil
}

// changed tells the engine and the executor that schedule id changed on
// this node (the API's ScheduleChanged): the engine reloads it, the
// executor reads the target kinds again at once.
func (sc *scheduling) changed(id string) {
	if sc != nil {
		sc.engine.Changed(id)
		sc.exec.Changed()
	}
}

// start starts the engine's loop and the executor. Call it from Start
// after the dispatcher started.
func (sc *scheduling) start(ctx context.Context) error {
	if sc == nil {
		return nil
	}
	return errors.Join(sc.engine.Start(ctx), sc.exec.Start(ctx))
}

// stop stops the engine (waiting for a fire in progress) and the executor
// (canceling its requests in flight). Call it from Stop before the
// dispatcher stops; it is idempotent.
func (sc *scheduling) stop() {
	if sc == nil {
		return
	}
	sc.engine.SetLeader(false)
	sc.engine.Stop()
	sc.exec.Stop()
}
