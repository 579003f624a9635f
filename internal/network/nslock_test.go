package network

import (
	"os"
	"strings"
	"testing"
)

// TestNSLock: one daemon at a time manages a namespace's egress; a second
// is told which process holds it, and gets it once the first lets go.
func TestNSLock(t *testing.T) {
	old := LockDir
	LockDir = t.TempDir()
	t.Cleanup(func() { LockDir = old })
	first, err := lockNS("")
	if err != nil {
		t.Fatalf("lockNS() = %v", err)
	}
	if _, err := lockNS(""); err == nil || !strings.Contains(err.Error(), "another warren daemon") {
		t.Fatalf("a second lockNS() = %v, want a refusal naming the holder", err)
	} else if !strings.Contains(err.Error(), "pid ") {
		t.Errorf("refusal %q does not name the holder's pid", err)
	}
	first.release()
	second, err := lockNS("")
	if err != nil {
		t.Fatalf("lockNS() after release = %v", err)
	}
	second.release()
	if left, _ := os.ReadDir(LockDir); len(left) != 0 {
		t.Errorf("release left %d files in the lock directory", len(left))
	}
	if _, err := lockNS("/nonexistent/ns"); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("lockNS(missing path) = %v, want not-exist", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
