//go:build amd64 || arm64

package agent

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sigStubs returns the addresses of sigNop and of the restorer the
// architecture needs (0 where the kernel supplies one).
func sigStubs() (handler, restorer uintptr)

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on amd64
// and arm64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// The flags of struct sigaction (asm-generic/signal-defs.h, the same on
// amd64 and arm64); x/sys/unix does not export them.
const (
	saSiginfo  = 0x00000004
	saRestorer = 0x04000000
	saOnstack  = 0x08000000
	saRestart  = 0x10000000
)

// fatalDefaults are the signals whose default action ends the process, less
// SIGKILL and SIGSTOP that cannot be caught.
func fatalDefault(sig int) bool {
	switch unix.Signal(sig) {
	case unix.SIGKILL, unix.SIGSTOP, unix.SIGCHLD, unix.SIGCONT, unix.SIGURG, unix.SIGWINCH,
		unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return false
	}
	return true
}

// catchFatalDefaults installs a handler that does nothing for every signal
// still at SIG_DFL with a fatal default: the ones the Go runtime leaves alone
// (32 and 34 in a static binary, 34 under cgo; glibc owns 32 and 33 there).
//
// The kernel drops a signal sent to a namespace's init from inside when the
// disposition is SIG_DFL, but only if the thread it checks does not block the
// signal at that instant. Go threads briefly block every signal (around
// clone, for instance), and a signal queued then is delivered to another
// thread with its default action: the whole agent dies. A sandboxed process
// could kill its own session's agent this way with `kill -s 34 1` in a loop.
// A caught signal is reset to SIG_DFL by execve, so the children the agent
// starts see the usual defaults.
func catchFatalDefaults() error {
	handler, restorer := sigStubs()
	for sig := 1; sig <= 64; sig++ {
		if !fatalDefault(sig) {
			continue
		}
		var old kernelSigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			return e
		}
		if old.handler != 0 { // not SIG_DFL
			continue
		}
		act := kernelSigaction{handler: handler, flags: saOnstack | saRestart | saSiginfo}
		if restorer != 0 {
			act.restorer = restorer
			act.flags |= saRestorer
		}
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
			return e
		}
	}
	return nil
}

// sigFilterAddr returns the address of sigFilter (sigstub_*.s).
func sigFilterAddr() uintptr

// goHandlers holds, by signal number, the Go runtime's handler that
// sigFilter passes real faults to. Written before sigFilter is installed,
// read only by it.
var goHandlers [65]uintptr

// faultSignals are the signals the Go runtime treats as a fault of its own
// when their si_code is not SI_USER or SI_TKILL.
var faultSignals = []unix.Signal{unix.SIGILL, unix.SIGTRAP, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGSTKFLT, unix.SIGSYS}

// filterQueuedFaults puts sigFilter in front of the runtime's handler for
// faultSignals. The runtime decides "did someone send this?" by si_code
// SI_USER or SI_TKILL only: a SIGSEGV queued with sigqueue(2) (SI_QUEUE)
// is taken for a fault of the agent's own and becomes a panic, a queued
// SIGILL or SIGSYS a crash, so any sandboxed process could end its
// session's agent with one call. The kernel lets no process but the target
// itself queue a signal with si_code > 0, so everything at or below zero is
// from outside and is dropped; the agent never needs these signals from
// anyone. Must run after the runtime installed its handlers (it does at
// start) and after os/signal.Notify took any of these signals.
func filterQueuedFaults() error {
	filter := sigFilterAddr()
	for _, sig := range faultSignals {
		var old kernelSigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			return e
		}
		if old.handler <= 1 { // SIG_DFL or SIG_IGN: nothing to filter for
			continue
		}
		goHandlers[sig] = old.handler
		act := old
		act.handler = filter
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
			return e
		}
	}
	return nil
}
