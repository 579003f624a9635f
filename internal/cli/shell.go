package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/warrenhq/warren/client"
)

func newShellCommand(a *app) *cobra.Command {
	var opts client.ShellOptions
	cmd := &cobra.Command{
		Use:   "shell [flags] SESSION",
		Short: "Open an interactive shell in a session",
		Long: `Open an interactive login shell on a pseudo-terminal in a session, and exit
with its exit code when it exits. The local terminal is in raw mode meanwhile,
so every key (Ctrl-C included) goes to the remote shell, and the remote
terminal follows the local one's size.

The shell is a process of the session, independent of this connection: if
the connection is lost it keeps running, and --process attaches to it again
(or to any process started with "warren start --tty"), redrawing the screen
from its recent output. With --kill-on-close it ends with the connection.

When stdin is not a terminal, its bytes are sent as typed input, and once
it is used up an end of input (Ctrl-D), repeated every half second until
the shell ends: so "printf 'make\n' | warren shell demo" runs make and
exits with the shell once make is done.`,
		Example: `  warren shell demo
  warren shell demo --process p3
  printf 'ls\n' | warren shell demo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			fd, isTerm := terminalFd(a.stdin)
			if isTerm {
				if cols, rows, err := term.GetSize(fd); err == nil {
					opts.Cols, opts.Rows = cols, rows
				}
			}
			conn, err := a.client().Shell(ctx, id, opts)
			if err != nil {
				return fmt.Errorf("shell in session %s: %w", id, err)
			}
			defer conn.Close()

			err = a.attach(conn, fd, isTerm)
			// The terminal is restored: notes may be printed.
			if code, sig, exited := conn.ExitCode(); exited {
				if sig != "" {
					a.warn("the shell was killed by %s", sig)
				}
				return exitStatus(code)
			}
			if err == nil {
				err = errors.New("the daemon closed the connection without the shell's exit status")
			} else if ctx.Err() != nil && cmd.Context().Err() == nil {
				err = errors.New("interrupted by a signal")
			}
			msg := fmt.Sprintf("shell in session %s: %v", id, err)
			if pid := conn.ProcessID(); pid != "" && !opts.KillOnClose {
				msg += fmt.Sprintf("\nwarren: the shell may still be running; attach to it again with: warren shell %s --process %s", id, pid)
			}
			return exitError{code: 1, msg: msg}
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Process, "process", "", "attach to this running TTY process of the session instead of starting a shell")
	f.BoolVar(&opts.KillOnClose, "kill-on-close", false, "kill the shell when the connection closes, instead of keeping it for a reattach")
	return cmd
}

// terminalFd returns the file descriptor of r and whether it is a terminal.
// It leaves the file's blocking mode alone (unlike os.File.Fd), so that a
// read of it can still be interrupted by a deadline where the file allows.
func terminalFd(r io.Reader) (int, bool) {
	f, ok := r.(*os.File)
	if !ok {
		return -1, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd := -1
	if rc.Control(func(u uintptr) { fd = int(u) }) != nil || fd < 0 {
		return -1, false
	}
	return fd, term.IsTerminal(fd)
}

// attach connects the local terminal (or stdin and stdout) to conn until
// the remote side ends: the terminal in raw mode, restored before attach
// returns; its size sent now and on every SIGWINCH; stdin copied to conn and
// conn's output to stdout. It returns what ended the output, nil for a
// normal end.
func (a *app) attach(conn *client.ShellConn, fd int, isTerm bool) error {
	if isTerm {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer func() { _ = term.Restore(fd, old) }() // nothing more to do for a terminal that will not restore
		stopResizes := forwardResizes(fd, conn)
		defer stopResizes()
	}

	inputDone := make(chan struct{})
	outputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		if _, err := io.Copy(conn, a.stdin); err == nil && !isTerm {
			endInput(conn, outputDone)
		}
	}()
	defer stopInput(a.stdin, inputDone)
	defer close(outputDone) // before stopInput waits for the input's end

	if _, err := io.Copy(a.stdout, conn); err != nil {
		return err
	}
	return nil
}

// eofRepeat is how often endInput sends Ctrl-D again.
const eofRepeat = 500 * time.Millisecond

// endInput ends piped input as Ctrl-D at a terminal would, until the
// remote side ends (done is closed) or the connection fails. One Ctrl-D is
// not enough: it ends the shell only when the shell reads it at an empty
// prompt. One that arrives while a command runs, or before the shell set
// up its line editor, is that command's end of input or is dropped when
// the shell switches the terminal's mode, and the shell would then wait
// for input forever. So it is sent again every eofRepeat; the first that
// reaches the prompt ends the shell.
func endInput(conn *client.ShellConn, done <-chan struct{}) {
	t := time.NewTicker(eofRepeat)
	defer t.Stop()
	for {
		if _, err := conn.Write([]byte{0x04}); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// stopInput ends the copy of stdin once the shell has ended: it interrupts
// a read of stdin that waits for input, where stdin is a file in
// non-blocking mode (a deadline then ends the read), and waits for the copy.
// A read that cannot be interrupted (stdin in blocking mode, as a terminal
// usually is) ends with warren's process; the copy holds nothing else, and
// its writes to the closed connection fail.
func stopInput(stdin io.Reader, done <-chan struct{}) {
	select {
	case <-done:
		return
	default:
	}
	f, ok := stdin.(*os.File)
	if !ok || !nonBlocking(f) || f.SetReadDeadline(time.Now()) != nil {
		return
	}
	defer f.SetReadDeadline(time.Time{})
	select {
	case <-done:
	case <-time.After(time.Second): // the file went blocking meanwhile
	}
}

// nonBlocking reports whether f is in non-blocking mode, where the runtime's
// poller reads it and deadlines interrupt reads.
func nonBlocking(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	nb := false
	_ = rc.Control(func(fd uintptr) { // nb stays false if it never ran
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nb = err == nil && flags&unix.O_NONBLOCK != 0
	})
	return nb
}

// forwardResizes sends the terminal's size to conn now and on every
// SIGWINCH, until the returned function is called.
func forwardResizes(fd int, conn *client.ShellConn) (stop func()) {
	resize := func() {
		if cols, rows, err := term.GetSize(fd); err == nil {
			_ = conn.Resize(cols, rows) // a lost resize leaves the old size; the next one sets it
		}
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	resize()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-winch:
				resize()
			case <-done:
				return
			}
		}
	})
	return func() {
		signal.Stop(winch)
		close(done)
		wg.Wait()
	}
}
