package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// envelope is the shape of every response body.
type envelope = rotaapi.Envelope[any]

// internalMessage is all a client learns of a fault of the server.
const internalMessage = "internal error: the server could not complete the request (details are in its log)"

// writeData answers 200 with data in a success envelope.
func (a *API) writeData(w http.ResponseWriter, r *http.Request, data any) {
	status := http.StatusOK
	if s, ok := data.(statusSetter); ok {
		status = s.httpStatus()
	}
	var buf bytes.Buffer
	if encodeFast(&buf, data) {
		a.writeBody(w, status, buf.Bytes())
		return
	}
	a.writeEnvelope(w, r, status, envelope{Code: 0, Message: "ok", Data: data})
}

// statusSetter is a response whose success status is not 200 (201 for a
// created schedule).
type statusSetter interface{ httpStatus() int }

// writeError is the one place that maps an error to an HTTP status and an
// envelope (through clientError).
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg, field := a.clientError(r.Context(), r.Method, r.URL.Path, err)
	env := envelope{Code: code.Number(), Message: msg}
	if field != "" {
		env.Data = rotaapi.FieldData{Field: field}
	}
	a.writeEnvelope(w, r, code.HTTPStatus(), env)
}

// clientError is what a client is told of err, an error met while serving
// a request (method, path) with context ctx: a whole request's error or
// one item's of a batch. A *rota.Error in err's chain gives the code, the
// message and the field; an *http.MaxBytesError is a too-large body;
// anything else is a fault of the server: internal with a generic
// message, the details logged (unavailable if ctx ended: the client went
// away).
func (a *API) clientError(ctx context.Context, method, path string, err error) (code rota.Code, msg, field string) {
	code = rota.ErrorCode(err)
	var re *rota.Error
	if errors.As(err, &re) {
		msg, field = re.Message, re.Field
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		code, msg, field = rota.CodeTooLarge, tooLargeBody(mbe.Limit).Message, ""
	case code.HTTPStatus() >= 500 && code != rota.CodeUnavailable:
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			// The client went away (or its deadline passed) while the
			// store worked: not a fault, and nobody reads the answer.
			a.log.LogAttrs(ctx, slog.LevelDebug, "httpapi: request canceled",
				slog.String("method", method), slog.String("path", path), slog.Any("err", err))
			code, msg, field = rota.CodeUnavailable, "the request was canceled", ""
			break
		}
		a.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "httpapi: internal error",
			slog.String("method", method), slog.String("path", path), slog.Any("err", err))
		code, msg, field = rota.CodeInternal, internalMessage, ""
	}
	if msg == "" {
		msg = string(code)
	}
	return code, msg, field
}

// writeEnvelope encodes env and writes it with status. The body is encoded
// before anything is written so that an encoding failure can still become
// a 500.
func (a *API) writeEnvelope(w http.ResponseWriter, r *http.Request, status int, env envelope) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		a.log.LogAttrs(r.Context(), slog.LevelError, "httpapi: encode response",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		status = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(&buf).Encode(envelope{Code: rota.CodeInternal.Number(), Message: internalMessage})
	}
	a.writeBody(w, status, buf.Bytes())
}

// writeBody writes an encoded envelope with status.
func (a *API) writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", RetryAfterSeconds)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteError writes err as an error envelope, for handlers outside the API
// (authentication, the event stream) that answer in the API's format. Only
// a *rota.Error's code and message are used; anything else is a 500.
func WriteError(w http.ResponseWriter, err error) {
	code := rota.ErrorCode(err)
	msg := internalMessage
	var re *rota.Error
	if errors.As(err, &re) && code != rota.CodeInternal {
		msg = re.Message
	} else {
		code = rota.CodeInternal
	}
	writeEnvelopeStatus(w, code.HTTPStatus(), envelope{Code: code.Number(), Message: msg})
}
