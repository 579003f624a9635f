package e2b

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
)

// apiError is E2B's error body: {"code": <HTTP status>, "message": ...}.
// The SDKs read code (404 means "not found", 409 "already paused") and
// show message.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeError answers with E2B's error body for err: the one place where a
// warren error class becomes an E2B status. The status is the one every
// warren transport answers for the class (edge.StatusOf), which is also
// what E2B answers for the same condition: 400 bad input, 401 bad
// credentials, 404 unknown sandbox or template, 409 conflict (a pause of a
// paused sandbox), 429 rate limit or quota, 503 when the daemon cannot.
// Internal errors are logged with the request id; a body over its limit is
// 413.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = errdefs.New(errdefs.ErrTooLarge, "the request body exceeds the limit of %d bytes", mbe.Limit)
	}
	c := edge.ClassOf(r.Context(), err)
	edge.Failed(r.Context(), err)
	status := edge.StatusOf(c)
	if c == errdefs.ErrInternal {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "request_id", edge.RequestID(r.Context()), "error", err)
	}
	if d, ok := errdefs.RetryAfter(err); ok {
		w.Header().Set("Retry-After", itoa(int(max(1, d.Seconds()))))
	}
	writeJSON(w, status, apiError{Code: status, Message: err.Error()})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":500,"message":"could not encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// sandboxGone is what E2B's edge proxy answers envd traffic for a sandbox
// that is not running (killed, timed out, paused): 502, which the SDK
// reads as "not running" (Sandbox.isRunning, a command stream cut by a
// kill).
func sandboxGone(w http.ResponseWriter, id, why string) {
	writeJSON(w, http.StatusBadGateway, map[string]any{"code": http.StatusBadGateway, "message": why, "sandboxId": id})
}
