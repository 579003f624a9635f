package agent

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
)

// The session shell is one long-lived bash (or sh) without a terminal. It
// runs a small driver loop that reads a one-line token per command from a
// private pipe, evaluates the command text from a file at top level (so cd,
// variables, functions, aliases and sourced environments persist natively),
// with the command's stdin, stdout and stderr redirected to FIFOs the agent
// reads, and writes the exit status and the exported environment to a second
// private pipe. The status never comes from parsing output.
//
// The driver's own descriptors are closed for the command itself, so neither
// the command nor anything it starts can read tokens or forge statuses.
const (
	runDir  = "/run/warren"
	cmdPath = runDir + "/cmd"
	outPath = runDir + "/out"
	errPath = runDir + "/err"
	inPath  = runDir + "/in"
)

// The status protocol: 'S' tag NUL when the command's redirections are in
// place and it starts; 'E' tag SP status NUL export-text NUL when it ended.
// tag echoes the token's random tag, so a report the driver makes for any
// other reason (a late abort signal interrupting its read), or one forged by
// code in the session, is ignored.
const (
	evStarted = 'S'
	evEnded   = 'E'
	evGone    = 0 // the status pipe hit EOF: the shell is gone
)

// abortSignal makes the driver abandon the running command and keep the
// shell. Its trap arms only while a command runs (the sourced command file
// is on the call stack): it turns on extdebug with a DEBUG trap that
// simulates `return` in every frame down to the command file, so loops,
// pipelines, command substitutions and the command's own shell functions
// all unwind, and nothing after them runs. The driver clears the trap before
// it reports. A late signal, arriving after the command ended, does nothing.
const abortSignal = unix.SIGUSR2

// tokenLen is the length of a token: 16 hex digits of tag, a space, the
// stdin flag and a newline. bashDriver reads exactly that many bytes.
const tokenLen = 19

// bashDriver is the driver for bash. It reads the token, always tokenLen
// bytes, with read -N: one system call, where a line read from a pipe costs
// one per byte. The command is sourced at top level,
// so `return` ends it and the abort can unwind it; the loop condition
// reports the previous command, so even a `continue` or `break` typed by the
// user still gets reported. (`break 2` leaves the driver: the shell exits and
// is restarted with its state.)
const bashDriver = `__warren_ret() { return "$1"; }
__warren_unwind() { [[ " ${FUNCNAME[*]:1} " == *" source "* ]] && return 2; return 0; }
__warren_abort() { [[ " ${FUNCNAME[*]:1} " == *" source "* ]] || return 1; __warren_aborting=1; builtin shopt -s extdebug; builtin trap __warren_unwind DEBUG; }
builtin trap '__warren_abort && builtin return 124' USR2
builtin shopt -s expand_aliases
while :; do
while __warren_st=$?; [[ -z $__warren_aborting ]] || { __warren_aborting=; builtin trap - DEBUG; builtin shopt -u extdebug; }; builtin printf 'E%s %s\0' "$__warren_seq" "$__warren_st" >&249; builtin export -p >&249; builtin printf '\0' >&249; builtin read -r -N 19 -u 248 __warren_in; do
__warren_seq=${__warren_in:0:16} __warren_tok=${__warren_in:17:1}
case $__warren_tok in
i) { builtin printf 'S%s\0' "$__warren_seq" >&249; { __warren_ret "$__warren_st"; builtin source /run/warren/cmd; } 248<&- 249>&-; } </run/warren/in >/run/warren/out 2>/run/warren/err ;;
*) { builtin printf 'S%s\0' "$__warren_seq" >&249; { __warren_ret "$__warren_st"; builtin source /run/warren/cmd; } 248<&- 249>&-; } </dev/null >/run/warren/out 2>/run/warren/err ;;
esac
done
done
`

// shDriver is the POSIX variant for images without bash (dash, busybox ash):
// descriptors above 9 are not portable, and there is no DEBUG trap, so an
// abort returns from the innermost function or the command file only; what
// keeps running is cut off with the shell after the grace period. A syntax
// error exits a POSIX non-interactive shell. In both cases the agent restarts
// the shell with its cwd and environment.
const shDriver = `__warren_ret() { return "$1"; }
trap 'return 124 2>/dev/null' USR2
while :; do
while __warren_st=$?; printf 'E%s %s\0' "$__warren_seq" "$__warren_st" >&9; export -p >&9; printf '\0' >&9; read -r __warren_seq __warren_tok <&8; do
case $__warren_tok in
i) { printf 'S%s\0' "$__warren_seq" >&9; { __warren_ret "$__warren_st"; . /run/warren/cmd; } 8<&- 9>&-; } </run/warren/in >/run/warren/out 2>/run/warren/err ;;
*) { printf 'S%s\0' "$__warren_seq" >&9; { __warren_ret "$__warren_st"; . /run/warren/cmd; } 8<&- 9>&-; } </dev/null >/run/warren/out 2>/run/warren/err ;;
esac
done
done
`

// abortGrace is how long a timed-out command gets to unwind after the abort
// signal before the shell itself is killed (a trap of the user's own, or a
// wedged shell) and restarted.
const abortGrace = time.Second

type shellEvent struct {
	kind   byte
	seq    string
	status int
	env    []byte
	// envSize is the size of an environment report dropped for being
	// larger than maxEnvReport (env is then nil), 0 otherwise.
	envSize int64
}

// maxEnvReport caps the exported environment the shell reports after each
// command (the text of `export -p`). A larger report is read and dropped,
// never buffered: the shell keeps its variables, but argv calls and a
// restarted shell keep the last environment within the cap, and the call
// says so on its stderr. 2 MiB is about what execve(2) accepts for
// arguments and environment together (a quarter of the default 8 MiB stack
// limit), so no program could have been started with more anyway.
const maxEnvReport = 2 << 20

// shellProc is one running shell process.
type shellProc struct {
	pid    int
	exit   <-chan unix.WaitStatus
	tok    *os.File
	events chan shellEvent
}

// reap returns the shell's wait status once its status pipe closed. The pipe
// closes when the shell exits, or when sandboxed code closed the driver's
// descriptors; a shell that cannot report any more is killed.
func (p *shellProc) reap() unix.WaitStatus {
	select {
	case ws := <-p.exit:
		return ws
	case <-time.After(100 * time.Millisecond):
	}
	// Not reaped yet, so the pid still names the shell (alive or a zombie).
	unix.Kill(p.pid, unix.SIGKILL)
	return <-p.exit
}

// shell is the session's persistent shell and the queue of calls to it.
type shell struct {
	a    *Agent
	path string
	bash bool

	qmu   sync.Mutex // guards busy and queue
	busy  bool
	queue []*turn

	// Owned by the holder of the turn.
	proc      *shellProc
	started   bool // a shell has run before: the next start is a restart
	cwd       string
	env       []string
	envBlob   []byte
	outHeld   bool // a background process holds the out FIFO
	errHeld   bool
	outQ      fifo // the read ends, kept across commands (see fifo)
	errQ      fifo
	lastState sync.Mutex // guards snapCwd and snapEnv, read by argv calls
	snapCwd   string
	snapEnv   []string
}

// turn is one caller's place in the shell's queue.
type turn struct {
	ready    chan struct{}
	canceled bool
}

func newShell(a *Agent, path string, env []string, cwd string) *shell {
	sh := &shell{a: a, path: path, bash: strings.HasSuffix(path, "bash"), env: env, cwd: cwd,
		outQ: fifo{path: outPath}, errQ: fifo{path: errPath}}
	sh.snapCwd, sh.snapEnv = cwd, env
	return sh
}

// setEnv replaces the environment the shell starts with, before its first
// start. The caller holds the shell's turn.
func (sh *shell) setEnv(env []string) {
	if sh.started || sh.proc != nil {
		return
	}
	sh.env = env
	sh.lastState.Lock()
	sh.snapEnv = env
	sh.lastState.Unlock()
}

// enqueue takes a place in the queue. It does not block, so the caller can
// run on the connection's read loop and keep arrival order.
func (sh *shell) enqueue() *turn {
	t := &turn{ready: make(chan struct{})}
	sh.qmu.Lock()
	defer sh.qmu.Unlock()
	if !sh.busy {
		sh.busy = true
		close(t.ready)
	} else {
		sh.queue = append(sh.queue, t)
	}
	return t
}

func (sh *shell) acquire(ctx context.Context, t *turn) error {
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
	}
	sh.qmu.Lock()
	select {
	case <-t.ready:
		sh.qmu.Unlock()
		sh.release()
	default:
		t.canceled = true
		sh.qmu.Unlock()
	}
	return ctx.Err()
}

func (sh *shell) release() {
	sh.qmu.Lock()
	defer sh.qmu.Unlock()
	for len(sh.queue) > 0 {
		t := sh.queue[0]
		sh.queue = sh.queue[1:]
		if !t.canceled {
			close(t.ready)
			return
		}
	}
	sh.busy = false
}

// snapshot returns the shell's last known cwd and exported environment, for
// argv calls, which run concurrently with the shell.
func (sh *shell) snapshot() (string, []string) {
	sh.lastState.Lock()
	defer sh.lastState.Unlock()
	return sh.snapCwd, sh.snapEnv
}

// name is the shell's $0, which its errors name (see nameFilter).
func (sh *shell) name() string {
	if sh.bash {
		return "bash"
	}
	return "sh"
}

func (sh *shell) fds() (tok, status int) {
	if sh.bash {
		return 248, 249
	}
	return 8, 9
}

// start launches a shell in the last known cwd and environment.
//
// Preconditions: the caller holds the turn.
func (sh *shell) start() error {
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", runDir, err)
	}
	sh.own(runDir)
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer tokR.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		tokW.Close()
		return err
	}
	defer stW.Close()
	bgR, bgW, err := os.Pipe()
	if err != nil {
		tokW.Close()
		stR.Close()
		return err
	}
	defer bgW.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		tokW.Close()
		stR.Close()
		bgR.Close()
		return err
	}
	defer null.Close()

	tokFD, stFD := sh.fds()
	files := make([]uintptr, stFD+1)
	for i := range files {
		files[i] = ^uintptr(0)
	}
	files[0], files[1], files[2] = null.Fd(), bgW.Fd(), bgW.Fd()
	files[tokFD], files[stFD] = tokR.Fd(), stW.Fd()

	driver, argv0 := bashDriver, "bash"
	if !sh.bash {
		driver, argv0 = shDriver, "sh"
	}
	env := slices.DeleteFunc(slices.Clone(sh.env), func(kv string) bool {
		return strings.HasPrefix(kv, "SHLVL=") || strings.HasPrefix(kv, "_=") || strings.HasPrefix(kv, "PWD=")
	})
	env = append(env, "PWD="+sh.cwd)
	dir := sh.cwd
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = "/"
	}
	args := []string{sh.path, "-c", driver, argv0}
	if sh.bash {
		args = []string{sh.path, "--noprofile", "--norc", "-c", driver, argv0}
	}
	pid, exit, err := sh.a.spawner.start(&spawnReq{argv: args, env: env, dir: dir, files: files, setsid: true})
	if err != nil {
		tokW.Close()
		stR.Close()
		bgR.Close()
		return err
	}
	args[0] = argv0
	p := &shellProc{pid: pid, exit: exit, tok: tokW, events: make(chan shellEvent, 4)}
	go readStatus(stR, p.events)
	go sh.a.bg.drain(bgR)
	// The driver reports once before its first token: that is "ready".
	select {
	case ev := <-p.events:
		if ev.kind != evEnded {
			ws := p.reap()
			tokW.Close()
			return fmt.Errorf("session shell %s exited at start (status %d)", sh.path, waitCode(ws))
		}
		sh.record(pid, ev)
	case <-time.After(30 * time.Second):
		unix.Kill(pid, unix.SIGKILL)
		tokW.Close()
		return errors.New("session shell did not start within 30s")
	}
	sh.proc = p
	sh.started = true
	return nil
}

// record keeps the shell's state after a command: the exported environment
// it printed and its working directory.
func (sh *shell) record(pid int, ev shellEvent) {
	if envBlob := ev.env; ev.envSize == 0 && !slicesEqual(envBlob, sh.envBlob) {
		sh.envBlob = envBlob
		sh.env = parseExports(envBlob)
	}
	if cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); err == nil && !strings.HasSuffix(cwd, " (deleted)") {
		sh.cwd = cwd
	}
	sh.lastState.Lock()
	sh.snapCwd, sh.snapEnv = sh.cwd, sh.env
	sh.lastState.Unlock()
}

// readCapped reads up to and without the next NUL. Past max bytes it reads
// on to the NUL without keeping anything and returns nil and the size.
func readCapped(br *bufio.Reader, max int) ([]byte, int64, error) {
	var out []byte
	var size int64
	for {
		chunk, err := br.ReadSlice(0)
		size += int64(len(chunk))
		if size <= int64(max)+1 {
			out = append(out, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, size, err
		}
		if size > int64(max)+1 {
			return nil, size - 1, nil
		}
		return out[:len(out)-1], size - 1, nil
	}
}

func slicesEqual(a, b []byte) bool { return string(a) == string(b) }

func readStatus(f *os.File, events chan<- shellEvent) {
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		b, err := br.ReadByte()
		if err != nil {
			events <- shellEvent{kind: evGone}
			return
		}
		switch b {
		case evStarted:
			seq, err := br.ReadString(0)
			if err != nil {
				events <- shellEvent{kind: evGone}
				return
			}
			events <- shellEvent{kind: evStarted, seq: strings.TrimSuffix(seq, "\x00")}
		case evEnded:
			st, _, err1 := readCapped(br, 64)
			env, size, err2 := readCapped(br, maxEnvReport)
			if err1 != nil || err2 != nil {
				events <- shellEvent{kind: evGone}
				return
			}
			ev := shellEvent{kind: evEnded, env: env}
			if env == nil {
				ev.envSize = size
			}
			seq, code, _ := strings.Cut(string(st), " ")
			ev.seq = seq
			ev.status, _ = strconv.Atoi(code)
			events <- ev
		}
	}
}

// stop kills the shell and waits for it.
func (sh *shell) stop() {
	if sh.proc == nil {
		return
	}
	unix.Kill(sh.proc.pid, unix.SIGKILL)
	<-sh.proc.exit
	sh.proc.tok.Close()
	sh.proc = nil
}

// fifo is the agent's read end of one of the shell's output FIFOs. It is
// kept from one command to the next, which saves opening, registering and
// closing it each time, as long as its path still names it (sandboxed code
// may remove or replace what is in /run/warren) and no background process
// holds its write end.
type fifo struct {
	path     string
	f        *os.File
	dev, ino uint64
}

// get returns the read end for the next command. held means the previous
// read end went to the background log (handOff): a new FIFO replaces it.
// own hands a newly made FIFO to the session's user.
func (q *fifo) get(held bool, own func(string)) (*os.File, error) {
	if q.f != nil && !held {
		var st unix.Stat_t
		if unix.Lstat(q.path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO && st.Dev == q.dev && st.Ino == q.ino {
			return q.f, nil
		}
		q.close()
	}
	f, st, err := openFifo(q.path, held)
	if err != nil {
		return nil, err
	}
	q.f, q.dev, q.ino = f, st.Dev, st.Ino
	own(q.path)
	return f, nil
}

// handOff forgets the read end, which now belongs to the background log.
func (q *fifo) handOff() { q.f = nil }

func (q *fifo) close() {
	if q.f != nil {
		q.f.Close()
		q.f = nil
	}
}

// openFifo opens the read end of an output FIFO without blocking, replacing
// it first when a background process still holds the old one, or when
// sandboxed code replaced it with something else.
func openFifo(path string, replace bool) (*os.File, unix.Stat_t, error) {
	if replace {
		unix.Unlink(path)
	}
	for attempt := 0; ; attempt++ {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		var st unix.Stat_t
		if err == nil {
			if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
				return os.NewFile(uintptr(fd), path), st, nil
			}
			unix.Close(fd)
			err = unix.EEXIST
		}
		if attempt > 1 {
			return nil, st, fmt.Errorf("open %s: %w", path, err)
		}
		if !errors.Is(err, unix.ENOENT) {
			unix.Unlink(path)
		}
		_ = os.MkdirAll(runDir, 0o700) // Mkfifo below reports why if it is still missing
		if err := unix.Mkfifo(path, 0o600); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, unix.Stat_t{}, fmt.Errorf("create %s: %w", path, err)
		}
	}
}

// own hands the driver's files to the session's user when that user is not
// root: the shell runs as that user and must open them.
func (sh *shell) own(path string) {
	if o := sh.a.owner; o != nil {
		// If this fails, the shell's open of the file fails with the reason.
		_ = os.Lchown(path, int(o.uid), int(o.gid))
	}
}

// writeCommand stores the command text for the driver.
func writeCommand(text string) error {
	for attempt := 0; ; attempt++ {
		fd, err := unix.Open(cmdPath, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			_, err = unix.Write(fd, []byte(text))
			unix.Close(fd)
			return err
		}
		if attempt > 0 {
			return fmt.Errorf("write %s: %w", cmdPath, err)
		}
		unix.Unlink(cmdPath)
		_ = os.MkdirAll(runDir, 0o700) // the next Open reports why if it is still missing
	}
}

// commandText is what the driver evaluates. With a per-call cwd or env the
// command runs in a subshell scoped to that call, so it changes no state.
func (sh *shell) commandText(req *agentproto.ExecRequest) string {
	if req.Cwd == "" && len(req.Env) == 0 {
		return req.Command
	}
	kw := "builtin "
	if !sh.bash {
		kw = ""
	}
	var b strings.Builder
	b.WriteString("(")
	if req.Cwd != "" {
		fmt.Fprintf(&b, " %scd -- %s || exit;", kw, shellQuote(req.Cwd))
	}
	names := make([]string, 0, len(req.Env))
	for k := range req.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(&b, " export %s=%s;", k, shellQuote(req.Env[k]))
	}
	if sh.bash {
		fmt.Fprintf(&b, " builtin eval %s\n)", shellQuote(req.Command))
	} else {
		fmt.Fprintf(&b, " eval %s\n)", shellQuote(req.Command))
	}
	return b.String()
}

// run executes one command in the shell.
//
// Preconditions: the caller holds the turn.
func (sh *shell) run(ctx context.Context, req *agentproto.ExecRequest, stdin io.Reader, out *output) (agentproto.ExecResult, error) {
	var res agentproto.ExecResult
	begin := time.Now()
	if sh.proc == nil {
		restart := sh.started
		if err := sh.start(); err != nil {
			return res, errdefs.New(errdefs.ErrUnavailable, "session shell: %v", err)
		}
		res.ShellRestarted = restart
	}
	if err := writeCommand(sh.commandText(req)); err != nil {
		return res, err
	}
	sh.own(cmdPath)
	outF, err := sh.outQ.get(sh.outHeld, sh.own)
	if err != nil {
		return res, err
	}
	errF, err := sh.errQ.get(sh.errHeld, sh.own)
	if err != nil {
		sh.outQ.close()
		return res, err
	}
	sh.outHeld, sh.errHeld = false, false
	var inF *os.File
	// A random tag per command: a report for this command must carry it,
	// so code inside the session cannot forge the result of a command it
	// did not see the token of.
	var nonce [8]byte
	rand.Read(nonce[:])
	seq := hex.EncodeToString(nonce[:])
	flag := "n"
	if stdin != nil {
		unix.Unlink(inPath)
		if err := unix.Mkfifo(inPath, 0o600); err != nil {
			sh.outQ.close()
			sh.errQ.close()
			return res, fmt.Errorf("create %s: %w", inPath, err)
		}
		sh.own(inPath)
		// Read-write, so the shell's open does not wait for a writer and
		// the FIFO keeps its bytes until the shell has it open.
		fd, err := unix.Open(inPath, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			sh.outQ.close()
			sh.errQ.close()
			return res, fmt.Errorf("open %s: %w", inPath, err)
		}
		inF = os.NewFile(uintptr(fd), inPath)
		flag = "i"
	}
	token := seq + " " + flag + "\n"
	if len(token) != tokenLen {
		panic("warren agent: a token of " + strconv.Itoa(len(token)) + " bytes")
	}
	since := lastPid()
	p := sh.proc
	if _, err := p.tok.Write([]byte(token)); err != nil {
		// The shell died while idle. Start a new one and try once more.
		sh.outQ.close()
		sh.errQ.close()
		if inF != nil {
			inF.Close()
		}
		sh.stop()
		if !res.ShellRestarted {
			res2, err := sh.run(ctx, req, stdin, out)
			res2.ShellRestarted = true
			return res2, err
		}
		return res, errdefs.New(errdefs.ErrUnavailable, "session shell is not accepting commands")
	}

	var cols []*collector
	var stdinDone chan struct{}
	var closeIn sync.Once
	timeout := time.NewTimer(req.Timeout)
	defer timeout.Stop()
	var abort *time.Ticker // while aborting: re-signal and re-kill
	var abortC <-chan time.Time
	var giveUp <-chan time.Time
	done := ctx.Done()
	gone := false
	var envSize int64
	startAbort := func() {
		if abort != nil {
			return
		}
		unix.Kill(p.pid, abortSignal)
		killStarted(sh.a.reaper, p.pid, since, false)
		abort = time.NewTicker(20 * time.Millisecond)
		abortC = abort.C
		giveUp = time.After(abortGrace)
	}
	defer func() {
		if abort != nil {
			abort.Stop()
		}
	}()
loop:
	for {
		select {
		case ev := <-p.events:
			if ev.kind != evGone && ev.seq != seq {
				continue // a stale report
			}
			switch ev.kind {
			case evStarted:
				ec := &collector{f: errF, ch: agentproto.ChanStderr, out: out, done: make(chan struct{}), filter: &nameFilter{repl: sh.name() + ": "}}
				go ec.run()
				cols = append(cols, collect(outF, agentproto.ChanStdout, out), ec)
				if inF != nil {
					stdinDone = make(chan struct{})
					go func() {
						defer close(stdinDone)
						_, _ = io.Copy(inF, stdin) // the command sees EOF either way
						closeIn.Do(func() { inF.Close() })
					}()
				}
			case evEnded:
				res.ExitCode = ev.status
				sh.record(p.pid, ev)
				envSize = ev.envSize
				break loop
			case evGone:
				res.ExitCode = waitCode(p.reap())
				gone = true
				break loop
			}
		case <-timeout.C:
			res.TimedOut = true
			startAbort()
		case <-done:
			done = nil
			startAbort()
		case <-abortC:
			unix.Kill(p.pid, abortSignal)
			killStarted(sh.a.reaper, p.pid, since, false)
		case <-giveUp:
			// The shell did not unwind (its own trap for the signal, or
			// wedged): it goes too, and is restarted with its state.
			abortC, giveUp = nil, nil
			killStarted(sh.a.reaper, p.pid, since, true)
		}
	}
	if res.TimedOut && !gone {
		res.ExitCode = 124
	}
	if inF != nil {
		closeIn.Do(func() { inF.Close() })
		if stdinDone != nil {
			<-stdinDone
		}
	}
	if len(cols) == 2 {
		// A FIFO a background process still writes to goes to the
		// background log; one that reached its end is kept for the next
		// command.
		if cols[0].finish() {
			sh.outHeld = true
			sh.outQ.handOff()
			go sh.a.bg.drain(outF)
		}
		if cols[1].finish() {
			sh.errHeld = true
			sh.errQ.handOff()
			go sh.a.bg.drain(errF)
		}
	} else {
		sh.outQ.close()
		sh.errQ.close()
	}
	if envSize > 0 {
		out.write(agentproto.ChanStderr, []byte(fmt.Sprintf("warren: the exported environment is %d bytes, more than the %d this session keeps; the shell keeps its variables, but argv calls and a restarted shell get the environment from before\n", envSize, maxEnvReport)))
	}
	if gone {
		p.tok.Close()
		sh.proc = nil
		res.ShellRestarted = true
	}
	res.Duration = time.Since(begin)
	res.Cwd = sh.cwd
	return res, nil
}

// waitCode is the exit code a shell would report for a wait status.
func waitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
