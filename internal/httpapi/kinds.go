package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// mountKinds registers the kind routes.
func (a *API) mountKinds(mux *http.ServeMux) {
	mount(a, mux, "GET /api/kinds", bodyNone, a.kindList)
	mount(a, mux, "GET /api/kinds/{kind}", bodyNone, a.kindGet)
	mount(a, mux, "PUT /api/kinds/{kind}", bodyRequired, a.kindPut)
	mount(a, mux, "POST /api/kinds/{kind}/pause", bodyOptional, a.kindPause)
	mount(a, mux, "POST /api/kinds/{kind}/resume", bodyOptional, a.kindResume)
}

// noRequest is the request of routes that take nothing (a body, if any,
// must be {}).
type noRequest struct{}

// kindList returns every known kind by name.
//
// GET /api/kinds
func (a *API) kindList(ctx context.Context, _ *noRequest) (*rotaapi.KindList, error) {
	kinds, err := a.store.KindList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list kinds: %w", err)
	}
	out := &rotaapi.KindList{Kinds: convertAll(kinds, toKind)}
	alarms := a.disp.NoWorkerAlarms()
	for i := range out.Kinds {
		if since, ok := alarms[out.Kinds[i].Kind]; ok {
			out.Kinds[i].NoWorkerSince = rotaapi.Unix(since)
		}
	}
	return out, nil
}

// kindRequest names a kind in the path.
type kindRequest struct {
	kind string
}

func (k *kindRequest) readRequest(r *http.Request) error {
	k.kind = r.PathValue("kind")
	return checkKind("kind", k.kind)
}

// kindGet returns one kind's settings.
//
// GET /api/kinds/{kind}
func (a *API) kindGet(ctx context.Context, req *kindRequest) (*rotaapi.Kind, error) {
	k, err := a.store.KindGet(ctx, req.kind)
	if err != nil {
		return nil, fmt.Errorf("get kind: %w", err)
	}
	out := new(toKind(k))
	if since, ok := a.disp.NoWorkerSince(k.Name); ok {
		out.NoWorkerSince = rotaapi.Unix(since)
	}
	return out, nil
}

// kindPutRequest is the body of PUT /api/kinds/{kind}: absent (or null)
// fields keep their value (the defaults for a new kind).
type kindPutRequest struct {
	kindRequest
	rotaapi.KindPutRequest
}

func (k *kindPutRequest) validate(*API) error {
	return CheckKindSettings("", store.KindUpsertParams{
		PriorityFactor: k.PriorityFactor, MaxRunning: k.MaxRunning, Rate: k.Rate, RetentionSeconds: k.RetentionSeconds,
		Dispatch: k.Dispatch,
	})
}

// CheckKindSettings checks the settings of p (not its name) as PUT
// /api/kinds/{kind} does, naming a field at fault under the JSON path
// prefix (kinds[2].rate). Nil settings are not checked.
func CheckKindSettings(prefix string, p store.KindUpsertParams) error {
	f := func(name string) string { return joinPath(prefix, name) }
	if p.PriorityFactor != nil {
		if err := checkRange(f("priority_factor"), *p.PriorityFactor, 1, maxPriorityFactor); err != nil {
			return err
		}
	}
	if p.MaxRunning != nil {
		if err := checkRange(f("max_running"), *p.MaxRunning, 0, maxKindMaxRunning); err != nil {
			return err
		}
	}
	if p.Rate != nil {
		if err := checkRange(f("rate"), *p.Rate, 0, maxKindRate); err != nil {
			return err
		}
	}
	if p.RetentionSeconds != nil {
		if err := checkRange(f("retention_seconds"), *p.RetentionSeconds, 0, maxRetentionSeconds); err != nil {
			return err
		}
	}
	if p.Dispatch != nil && *p.Dispatch != rota.DispatchPull && *p.Dispatch != rota.DispatchPush {
		return rota.Invalid(f("dispatch"), "must be pull or push, got %s", shortQuote(*p.Dispatch))
	}
	return nil
}

// kindPut creates a kind or changes some of its settings.
//
// PUT /api/kinds/{kind}
func (a *API) kindPut(ctx context.Context, req *kindPutRequest) (*rotaapi.Kind, error) {
	a.noteKindBefore(ctx, req.kind)
	k, err := a.disp.KindUpsert(ctx, store.KindUpsertParams{
		Name:             req.kind,
		PriorityFactor:   req.PriorityFactor,
		Paused:           req.Paused,
		MaxRunning:       req.MaxRunning,
		Rate:             req.Rate,
		RetentionSeconds: req.RetentionSeconds,
		Dispatch:         req.Dispatch,
	})
	if err != nil {
		return nil, fmt.Errorf("put kind: %w", err)
	}
	out := new(toKind(k))
	noteAudit(ctx, k.Name, nil, out)
	return out, nil
}

// kindPause stops handing out tasks of a kind (creating the kind if
// needed); its tasks are still accepted.
//
// POST /api/kinds/{kind}/pause
func (a *API) kindPause(ctx context.Context, req *kindRequest) (*rotaapi.Kind, error) {
	return a.setPaused(ctx, req.kind, true)
}

// kindResume hands out tasks of a paused kind again and wakes its workers.
//
// POST /api/kinds/{kind}/resume
func (a *API) kindResume(ctx context.Context, req *kindRequest) (*rotaapi.Kind, error) {
	return a.setPaused(ctx, req.kind, false)
}

func (a *API) setPaused(ctx context.Context, kind string, paused bool) (*rotaapi.Kind, error) {
	a.noteKindBefore(ctx, kind)
	k, err := a.disp.KindUpsert(ctx, store.KindUpsertParams{Name: kind, Paused: &paused})
	if err != nil {
		return nil, fmt.Errorf("pause kind: %w", err)
	}
	out := new(toKind(k))
	noteAudit(ctx, k.Name, nil, out)
	return out, nil
}

// noteKindBefore notes a kind's settings before a change, for the audit
// log (nothing for a kind the change creates).
func (a *API) noteKindBefore(ctx context.Context, kind string) {
	if k, err := a.store.KindGet(ctx, kind); err == nil {
		noteAudit(ctx, kind, new(toKind(k)), nil)
	}
}
