package errdefs

import (
	"errors"
	"fmt"
	"io"
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
