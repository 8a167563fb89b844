package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rotahq/rota"
)

// Field checks shared by the requests. Each returns a *rota.Error of code
// invalid naming the field (a JSON path, a path variable or a query
// parameter) and what it expects.

// shortQuote quotes s for an error message, cut to a readable length.
func shortQuote(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		return fmt.Sprintf("%q…", string(r[:max]))
	}
	return fmt.Sprintf("%q", s)
}

// underPrefix returns err as the check that returned it would have, given
// the field's full path: its *rota.Error with the field put under prefix
// (the path of the object holding it, "reports[2]"), and the field's name
// where the message opens with it (`field "run_id": …`, as rota.Invalid
// and tooLarge write it). A loop over many items checks each with the
// field's bare name, so that only a failing item pays for its path.
// An error without a field gets prefix as its field. Errors without a
// *rota.Error, or an empty prefix, are returned as they are; the
// *rota.Error is copied, not changed.
func underPrefix(err error, prefix string) error {
	var e *rota.Error
	if prefix == "" || !errors.As(err, &e) {
		return err
	}
	out := *e
	out.Field = prefix // a fault of the object itself
	if e.Field != "" {
		out.Field = joinPath(prefix, e.Field)
	}
	if opening := "field " + strconv.Quote(e.Field) + ": "; e.Field != "" && strings.HasPrefix(e.Message, opening) {
		out.Message = "field " + strconv.Quote(out.Field) + ": " + e.Message[len(opening):]
	}
	return &out
}

func checkKind(field, s string) error {
	if s == "" {
		return rota.Invalid(field, "is required")
	}
	if !rota.ValidKind(s) {
		return rota.Invalid(field, "must be 1 to 128 characters of A-Z a-z 0-9 _ . : -, got %s", shortQuote(s))
	}
	return nil
}

func checkID(field, s string) error {
	if !rota.ValidID(s) {
		return rota.Invalid(field, "must be an id of 32 lowercase hex characters, got %s", shortQuote(s))
	}
	return nil
}

// checkName checks a worker id, a key or an address: 1 to max characters,
// no control characters.
func checkName(field, s string, max int) error {
	if s == "" {
		return rota.Invalid(field, "must not be empty")
	}
	if !utf8.ValidString(s) {
		return rota.Invalid(field, "is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > max {
		return rota.Invalid(field, "must be at most %d characters, got %d", max, n)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return rota.Invalid(field, "must not contain control characters")
	}
	return nil
}

func checkRange[T int | int64 | float64](field string, v, lo, hi T) error {
	if v < lo || v > hi {
		return rota.Invalid(field, "must be between %v and %v, got %v", lo, hi, v)
	}
	return nil
}

// checkPriority parses a priority level; nil means the default, mid.
func checkPriority(field string, p *rota.Priority) (rota.Priority, error) {
	if p == nil {
		return rota.PriorityMid, nil
	}
	if p.Level() < 0 {
		return "", rota.Invalid(field, `must be "high", "mid" or "low", got %s`, shortQuote(string(*p)))
	}
	return *p, nil
}

// reservedWorkerPrefix starts the ids of the workers Rota runs itself
// (rota.HTTPWorkerID): no client may claim, report, pin tasks or stop
// workers under such an id.
const reservedWorkerPrefix = "rota:"

// checkWorkerID checks a worker id given by a client: a name, and not one
// of Rota's own.
func checkWorkerID(field, id string) error {
	if err := checkName(field, id, maxIDLen); err != nil {
		return err
	}
	if strings.HasPrefix(id, reservedWorkerPrefix) {
		return rota.Invalid(field, "%q is reserved: ids starting with %q name Rota's own workers", id, reservedWorkerPrefix)
	}
	return nil
}

// checkWorkerIDs checks a list of worker ids and drops duplicates, keeping
// the first of each.
func checkWorkerIDs(field string, ids []string) ([]string, error) {
	if len(ids) > maxWorkerIDs {
		return nil, rota.Invalid(field, "must have at most %d entries, got %d", maxWorkerIDs, len(ids))
	}
	out := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if err := checkWorkerID(fmt.Sprintf("%s[%d]", field, i), id); err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// checkKinds checks the kinds of a claim and drops duplicates.
func checkKinds(field string, kinds []string) ([]string, error) {
	if len(kinds) == 0 || len(kinds) > maxClaimKinds {
		return nil, rota.Invalid(field, "must list 1 to %d kinds, got %d", maxClaimKinds, len(kinds))
	}
	out := make([]string, 0, len(kinds))
	seen := make(map[string]bool, len(kinds))
	for i, k := range kinds {
		if err := checkKind(fmt.Sprintf("%s[%d]", field, i), k); err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

// truncateMessage cuts a worker's message to maxMessageBytes on a rune
// boundary: a long stack trace must not make a failure report fail.
func truncateMessage(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	cut := maxMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// remoteIP is the IP address of the peer of r (without the port).
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
