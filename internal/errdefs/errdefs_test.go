package errdefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"testing"
	"time"
)

func TestClasses(t *testing.T) {
	base := New(ErrNotFound, "session %q not found", "x")
	wrapped := fmt.Errorf("exec: %w", base)
	if !errors.Is(wrapped, ErrNotFound) || ClassOf(wrapped) != ErrNotFound {
		t.Errorf("ClassOf(wrapped) = %v, want not_found", ClassOf(wrapped))
	}
	if got := base.Error(); got != `session "x" not found` {
		t.Errorf("Error() = %q", got)
	}
	if ClassOf(io.EOF) != ErrInternal || ClassOf(nil) != ErrInternal {
		t.Errorf("an unclassified error must be internal")
	}
	cause := New(ErrInvalidArgument, "with %w", io.ErrUnexpectedEOF)
	if !errors.Is(cause, io.ErrUnexpectedEOF) || !errors.Is(cause, ErrInvalidArgument) {
		t.Errorf("%%w must keep the cause reachable")
	}
	for _, c := range classes {
		if FromCode(c.String()) != c {
			t.Errorf("FromCode(%q) = %v", c, FromCode(c.String()))
		}
	}
	if FromCode("nonsense") != ErrInternal {
		t.Errorf("FromCode of an unknown code must be internal")
	}
	ra := WithRetryAfter(ErrResourceExhausted, 3*time.Second, "slow down")
	if d, ok := RetryAfter(fmt.Errorf("x: %w", ra)); !ok || d != 3*time.Second || ClassOf(ra) != ErrResourceExhausted {
		t.Errorf("RetryAfter = %v, %v", d, ok)
	}
	if _, ok := RetryAfter(base); ok {
		t.Errorf("RetryAfter of a plain error must be absent")
	}
}

// TestOutermostClass: wrapping a classified cause in another class
// re-classifies it; the cause stays reachable.
func TestOutermostClass(t *testing.T) {
	cause := New(ErrInvalidArgument, "unknown user %q", "bob")
	tests := []struct {
		name string
		err  error
		want *Class
	}{
		{"plain", cause, ErrInvalidArgument},
		{"wrapped in unavailable", New(ErrUnavailable, "could not start the sandbox: %w", cause), ErrUnavailable},
		{"fmt wrap over a class", fmt.Errorf("create: %w", New(ErrUnavailable, "start: %w", cause)), ErrUnavailable},
		{"class value wrapped", fmt.Errorf("x: %w", ErrConflict), ErrConflict},
		{"joined, first classified branch", errors.Join(io.EOF, New(ErrNotFound, "gone"), cause), ErrNotFound},
		{"retry-after over a cause", fmt.Errorf("y: %w", WithRetryAfter(ErrResourceExhausted, time.Second, "slow")), ErrResourceExhausted},
		{"unclassified", fmt.Errorf("z: %w", io.EOF), ErrInternal},
		{"a full disk", fmt.Errorf("w: %w", &fs.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC}), ErrUnavailable},
		{"a quota", fmt.Errorf("w: %w", syscall.EDQUOT), ErrUnavailable},
		{"a full disk under a class", New(ErrInvalidArgument, "x: %w", syscall.ENOSPC), ErrInvalidArgument},
		{"another errno", fmt.Errorf("w: %w", syscall.EIO), ErrInternal},
	}
	for _, tc := range tests {
		if got := ClassOf(tc.err); got != tc.want {
			t.Errorf("%s: ClassOf(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		if !Is(tc.err, tc.want) && tc.want != ErrInternal {
			t.Errorf("%s: Is(%v, %v) = false", tc.name, tc.err, tc.want)
		}
	}
	outer := New(ErrUnavailable, "could not start the sandbox: %w", cause)
	if Is(outer, ErrInvalidArgument) {
		t.Errorf("Is(outer, invalid_argument) = true: the inner class must not show through")
	}
	if !errors.Is(outer, cause) || outer.Error() != `could not start the sandbox: unknown user "bob"` {
		t.Errorf("the cause must stay reachable and in the text: %v", outer)
	}
	if Classified(io.EOF) || !Classified(New(ErrInternal, "bug")) || Is(io.EOF, ErrInternal) {
		t.Errorf("Classified/Is of ErrInternal: an unclassified error has no class")
	}
}

func TestExplicit(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{syscall.ENOSPC, false},
		{fmt.Errorf("write: %w", syscall.EDQUOT), false},
		{New(ErrResourceExhausted, "full: %w", syscall.ENOSPC), true},
		{errors.New("plain"), false},
		{ErrNotFound, true},
	} {
		if got := Explicit(tc.err); got != tc.want {
			t.Errorf("Explicit(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if c := ClassOf(syscall.ENOSPC); c != ErrUnavailable {
		t.Errorf("ClassOf(ENOSPC) = %v, want unavailable (the daemon's view)", c)
	}
}
