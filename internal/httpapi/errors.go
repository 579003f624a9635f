package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
)

// writeError answers with the error envelope (the edge's one mapping).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.edge.WriteError(w, r, err)
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) { edge.WriteJSON(w, status, v) }

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
