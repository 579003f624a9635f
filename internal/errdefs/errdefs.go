// Package errdefs defines warren's error classes. Every layer wraps its
// errors with one of these classes; each transport maps a class to its own
// status (HTTP status and envelope code, Connect code, MCP tool error) in
// exactly one place. Callers classify with ClassOf and Is, never by message
// text.
//
// An error's class is the outermost one on its chain (as containerd/errdefs
// resolves it): New(ErrUnavailable, "start the sandbox: %w", cause) is
// unavailable whatever cause's class, and cause stays reachable through
// errors.Is and errors.As. Wrapping with %w never needs flattening with %v
// to change the class.
package errdefs

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Class is one error class. Its String is the snake_case code that goes on
// the wire in the error envelope.
type Class struct{ code string }

func (c *Class) Error() string  { return c.code }
func (c *Class) String() string { return c.code }

// The classes, named after the envelope codes in DESIGN.md.
var (
	ErrInvalidArgument   = &Class{"invalid_argument"}
	ErrUnauthenticated   = &Class{"unauthenticated"}
	ErrPermissionDenied  = &Class{"permission_denied"}
	ErrNotFound          = &Class{"not_found"}
	ErrConflict          = &Class{"conflict"}
	ErrTooLarge          = &Class{"too_large"}
	ErrResourceExhausted = &Class{"resource_exhausted"}
	ErrUnavailable       = &Class{"unavailable"}
	ErrInternal          = &Class{"internal"}
	// ErrCanceled is a call whose caller went away (hung up, or cancelled
	// it) before the answer. Nobody reads its answer; it exists so that the
	// access log, the audit log and the metrics say what happened instead
	// of "internal". It is never given to a caller that is still there.
	ErrCanceled = &Class{"canceled"}
)

var classes = []*Class{
	ErrInvalidArgument, ErrUnauthenticated, ErrPermissionDenied, ErrNotFound,
	ErrConflict, ErrTooLarge, ErrResourceExhausted, ErrUnavailable, ErrInternal,
	ErrCanceled,
}

// classified is an error with a class and a human sentence.
type classified struct {
	class      *Class
	msg        string
	cause      error
	retryAfter time.Duration
}

func (e *classified) Error() string {
	if e.cause != nil && e.msg == "" {
		return e.cause.Error()
	}
	return e.msg
}

func (e *classified) Is(target error) bool { return target == e.class }
func (e *classified) Unwrap() error        { return e.cause }

// New returns an error of class c whose message is the formatted text. A %w
// verb in format keeps the wrapped error reachable through errors.Is/As.
func New(c *Class, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &classified{class: c, msg: err.Error(), cause: errors.Unwrap(err)}
}

// WithRetryAfter returns an error of class c that tells the client when to
// retry (rate limits, a full daemon).
func WithRetryAfter(c *Class, after time.Duration, format string, args ...any) error {
	return &classified{class: c, msg: fmt.Sprintf(format, args...), retryAfter: after}
}

// ClassOf returns the class of err: the outermost class on its chain, or
// ErrInternal when err carries none.
func ClassOf(err error) *Class {
	if c := resolve(err); c != nil {
		return c
	}
	return ErrInternal
}

// Classified reports whether err carries a class at all (ErrInternal
// included), as opposed to being internal for want of one.
func Classified(err error) bool { return resolve(err) != nil }

// Explicit reports whether err carries a class that code gave it, leaving
// out the class a bare ENOSPC or EDQUOT gets from resolve. Code that knows
// better what a full filesystem means where it runs (the agent, for which
// it is the session's own disk limit) asks this before classifying the
// errno itself.
func Explicit(err error) bool { return resolveIn(err, false) != nil }

// resolve walks err's chain from the outside in and returns the first class
// it meets, nil if none. A joined error's branches are searched in order.
func resolve(err error) *Class { return resolveIn(err, true) }

// resolveIn is resolve; errnos says whether a bare ENOSPC or EDQUOT counts
// as unavailable.
func resolveIn(err error, errnos bool) *Class {
	for err != nil {
		switch e := err.(type) {
		case *classified:
			return e.class
		case *Class:
			return e
		case interface{ Unwrap() []error }:
			for _, b := range e.Unwrap() {
				if c := resolveIn(b, errnos); c != nil {
					return c
				}
			}
			return nil
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case syscall.Errno:
			// A full filesystem is the host's state, not a bug: where no
			// caller classified it, the call may work once space is freed.
			if errnos && (e == syscall.ENOSPC || e == syscall.EDQUOT) {
				return ErrUnavailable
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// FromCode returns the class with the given envelope code, or ErrInternal.
func FromCode(code string) *Class {
	for _, c := range classes {
		if c.code == code {
			return c
		}
	}
	return ErrInternal
}

// RetryAfter returns how long the client should wait, if err says so.
func RetryAfter(err error) (time.Duration, bool) {
	var ce *classified
	if errors.As(err, &ce) && ce.retryAfter > 0 {
		return ce.retryAfter, true
	}
	return 0, false
}

// Is reports whether err's class (the outermost, as ClassOf) is c. An
// unclassified error is of no class, not even ErrInternal.
func Is(err error, c *Class) bool { return resolve(err) == c }
