package httpapi

import (
	"net/http"

	"github.com/rotahq/rota/docs"
)

// mountDocs registers GET /api/openapi.json, the OpenAPI 3.1 description of
// the API (docs/openapi.json, embedded by package docs).
func (a *API) mountDocs(mux *http.ServeMux) {
	spec := docs.OpenAPI()
	a.mountHandler(mux, "GET /api/openapi.json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// A document, served as is: not wrapped in an envelope.
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(spec)
	}))
}
