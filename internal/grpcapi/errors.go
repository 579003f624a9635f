package grpcapi

import (
	"context"
	"errors"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/errdefs"
)

// codeOf maps an error class to its connect (gRPC) code.
func codeOf(c *errdefs.Class) connect.Code {
	switch c {
	case errdefs.ErrInvalidArgument:
		return connect.CodeInvalidArgument
	case errdefs.ErrUnauthenticated:
		return connect.CodeUnauthenticated
	case errdefs.ErrPermissionDenied:
		return connect.CodePermissionDenied
	case errdefs.ErrNotFound:
		return connect.CodeNotFound
	case errdefs.ErrConflict:
		// gRPC's own example of FAILED_PRECONDITION is rmdir of a
		// directory that is not empty: warren's conflicts are of that
		// kind (a file in the way, stdin already closed).
		return connect.CodeFailedPrecondition
	case errdefs.ErrTooLarge:
		// What gRPC itself answers for a message over the limit. The
		// class in the metadata and the detail tells it apart from a
		// quota.
		return connect.CodeResourceExhausted
	case errdefs.ErrResourceExhausted:
		return connect.CodeResourceExhausted
	case errdefs.ErrUnavailable:
		return connect.CodeUnavailable
	case errdefs.ErrCanceled:
		return connect.CodeCanceled
	}
	return connect.CodeInternal
}

// ErrorCodeKey is the metadata key (a header, or a trailer in gRPC) that
// carries warren's error class, the envelope code of REST.
const ErrorCodeKey = "warren-error-code"

// connectError is the one place the RPC transport maps errors: the class
// of err picks the code, the message is kept, and the class travels as
// metadata and as an ErrorDetail. A rate limit or a full daemon adds
// retry-after (whole seconds, as REST's Retry-After). Errors connect made
// itself (a malformed message, a broken stream) pass unchanged.
func connectError(err error) *connect.Error {
	if ce, ok := err.(*connect.Error); ok {
		return ce // mapped already
	}
	var ce *connect.Error
	if errors.As(err, &ce) && !errdefs.Classified(err) {
		return ce
	}
	c := errdefs.ClassOf(err)
	if !errdefs.Classified(err) {
		// The caller gave up or ran out of time: say so, not "internal".
		switch {
		case errors.Is(err, context.Canceled):
			return connect.NewError(connect.CodeCanceled, err)
		case errors.Is(err, context.DeadlineExceeded):
			return connect.NewError(connect.CodeDeadlineExceeded, err)
		}
	}
	out := connect.NewError(codeOf(c), err)
	out.Meta().Set(ErrorCodeKey, c.String())
	if d, ok := errdefs.RetryAfter(err); ok {
		out.Meta().Set("retry-after", strconv.Itoa(int(max(1, d.Seconds()))))
	}
	if detail, derr := connect.NewErrorDetail(&warrenv1.ErrorDetail{Code: c.String()}); derr == nil {
		out.AddDetail(detail)
	}
	return out
}

// jsonCodec is connect's JSON codec with REST's field names: responses
// use the proto's snake_case names ("exit_code", not "exitCode") and show
// zero values, as REST's JSON does. Requests may use either form, and
// unknown fields are skipped as in the binary encoding, so that clients and
// daemons of different versions get along.
type jsonCodec struct{ name string }

func (c jsonCodec) Name() string { return c.name }

var marshalJSON = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

func (c jsonCodec) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, errors.New("grpcapi: not a protobuf message")
	}
	return marshalJSON.Marshal(m)
}

func (c jsonCodec) Unmarshal(data []byte, msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return errors.New("grpcapi: not a protobuf message")
	}
	if len(data) == 0 {
		return errors.New("a zero-length payload is not a JSON object")
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, m)
}

func (c jsonCodec) IsBinary() bool { return false }
