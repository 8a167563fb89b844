package rota

import (
	"errors"
	"fmt"
)

// Code is an error class. Each code maps to one HTTP status and one numeric
// envelope code of the API (see docs/api.md); the mapping lives in
// [Code.HTTPStatus] and [Code.Number] so that server and client agree.
type Code string

// The error codes.
const (
	CodeInvalid         Code = "invalid"                // a field has a bad value (400)
	CodeMalformed       Code = "malformed"              // the body is not the JSON expected (400)
	CodeUnknownField    Code = "unknown_field"          // the body has a field the endpoint does not know (400)
	CodeNotFound        Code = "not_found"              // no such task, run, worker, kind or route (404)
	CodeMethod          Code = "method_not_allowed"     // the route exists with other methods (405)
	CodeConflict        Code = "conflict"               // the target's state forbids the change (409)
	CodeLeaseLost       Code = "lease_lost"             // the run is no longer this worker's (409)
	CodeTooLarge        Code = "too_large"              // the body or payload is over its limit (413)
	CodeUnsupportedType Code = "unsupported_media_type" // the body is not JSON (415)
	CodeUnauthorized    Code = "unauthorized"           // missing or bad credentials (401)
	CodeForbidden       Code = "forbidden"              // the credentials do not allow the route, or a cross-site request (403)
	CodeRateLimited     Code = "rate_limited"           // too many failed logins from this address; retry after Retry-After (429)
	CodeUnavailable     Code = "unavailable"            // shutting down or the store is unreachable (503)
	CodeInternal        Code = "internal"               // a fault of the server (500)
)

var codeTable = []struct {
	code   Code
	number int
	status int
}{
	{CodeInvalid, 40001, 400},
	{CodeMalformed, 40002, 400},
	{CodeUnknownField, 40003, 400},
	{CodeUnauthorized, 40100, 401},
	{CodeForbidden, 40300, 403},
	{CodeNotFound, 40400, 404},
	{CodeMethod, 40500, 405},
	{CodeConflict, 40900, 409},
	{CodeLeaseLost, 40901, 409},
	{CodeTooLarge, 41300, 413},
	{CodeUnsupportedType, 41500, 415},
	{CodeRateLimited, 42900, 429},
	{CodeInternal, 50000, 500},
	{CodeUnavailable, 50300, 503},
}

// Number is the numeric code of the API envelope ({"code": N, ...}).
func (c Code) Number() int {
	for _, e := range codeTable {
		if e.code == c {
			return e.number
		}
	}
	return 50000
}

// HTTPStatus is the HTTP status that goes with the code.
func (c Code) HTTPStatus() int {
	for _, e := range codeTable {
		if e.code == c {
			return e.status
		}
	}
	return 500
}

// CodeOfNumber maps an envelope code back to its Code; unknown numbers map to
// CodeInternal.
func CodeOfNumber(n int) Code {
	for _, e := range codeTable {
		if e.number == n {
			return e.code
		}
	}
	return CodeInternal
}

// Error is an error a client can act on: a code, a human message and, for
// invalid input, the field at fault (dotted JSON path, e.g. "plan.plan_value").
//
// errors.Is(err, rota.ErrNotFound) and friends compare codes, so a wrapped
// *Error from the server or the client matches the sentinel of its code.
type Error struct {
	Code    Code
	Message string
	Field   string
}

func (e *Error) Error() string {
	if e.Field != "" && e.Message == "" {
		return fmt.Sprintf("%s: field %q", e.Code, e.Field)
	}
	return e.Message
}

// Is makes errors.Is match any *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// Sentinels for errors.Is. Their messages are generic; real errors carry
// specific ones.
var (
	ErrInvalid     = &Error{Code: CodeInvalid, Message: "invalid argument"}
	ErrNotFound    = &Error{Code: CodeNotFound, Message: "not found"}
	ErrConflict    = &Error{Code: CodeConflict, Message: "conflict"}
	ErrLeaseLost   = &Error{Code: CodeLeaseLost, Message: "lease lost: the run is no longer held by this worker"}
	ErrTooLarge    = &Error{Code: CodeTooLarge, Message: "too large"}
	ErrUnavailable = &Error{Code: CodeUnavailable, Message: "unavailable"}
)

// Invalid returns an invalid-argument error naming the field at fault.
func Invalid(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = fmt.Sprintf("field %q: %s", field, msg)
	}
	return &Error{Code: CodeInvalid, Message: msg, Field: field}
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
