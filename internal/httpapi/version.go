package httpapi

import (
	"context"
	"net/http"

	"github.com/rotahq/rota/internal/buildinfo"
	"github.com/rotahq/rota/rotaapi"
)

// mountVersion registers the build information route.
func (a *API) mountVersion(mux *http.ServeMux) {
	mount(a, mux, "GET /api/version", bodyNone, a.buildVersion)
}

// buildVersion reports which build of Rota serves the request. Any caller
// that may read the API may read it.
//
// GET /api/version
func (a *API) buildVersion(context.Context, *noRequest) (*rotaapi.Version, error) {
	b := buildinfo.Get()
	return &rotaapi.Version{Version: b.Version, Commit: b.Commit, BuildDate: b.BuildDate, GoVersion: b.GoVersion}, nil
}
