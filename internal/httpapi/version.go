package httpapi

import (
	"context"
	"net/http"

	"github.com/rotahq/rota/internal/buildinfo"
)

// mountVersion registers the build information route.
func (a *API) mountVersion(mux *http.ServeMux) {
	mount(a, mux, "GET /api/version", bodyNone, a.buildVersion)
}

// versionResponse is the data of GET /api/version.
type versionResponse struct {
	Version   string `json:"version"`    // release, Go pseudo-version or "(devel)"
	Commit    string `json:"commit"`     // git revision or "unknown"
	BuildDate string `json:"build_date"` // RFC 3339 or "unknown"
	GoVersion string `json:"go_version"` // e.g. "go1.26.8"
}

// buildVersion reports which build of Rota serves the request. Any caller
// that may read the API may read it.
//
// GET /api/version
func (a *API) buildVersion(context.Context, *noRequest) (*versionResponse, error) {
	b := buildinfo.Get()
	return &versionResponse{Version: b.Version, Commit: b.Commit, BuildDate: b.BuildDate, GoVersion: b.GoVersion}, nil
}
