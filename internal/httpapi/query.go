package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rotahq/rota"
)

// singleValues parses r's query string, refusing a malformed one and a
// parameter given more than once, and returns each parameter's value.
func singleValues(r *http.Request) (map[string]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, rota.Errorf(rota.CodeMalformed, "malformed query string: %v", err)
	}
	out := make(map[string]string, len(q))
	for name, vs := range q {
		if len(vs) > 1 {
			return nil, rota.Invalid(name, "is given %d times", len(vs))
		}
		out[name] = vs[0]
	}
	return out, nil
}

// parseLimit reads a page size: "" keeps cur, else 1..maxListLimit.
func parseLimit(name, v string, cur int) (int, error) {
	if v == "" {
		return cur, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, rota.Invalid(name, "must be an integer between 1 and %d, got %s", maxListLimit, shortQuote(v))
	}
	return n, nil
}

// parseStatus reads a status filter (any case): "" means any status.
func parseStatus(name, v string) (rota.Status, error) {
	if v == "" {
		return "", nil
	}
	s := rota.Status(strings.ToUpper(v))
	if !s.Valid() {
		return "", rota.Invalid(name, "must be one of %s, got %s", statusList(), shortQuote(v))
	}
	return s, nil
}

// unknownParam refuses a query parameter the route does not know.
func unknownParam(name, known string) error {
	return &rota.Error{Code: rota.CodeUnknownField, Field: name,
		Message: fmt.Sprintf("unknown query parameter %q: known are %s", name, known)}
}
