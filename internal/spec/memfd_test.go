package spec

import (
	"io"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSealedMemfd: the memfd holds exactly what was written, and nothing
// can change it afterwards, not even through a new descriptor.
func TestSealedMemfd(t *testing.T) {
	want := []byte("the program")
	f, err := SealedMemfd("test", want, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil || string(got) != string(want) {
		t.Fatalf("contents %q, %v; want %q", got, err, want)
	}
	if _, err := f.WriteAt([]byte("X"), 0); err == nil {
		t.Error("a sealed memfd took a write")
	}
	if err := f.Truncate(1); err == nil {
		t.Error("a sealed memfd shrank")
	}
	if err := f.Truncate(100); err == nil {
		t.Error("a sealed memfd grew")
	}
	// Seals cannot be removed or added to.
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SEAL == 0 || seals&unix.F_SEAL_WRITE == 0 {
		t.Errorf("seals %#x, %v; want SEAL and WRITE", seals, err)
	}
}
