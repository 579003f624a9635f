package edge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
)

// StatusClientClosedRequest is the status of a call whose client went away
// before the answer (nginx's 499). No client ever reads it: it is what the
// access log says instead of a 500.
const StatusClientClosedRequest = 499

// StatusOf maps an error class to its HTTP status: the one place the
// daemon does. REST answers with it, the MCP endpoint refuses with it, and
// an audit record of another transport reports it as the status REST
// would have answered.
func StatusOf(c *errdefs.Class) int {
	switch c {
	case errdefs.ErrInvalidArgument:
		return http.StatusBadRequest
	case errdefs.ErrUnauthenticated:
		return http.StatusUnauthorized
	case errdefs.ErrPermissionDenied:
		return http.StatusForbidden
	case errdefs.ErrNotFound:
		return http.StatusNotFound
	case errdefs.ErrConflict:
		return http.StatusConflict
	case errdefs.ErrTooLarge:
		return http.StatusRequestEntityTooLarge
	case errdefs.ErrResourceExhausted:
		return http.StatusTooManyRequests
	case errdefs.ErrUnavailable:
		return http.StatusServiceUnavailable
	case errdefs.ErrCanceled:
		return StatusClientClosedRequest
	}
	return http.StatusInternalServerError
}

// classOfStatus is the class of an HTTP error status that was answered
// without the envelope (a method not allowed, a WebSocket handshake that
// failed), for the audit record; StatusOf's inverse where it has one.
func classOfStatus(status int) *errdefs.Class {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType, http.StatusNotAcceptable,
		http.StatusNotImplemented: // net/http's answer to a Transfer-Encoding it does not implement
		return errdefs.ErrInvalidArgument
	case http.StatusUnauthorized:
		return errdefs.ErrUnauthenticated
	case http.StatusForbidden:
		return errdefs.ErrPermissionDenied
	case http.StatusNotFound, http.StatusGone:
		return errdefs.ErrNotFound
	case http.StatusConflict, http.StatusPreconditionFailed:
		return errdefs.ErrConflict
	case http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge:
		return errdefs.ErrTooLarge
	case http.StatusTooManyRequests:
		return errdefs.ErrResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return errdefs.ErrUnavailable
	case StatusClientClosedRequest:
		return errdefs.ErrCanceled
	}
	return errdefs.ErrInternal
}

// ClassOf is the class of a call's error err: its errdefs class, except
// that an unclassified error, or one caused by a cancellation, of a call
// whose caller went away (ctx is done) is canceled: the client hung up,
// the daemon did nothing wrong.
func ClassOf(ctx context.Context, err error) *errdefs.Class {
	c := errdefs.ClassOf(err)
	if ctx.Err() != nil && (!errdefs.Classified(err) || errors.Is(err, context.Canceled)) {
		return errdefs.ErrCanceled
	}
	return c
}

// WriteError answers r with the error envelope of err and the status of
// its class: {"error":{"code","message"}}, with Retry-After when err says
// when to retry. A body over its limit (http.MaxBytesError) is too_large.
// Internal errors (bugs) are logged with the request's id.
func (e *Edge) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = errdefs.New(errdefs.ErrTooLarge, "the request body exceeds the limit of %d bytes", mbe.Limit)
	}
	c := ClassOf(r.Context(), err)
	if cl := callOf(r.Context()); cl != nil {
		cl.mu.Lock()
		cl.code = c.String()
		cl.mu.Unlock()
	}
	if c == errdefs.ErrInternal {
		e.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "request_id", RequestID(r.Context()), "error", err)
	}
	if d, ok := errdefs.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, d.Seconds()))))
	}
	WriteJSON(w, StatusOf(c), api.Error{Error: api.ErrorBody{Code: c.String(), Message: err.Error()}})
}

// WriteJSON answers with v as JSON and the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("encode response", "error", err)
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"could not encode the response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// Failed notes that the call of ctx failed with err after its answer had
// begun (an error event in a stream), so that its audit record carries the
// class although the status said success.
func Failed(ctx context.Context, err error) {
	if c := callOf(ctx); c != nil {
		c.mu.Lock()
		c.code = ClassOf(ctx, err).String()
		c.mu.Unlock()
	}
}
