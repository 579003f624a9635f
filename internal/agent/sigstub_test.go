//go:build amd64 || arm64

package agent

import (
	"os"
	"os/signal"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestFilterQueuedFaults: with the filter in place, a fault signal queued
// from outside (SI_QUEUE) is dropped, and a real fault still reaches the Go
// runtime (a nil dereference is an ordinary, recoverable panic).
func TestFilterQueuedFaults(t *testing.T) {
	// As the agent: the fault signals notified, then filtered.
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, unix.SIGILL, unix.SIGTRAP, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGSTKFLT, unix.SIGSYS)
	defer signal.Stop(ch)
	if err := filterQueuedFaults(); err != nil {
		t.Fatal(err)
	}
	for _, sig := range faultSignals {
		// siginfo_t as rt_sigqueueinfo takes it: signo, errno, code, then
		// the sender's pid and uid and the value.
		var info [128]byte
		*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
		*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
		*(*int32)(unsafe.Pointer(&info[16])) = int32(os.Getpid())
		if _, _, e := unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(os.Getpid()), uintptr(sig), uintptr(unsafe.Pointer(&info[0]))); e != 0 {
			t.Fatalf("rt_sigqueueinfo(%v): %v", sig, e)
		}
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case s := <-ch:
		t.Errorf("a queued %v reached the program; the filter should have dropped it", s)
	default:
	}
	// A real fault: the runtime still turns it into a panic.
	recovered := func() (r any) {
		defer func() { r = recover() }()
		var p *int
		return *p
	}()
	if recovered == nil {
		t.Fatal("a nil dereference did not panic")
	}
	t.Logf("real fault still panics: %v", recovered)
}
