// Package rotaapi declares the JSON shapes of Rota's HTTP API: the
// envelope every response comes in, and the request and response bodies
// of every route. The server (internal/httpapi) encodes and decodes these
// types and the Go client (package rotaclient) does the same on its side,
// so that the two cannot disagree on a field's name or type.
//
// The types are plain data: they carry no validation (the server checks
// every value and names the field at fault) and no defaults. Their
// conventions:
//
//   - Instants are int64 unix seconds, 0 when unset ([Unix] and [Time]
//     convert them); durations are whole seconds in fields named *_seconds.
//   - Lists in responses are [] rather than null; an absent JSON value
//     (a task's payload or result) is null.
//   - Request fields that may be left out are pointers (or omitted when
//     empty): absent means "the server's default" in a create and "leave
//     as it is" in an update.
//   - Paged lists embed [Page]: next_cursor continues the listing and is ""
//     on the last page.
//
// The package depends on the standard library and package rota only.
package rotaapi
