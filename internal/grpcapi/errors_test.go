package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/internal/errdefs"
)

func TestConnectError(t *testing.T) {
	tests := []struct {
		class *errdefs.Class
		code  connect.Code
	}{
		{errdefs.ErrInvalidArgument, connect.CodeInvalidArgument},
		{errdefs.ErrUnauthenticated, connect.CodeUnauthenticated},
		{errdefs.ErrPermissionDenied, connect.CodePermissionDenied},
		{errdefs.ErrNotFound, connect.CodeNotFound},
		{errdefs.ErrConflict, connect.CodeFailedPrecondition},
		{errdefs.ErrTooLarge, connect.CodeResourceExhausted},
		{errdefs.ErrResourceExhausted, connect.CodeResourceExhausted},
		{errdefs.ErrUnavailable, connect.CodeUnavailable},
		{errdefs.ErrInternal, connect.CodeInternal},
		{errdefs.ErrCanceled, connect.CodeCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.class.String(), func(t *testing.T) {
			msg := fmt.Sprintf("session %q: something about %s", "s1", tc.class)
			// Wrapped once more on the way up, as layers do.
			err := fmt.Errorf("exec: %w", errdefs.New(tc.class, "%s", msg))
			ce := connectError(err)
			if ce.Code() != tc.code {
				t.Errorf("code %v, want %v", ce.Code(), tc.code)
			}
			if ce.Message() != err.Error() {
				t.Errorf("message %q, want %q", ce.Message(), err.Error())
			}
			if got := ce.Meta().Get(ErrorCodeKey); got != tc.class.String() {
				t.Errorf("%s metadata %q, want %q", ErrorCodeKey, got, tc.class)
			}
			if ce.Meta().Get("Retry-After") != "" {
				t.Errorf("retry-after %q without a delay", ce.Meta().Get("Retry-After"))
			}
			if len(ce.Details()) != 1 {
				t.Fatalf("details %v, want one ErrorDetail", ce.Details())
			}
			d, err := ce.Details()[0].Value()
			if ed, ok := d.(*warrenv1.ErrorDetail); err != nil || !ok || ed.GetCode() != tc.class.String() {
				t.Errorf("detail %v (%v), want ErrorDetail{code: %q}", d, err, tc.class)
			}
			// The class stays reachable for the audit record.
			if errdefs.ClassOf(ce) != tc.class {
				t.Errorf("ClassOf(mapped) = %v, want %v", errdefs.ClassOf(ce), tc.class)
			}
		})
	}
}

func TestConnectErrorRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{
		{1500 * time.Millisecond, "1"},
		{10 * time.Millisecond, "1"}, // never 0: that would mean "now"
		{42 * time.Second, "42"},
	} {
		ce := connectError(errdefs.WithRetryAfter(errdefs.ErrResourceExhausted, tc.after, "rate limit"))
		if ce.Code() != connect.CodeResourceExhausted || ce.Meta().Get("retry-after") != tc.want {
			t.Errorf("retry in %v: %v retry-after %q, want %q", tc.after, ce.Code(), ce.Meta().Get("retry-after"), tc.want)
		}
	}
}

func TestConnectErrorUnclassified(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		code  connect.Code
		class string // the warren-error-code metadata, "" for none
		msg   string
	}{
		{"plain error", errors.New("boom"), connect.CodeInternal, "internal", "boom"},
		{"caller canceled", fmt.Errorf("exec: %w", context.Canceled), connect.CodeCanceled, "", "exec: context canceled"},
		{"caller's deadline", fmt.Errorf("exec: %w", context.DeadlineExceeded), connect.CodeDeadlineExceeded, "", "exec: context deadline exceeded"},
		// A class wins over the context error it wraps.
		{"classified cancel", errdefs.New(errdefs.ErrUnavailable, "queued exec: %w", context.Canceled), connect.CodeUnavailable, "unavailable", "queued exec: context canceled"},
		// connect's own errors (a malformed message, a broken stream)
		// pass as they are.
		{"connect error", connect.NewError(connect.CodeInvalidArgument, errors.New("unmarshal")), connect.CodeInvalidArgument, "", "unmarshal"},
		{"wrapped connect error", fmt.Errorf("send: %w", connect.NewError(connect.CodeCanceled, errors.New("gone"))), connect.CodeCanceled, "", "gone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ce := connectError(tc.err)
			if ce.Code() != tc.code || ce.Meta().Get(ErrorCodeKey) != tc.class {
				t.Errorf("%v: code %v, class %q; want %v, %q", tc.err, ce.Code(), ce.Meta().Get(ErrorCodeKey), tc.code, tc.class)
			}
			if ce.Message() != tc.msg {
				t.Errorf("message %q, want %q", ce.Message(), tc.msg)
			}
		})
	}
	// Mapping twice changes nothing.
	once := connectError(errdefs.New(errdefs.ErrNotFound, "no session"))
	if twice := connectError(once); twice != once {
		t.Errorf("mapping a mapped error again made %v", twice)
	}
}

// TestMutatingProcedures: the audited procedures are exactly those not
// marked NO_SIDE_EFFECTS, as REST audits every method but GET.
func TestMutatingProcedures(t *testing.T) {
	m := mutatingProcedures()
	reads := []string{
		"/warren.v1.SessionService/GetSession", "/warren.v1.SessionService/ListSessions",
		"/warren.v1.ProcessService/ListProcesses", "/warren.v1.ProcessService/GetProcess", "/warren.v1.ProcessService/ProcessOutput",
		"/warren.v1.FileService/ReadFile", "/warren.v1.FileService/ListFiles", "/warren.v1.FileService/StatFile",
		"/warren.v1.NetworkService/GetNetwork", "/warren.v1.NetworkService/ListNetworkDenials",
	}
	writes := 0
	for p, mutating := range m {
		isRead := false
		for _, r := range reads {
			isRead = isRead || r == p
		}
		if mutating == isRead {
			t.Errorf("%s: mutating=%v", p, mutating)
		}
		if mutating {
			writes++
		}
	}
	if len(m) != 25 || writes != 15 {
		t.Errorf("%d procedures, %d mutating; want 25 and 15: %v", len(m), writes, m)
	}
}
