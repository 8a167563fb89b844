package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
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

// queryParam is one query parameter a route knows, with the function that
// reads its value.
type queryParam struct {
	name string
	read func(v string) error
}

// readQuery reads r's query string with params: each parameter at most
// once, and only those of params (an unknown one is refused, naming the
// known ones in the order of params).
func readQuery(r *http.Request, params ...queryParam) error {
	q, err := singleValues(r)
	if err != nil {
		return err
	}
	for name, v := range q {
		i := slices.IndexFunc(params, func(p queryParam) bool { return p.name == name })
		if i < 0 {
			names := make([]string, len(params))
			for j, p := range params {
				names[j] = p.name
			}
			return unknownParam(name, joinAnd(names))
		}
		if err := params[i].read(v); err != nil {
			return err
		}
	}
	return nil
}

// joinAnd joins names as "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// pageParams are the limit and cursor parameters of a paged list. They set
// *limit to defaultListLimit now and to the limit given; *cursor to the
// cursor given, which checkCursor (nil for none) checks unless it is "".
func pageParams(limit *int, cursor *string, checkCursor func(name, v string) error) []queryParam {
	*limit = defaultListLimit
	return []queryParam{
		{"limit", func(v string) error {
			n, err := parseLimit("limit", v, *limit)
			*limit = n
			return err
		}},
		{"cursor", func(v string) error {
			if v != "" && checkCursor != nil {
				if err := checkCursor("cursor", v); err != nil {
					return err
				}
			}
			*cursor = v
			return nil
		}},
	}
}

// statusParam is the status filter of a list: "" (or absent) means any.
func statusParam(status *rota.Status) queryParam {
	return queryParam{"status", func(v string) (err error) {
		*status, err = parseStatus("status", v)
		return err
	}}
}

// nameParam is a filter of a list by a value that check accepts; ""
// means any.
func nameParam(name string, dst *string, check func(field, v string) error) queryParam {
	return queryParam{name, func(v string) error {
		if v != "" {
			if err := check(name, v); err != nil {
				return err
			}
		}
		*dst = v
		return nil
	}}
}
