package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/rotahq/rota"
)

// readBody reads a request body of at most limit bytes within timeout. An
// over-long body is a too_large error; one that cannot be read (a broken or
// stalled upload) is malformed. A missing body reads as empty.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, tooLargeBody(limit)
	}
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	b, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLargeBody(mbe.Limit)
		}
		// The connection is unusable: close it after the answer. The
		// deadline stays, so that the server does not wait for the rest
		// of the body before it answers.
		w.Header().Set("Connection", "close")
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, rota.Errorf(rota.CodeMalformed, "the request body did not arrive within %v", timeout)
		}
		return nil, rota.Errorf(rota.CodeMalformed, "cannot read the request body: %v", err)
	}
	if deadline {
		// The deadline covers the body only: lift it, or it would end the
		// request (the server cancels a request's context when a read of
		// its connection times out) during a long poll.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return b, nil
}

// readAll is io.ReadAll into a buffer of the announced length (size, -1
// when unknown; it is at most the body's limit here): io.ReadAll grows
// its buffer from 512 bytes by doubling, four times the body's size in
// allocations for a batch.
func readAll(rd io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(rd)
	}
	b := make([]byte, 0, size+1) // +1: the read that finds the end
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // a body longer than announced: grow
		}
	}
}

func tooLargeBody(limit int64) *rota.Error {
	return rota.Errorf(rota.CodeTooLarge, "the request body is over the limit of %d bytes", limit)
}

// tooLarge reports a JSON value over its size limit.
func tooLarge(field string, size, limit int64) *rota.Error {
	return &rota.Error{
		Code:    rota.CodeTooLarge,
		Message: fmt.Sprintf("field %q: the value is %d bytes, over the limit of %d", field, size, limit),
		Field:   field,
	}
}

// isBlank reports whether b holds nothing but JSON whitespace.
func isBlank(b []byte) bool {
	return len(bytes.TrimLeft(b, " \t\r\n")) == 0
}

// joinPath appends a field name to a JSON path ("" is the root).
func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// decodeStrict decodes data, which must be exactly one JSON object, into
// dst, a pointer to a struct. It refuses what encoding/json lets through:
// unknown fields, fields whose name differs from the struct's only by case,
// fields given twice and data after the object. Errors are *rota.Error:
// malformed for bad JSON, unknown_field for an unknown field, invalid for a
// value of the wrong type, each naming the field by its path under prefix
// (the path of the object itself, "" for the request body).
func decodeStrict(data []byte, dst any, prefix string) error {
	return decodeKnown(data, dst, prefix, jsonFields(reflect.TypeOf(dst)))
}

// decodeKnown is decodeStrict given the JSON names of dst's fields
// (jsonFields).
func decodeKnown(data []byte, dst any, prefix string, known map[string]bool) error {
	if isBlank(data) {
		if prefix == "" {
			return rota.Errorf(rota.CodeMalformed, "the request body is empty: want a JSON object")
		}
		return rota.Invalid(prefix, "want a JSON object")
	}
	if !json.Valid(data) {
		return syntaxError(data, prefix)
	}
	return decodeValid(data, dst, prefix, known)
}

// decodeValid is decodeKnown for data known to be one valid JSON value that
// is not blank (an item of a batch, whose body was checked whole): it
// spares the scan of json.Valid.
func decodeValid(data []byte, dst any, prefix string, known map[string]bool) error {
	if q, ok := dst.(quickDecoder); ok && q.quickDecode(data) {
		return nil
	}
	if !quickKeys(data, known) {
		if err := checkKeys(data, known, prefix); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			typ.Field = jsonPath(reflect.TypeOf(dst), typ.Field)
			// An element of an array of the wrong type: name the array.
			if ft := jsonFieldType(reflect.TypeOf(dst), typ.Field); ft != nil && ft.Kind() == reflect.Slice && ft != typ.Type &&
				ft != reflect.TypeFor[json.RawMessage]() {
				return rota.Invalid(joinPath(prefix, typ.Field), "want %s, got an array holding a %s", describeType(ft), typ.Value)
			}
		}
		return decodeError(err, prefix)
	}
	return nil
}

// quickDecoder is a destination that decodes the plain shapes of its JSON
// itself, faster than encoding/json's reflection. quickDecode reports
// whether it did (data is valid JSON); if not, it leaves the destination
// as it found it, for encoding/json to decode and name the error.
type quickDecoder interface {
	quickDecode(data []byte) bool
}

// jsonPath turns the path of an UnmarshalTypeError in a value of type t,
// which names the embedded structs it went through by their Go names
// ("SubmitRequest.kind"), into the path of JSON names the client sent
// ("kind").
func jsonPath(t reflect.Type, path string) string {
	var out []string
	for part := range strings.SplitSeq(path, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			t = nil
			out = append(out, part)
			continue
		}
		if f, ok := t.FieldByName(part); ok && f.Anonymous && f.Tag.Get("json") == "" {
			t = f.Type // an embedded struct: its fields are the parent's
			continue
		}
		out = append(out, part)
		t = jsonFieldType(t, part)
	}
	return strings.Join(out, ".")
}

// jsonFieldType returns the type (pointers removed) of the field of the
// struct t (or *t) whose JSON name is name, or nil.
func jsonFieldType(t reflect.Type, name string) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			if ft := jsonFieldType(f.Type, name); ft != nil {
				return ft
			}
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			return ft
		}
	}
	return nil
}

// syntaxError describes why data, which json.Valid refused, is not one
// JSON value: a syntax error, an early end or data after the value.
func syntaxError(data []byte, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return decodeError(err, prefix)
	}
	return rota.Errorf(rota.CodeMalformed, "malformed JSON: unexpected data after the object at offset %d", dec.InputOffset())
}

// checkKeys walks the top level of the object in data: it must be one
// object, whose keys are each given once and spelled exactly as in known
// (the json tags of the destination's struct type), followed by nothing
// but whitespace.
func checkKeys(data []byte, known map[string]bool, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return decodeError(err, prefix)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		if prefix == "" {
			return rota.Errorf(rota.CodeMalformed, "the request body must be a JSON object, not %s", jsonKind(tok))
		}
		return rota.Invalid(prefix, "want a JSON object, got %s", jsonKind(tok))
	}
	seen := make(map[string]bool, len(known))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return decodeError(err, prefix)
		}
		key, _ := tok.(string) // object keys are strings, or Token fails
		path := joinPath(prefix, key)
		if !known[key] {
			return &rota.Error{Code: rota.CodeUnknownField, Message: fmt.Sprintf("unknown field %q", path), Field: path}
		}
		if seen[key] {
			return &rota.Error{Code: rota.CodeMalformed, Message: fmt.Sprintf("field %q is given more than once", path), Field: path}
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return decodeError(err, prefix)
		}
		// Every value is checked here, before anything is decoded or
		// stored: encoding/json would quietly turn bad UTF-8 into U+FFFD
		// in strings and keep it in raw payloads.
		if err := checkText(skip, path); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return decodeError(err, prefix)
	}
	if _, err := dec.Token(); err != io.EOF {
		return rota.Errorf(rota.CodeMalformed, "malformed JSON: unexpected data after the object at offset %d", dec.InputOffset())
	}
	return nil
}

// jsonKind names the JSON type of a token that starts a value.
func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "a JSON delimiter"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "something else"
}

// jsonFields returns the JSON names of the exported fields of the struct t
// points to.
//
// The answer depends on t alone: it is computed once per type (a batch
// submit asks it for every item; reflecting each time was 4% of the
// server's CPU in the embedded end-to-end profile). Callers must not
// change the map.
func jsonFields(t reflect.Type) map[string]bool {
	if m, ok := jsonFieldsOf.Load(t); ok {
		return m.(map[string]bool)
	}
	m, _ := jsonFieldsOf.LoadOrStore(t, reflectFields(t))
	return m.(map[string]bool)
}

// jsonFieldsOf memoizes jsonFields: reflect.Type → map[string]bool,
// immutable once stored.
var jsonFieldsOf sync.Map

// reflectFields is jsonFields, computed.
func reflectFields(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			// encoding/json promotes the fields of an embedded struct.
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n := range jsonFields(ft) {
					out[n] = true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = true
	}
	return out
}

// decodeError turns an encoding/json error into a *rota.Error.
func decodeError(err error, prefix string) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		re  *rota.Error
	)
	switch {
	case errors.As(err, &re):
		return re
	case errors.As(err, &syn):
		return rota.Errorf(rota.CodeMalformed, "malformed JSON at offset %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		field := joinPath(prefix, typ.Field)
		if typ.Field == "" {
			if prefix == "" {
				return rota.Errorf(rota.CodeMalformed, "the request body must be a JSON object, not %s", typ.Value)
			}
			return rota.Invalid(prefix, "want a JSON object, got %s", typ.Value)
		}
		return rota.Invalid(field, "want %s, got %s", describeType(typ.Type), typ.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return rota.Errorf(rota.CodeMalformed, "malformed JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// Already caught by checkKeys; kept for safety.
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		path := joinPath(prefix, name)
		return &rota.Error{Code: rota.CodeUnknownField, Message: fmt.Sprintf("unknown field %q", path), Field: path}
	}
	return rota.Errorf(rota.CodeMalformed, "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// describeType names the JSON type a Go type is decoded from.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	}
	return "another type"
}
