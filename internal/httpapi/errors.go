package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
)

// statusOf maps an error class to its HTTP status: the one place REST does.
func statusOf(c *errdefs.Class) int {
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
	}
	return http.StatusInternalServerError
}

// writeError answers with the error envelope.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = errdefs.New(errdefs.ErrTooLarge, "the request body exceeds the limit of %d bytes", mbe.Limit)
	}
	c := errdefs.ClassOf(err)
	status := statusOf(c)
	if cl, ok := r.Context().Value(callKey{}).(*call); ok {
		cl.code = c.String()
	}
	msg := err.Error()
	if c == errdefs.ErrInternal {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "request_id", reqID(r.Context()), "error", err)
	}
	if d, ok := errdefs.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, d.Seconds()))))
	}
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Code: c.String(), Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
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

// decodeJSON reads one JSON object into v: unknown fields and trailing data
// are errors, an empty body is the empty object when allowEmpty.
func decodeJSON(r *http.Request, v any, limit int64, allowEmpty bool) error {
	body := http.MaxBytesReader(nil, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &mbe):
			return err
		case errors.Is(err, io.EOF) && allowEmpty:
			return nil
		case errors.Is(err, io.EOF):
			return errdefs.New(errdefs.ErrInvalidArgument, "the request body must be a JSON object")
		case errors.As(err, &se):
			return errdefs.New(errdefs.ErrInvalidArgument, "malformed JSON at byte %d: %v", se.Offset, err)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errdefs.New(errdefs.ErrInvalidArgument, "malformed JSON: the body ends inside a value")
		case errors.As(err, &te):
			return errdefs.New(errdefs.ErrInvalidArgument, "field %q must be %s, not JSON %s", te.Field, te.Type, te.Value)
		default:
			return errdefs.New(errdefs.ErrInvalidArgument, "invalid JSON body: %v", err)
		}
	}
	if dec.More() {
		return errdefs.New(errdefs.ErrInvalidArgument, "the request body must hold exactly one JSON object")
	}
	var extra [1]byte
	if n, _ := dec.Buffered().Read(extra[:]); n > 0 && !isSpace(extra[0]) {
		return errdefs.New(errdefs.ErrInvalidArgument, "unexpected data after the JSON object")
	}
	return nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\r' || b == '\t' }

func badQuery(name, value, want string) error {
	return errdefs.New(errdefs.ErrInvalidArgument, "query parameter %s=%q: %s", name, value, want)
}
