package rotaapi

// Envelope is the shape of every response body. The server encodes an
// Envelope[any]; a client decodes an Envelope[json.RawMessage] and then
// the data into the route's type.
type Envelope[T any] struct {
	// Code is 0 on success, else the error's number (rota.Code.Number()).
	Code int `json:"code"`
	// Message is "ok" on success, else what is wrong.
	Message string `json:"message"`
	// Data is the route's result on success; on an error about one input
	// field a FieldData; else null.
	Data T `json:"data"`
}

// FieldData is the data of an error about one input field.
type FieldData struct {
	// Field names the field at fault: a JSON path of the body
	// ("tasks[3].kind"), a path variable or a query parameter.
	Field string `json:"field"`
}

// Page is embedded in the data of every paged list.
type Page struct {
	// NextCursor is passed as the cursor query parameter to get the next
	// page; "" on the last page.
	NextCursor string `json:"next_cursor"`
}

// Health is the data of GET /api/healthz and GET /api/readyz.
type Health struct {
	// Status is "ok" (healthz) or "ready" (readyz).
	Status string `json:"status"`
	// NodeID is the answering node's id; omitted when unknown.
	NodeID string `json:"node_id,omitempty"`
	// Version is the server's version; omitted when unknown.
	Version string `json:"version,omitempty"`
}

// Version is the data of GET /api/version: which build of Rota serves the
// request.
type Version struct {
	// Version is the release, a Go pseudo-version or "(devel)".
	Version string `json:"version"`
	// Commit is the git revision, or "unknown".
	Commit string `json:"commit"`
	// BuildDate is RFC 3339, or "unknown".
	BuildDate string `json:"build_date"`
	// GoVersion is the Go release that built it, e.g. "go1.26.8".
	GoVersion string `json:"go_version"`
}
