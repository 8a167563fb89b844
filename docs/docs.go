// Package docs holds Rota's API description, docs/openapi.json, embedded
// so that the server serves the very file the repository keeps (GET
// /api/openapi.json) and the tests validate against it: one copy, no drift.
package docs

import _ "embed"

//go:embed openapi.json
var openAPI string // immutable: a string cannot be changed

// OpenAPI returns the OpenAPI 3.1 description of the HTTP API
// (docs/openapi.json), a JSON document. Each call returns a new copy.
func OpenAPI() []byte { return []byte(openAPI) }
