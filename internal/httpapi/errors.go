package httpapi

import (
	"bytes"
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
//
// The whole body is read before any of it is decoded: a complete object
// followed by a body that ends early (a client or proxy that died in
// the middle) or by more data is refused, never acted on.
func decodeJSON(r *http.Request, v any, limit int64, allowEmpty bool) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || errdefs.Classified(err) {
			return err
		}
		return errdefs.New(errdefs.ErrInvalidArgument, "reading the request body: %w", err)
	}
	return decodeJSONBytes(b, v, allowEmpty)
}

// decodeJSONBytes is decodeJSON's decoding of a body already read.
func decodeJSONBytes(b []byte, v any, allowEmpty bool) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] != '{' {
		return errdefs.New(errdefs.ErrInvalidArgument, "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
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
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return errdefs.New(errdefs.ErrInvalidArgument, "the request body must hold exactly one JSON object; %d bytes follow it", len(rest))
	}
	return nil
}

func badQuery(name, value, want string) error {
	return errdefs.New(errdefs.ErrInvalidArgument, "query parameter %s=%q: %s", name, value, want)
}
