package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentproto"
)

func TestShellStatePersists(t *testing.T) {
	sb := newEnv(t).start()
	steps := []struct{ cmd, want string }{
		{"cd /tmp && export A=1 && B=2 && echo hi", "hi\n"},
		{"pwd; echo $A $B", "/tmp\n1 2\n"},
		{"greet() { echo hello $1; }; alias ll='echo aliased'", ""},
		{"greet world; ll", "hello world\naliased\n"},
		{"printf 'export SOURCED=yes\\nPLAIN=p\\n' > /tmp/env.sh && source /tmp/env.sh", ""},
		{"echo $SOURCED $PLAIN; env | grep -c '^SOURCED=yes$'", "yes p\n1\n"},
		{"false", ""},
		{"echo prev=$?", "prev=1\n"},
	}
	for _, s := range steps {
		res := sh(t, sb, s.cmd)
		if string(res.Stdout) != s.want {
			t.Errorf("Exec(%q) stdout = %q, want %q (stderr %q)", s.cmd, res.Stdout, s.want, res.Stderr)
		}
	}
}

func TestShellErrorsKeepState(t *testing.T) {
	sb := newEnv(t).start()
	mustOut(t, sb, "cd /var && export KEEP=1", "")
	for _, cmd := range []string{`echo "unbalanced`, "if then fi", "echo 'x", "((("} {
		res := sh(t, sb, cmd)
		if res.ExitCode != 2 || res.ShellRestarted {
			t.Errorf("Exec(%q) = exit %d restarted %v, want exit 2 from the shell itself", cmd, res.ExitCode, res.ShellRestarted)
		}
		if !strings.Contains(string(res.Stderr), "syntax error") && !strings.Contains(string(res.Stderr), "unexpected EOF") {
			t.Errorf("Exec(%q) stderr = %q, want the shell's syntax error", cmd, res.Stderr)
		}
	}
	mustOut(t, sb, "pwd; echo $KEEP", "/var\n1\n")
}

func TestExitRestartsShellWithState(t *testing.T) {
	sb := newEnv(t).start()
	mustOut(t, sb, "cd /opt && export KEEP=kept", "")
	for _, tc := range []struct {
		cmd  string
		code int
	}{{"exit 3", 3}, {"echo bye; exit 7", 7}, {"exec true", 0}, {"kill -9 $$", 137}} {
		res := sh(t, sb, tc.cmd)
		if res.ExitCode != tc.code || !res.ShellRestarted {
			t.Errorf("Exec(%q) = exit %d restarted %v, want %d and a restarted shell", tc.cmd, res.ExitCode, res.ShellRestarted, tc.code)
		}
		mustOut(t, sb, "pwd; echo $KEEP", "/opt\nkept\n")
	}
}

// TestDriverDescriptorsClosed: sandboxed code that closes the shell's saved
// copies of the driver's descriptors cannot wedge the session.
func TestDriverDescriptorsClosed(t *testing.T) {
	sb := newEnv(t).start()
	mustOut(t, sb, "cd /srv && export KEEP=1", "")
	res := sh(t, sb, "for fd in $(ls /proc/$$/fd); do [ $fd -gt 2 ] && eval \"exec $fd>&-\"; done; echo closed", timeout(5*time.Second))
	if !res.ShellRestarted {
		t.Logf("closing the driver's descriptors: %+v", res)
	}
	mustOut(t, sb, "pwd; echo $KEEP", "/srv\n1\n")
}

func TestBreakAndContinueAtTopLevel(t *testing.T) {
	sb := newEnv(t).start()
	for _, cmd := range []string{"break", "continue", "break 2", "return 4"} {
		sh(t, sb, cmd) // must answer, whatever the status
		mustOut(t, sb, "echo alive", "alive\n")
	}
}

func TestConcurrentCallsGetTheirOwnOutput(t *testing.T) {
	sb := newEnv(t).start()
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf("for j in 1 2 3; do echo call-%d-$j; done; echo err-%d >&2", i, i)
			res, err := sb.Exec(context.Background(), &agentproto.ExecRequest{Command: cmd, Timeout: 20 * time.Second, MaxOutput: 1 << 20}, nil, nil)
			if err != nil {
				errs <- err.Error()
				return
			}
			want := fmt.Sprintf("call-%d-1\ncall-%d-2\ncall-%d-3\n", i, i, i)
			if string(res.Stdout) != want || string(res.Stderr) != fmt.Sprintf("err-%d\n", i) {
				errs <- fmt.Sprintf("call %d got stdout %q stderr %q", i, res.Stdout, res.Stderr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestBackgroundProcesses(t *testing.T) {
	sb := newEnv(t).start()
	start := time.Now()
	res := sh(t, sb, "sleep 300 & echo started")
	if took := time.Since(start); took > 2*time.Second || string(res.Stdout) != "started\n" {
		t.Fatalf("sleep 300 & took %v, stdout %q; want it to return at once", took, res.Stdout)
	}
	mustOut(t, sb, "pgrep -x sleep >/dev/null && echo running", "running\n")

	// A chatty background process: later results stay clean and it is not
	// killed by SIGPIPE.
	mustOut(t, sb, `printf '%s\n' "trap 'echo SIGPIPE >/tmp/pipe; exit 1' PIPE" 'while :; do echo noise; echo noise >&2; sleep 0.01; done' >/tmp/chatty.sh`, "")
	// What it writes while its own command still runs may show in that
	// command's output, as on a terminal; nothing may reach later calls.
	res = sh(t, sb, "bash /tmp/chatty.sh & echo launched")
	if !strings.Contains(string(res.Stdout), "launched\n") {
		t.Errorf("launch of a chatty background process: stdout %q", res.Stdout)
	}
	for i := range 5 {
		mustOut(t, sb, "echo clean-"+strconv.Itoa(i), "clean-"+strconv.Itoa(i)+"\n")
		time.Sleep(50 * time.Millisecond)
	}
	mustOut(t, sb, "pgrep -f chatty.sh >/dev/null && echo alive; test -e /tmp/pipe && echo got-sigpipe; true", "alive\n")
}

func TestTimeoutKillsCommandAndChildren(t *testing.T) {
	sb := newEnv(t).start()
	mustOut(t, sb, "cd /tmp && export KEEP=1; sleep 1000 &", "")
	res := sh(t, sb, "sleep 200 & sleep 201 | cat; echo never", timeout(300*time.Millisecond))
	if !res.TimedOut || res.ExitCode != 124 || res.ShellRestarted || strings.Contains(string(res.Stdout), "never") {
		t.Errorf("timed-out command: timed_out %v exit %d restarted %v stdout %q", res.TimedOut, res.ExitCode, res.ShellRestarted, res.Stdout)
	}
	mustOut(t, sb, "pgrep -x 'sleep' -a | awk '{print $3}' | sort | tr '\\n' ' '", "1000 ")
	mustOut(t, sb, "pwd; echo $KEEP", "/tmp\n1\n")

	// Loops, functions and command substitutions are unwound too, and the
	// shell keeps its functions and unexported variables.
	mustOut(t, sb, "f() { while :; do sleep 0.1; done; echo never-f; }; g() { f; echo never-g; }; PLAIN=p", "")
	for _, cmd := range []string{"while :; do :; done; echo never", "f; echo never", "g; echo never", "x=$(sleep 100); echo never", "for i in 1 2; do g; done; echo never", "sleep 100 | cat; echo never"} {
		res = sh(t, sb, cmd, timeout(300*time.Millisecond))
		if !res.TimedOut || res.ShellRestarted || strings.Contains(string(res.Stdout), "never") {
			t.Errorf("Exec(%q): timed_out %v shell_restarted %v stdout %q", cmd, res.TimedOut, res.ShellRestarted, res.Stdout)
		}
	}
	mustOut(t, sb, "pwd; echo $KEEP $PLAIN; type -t f; shopt -q extdebug || echo no-extdebug; trap -p DEBUG", "/tmp\n1 p\nfunction\nno-extdebug\n")
	// A late abort signal, after the command ended, changes nothing.
	mustOut(t, sb, "(sleep 0.2; kill -USR2 $$) & echo launched", "launched\n")
	time.Sleep(500 * time.Millisecond)
	mustOut(t, sb, "echo next; echo $PLAIN", "next\np\n")
	mustOut(t, sb, "pgrep -x sleep -a | awk '{print $3}'", "1000\n")
	// A command that traps the abort itself is cut off with its shell,
	// which restarts with cwd and exported variables.
	res = sh(t, sb, "trap '' USR2; while :; do :; done", timeout(300*time.Millisecond))
	if !res.TimedOut || !res.ShellRestarted {
		t.Errorf("trapped abort: timed_out %v shell_restarted %v, want both", res.TimedOut, res.ShellRestarted)
	}
	mustOut(t, sb, "pwd; echo $KEEP", "/tmp\n1\n")
}

func TestOutputCapAndBinary(t *testing.T) {
	sb := newEnv(t).start()
	res := sh(t, sb, "head -c 100000 /dev/zero; echo done >&2", maxOutput(1000))
	if len(res.Stdout) != 1000 || !res.Truncated || string(res.Stderr) != "done\n" {
		t.Errorf("capped output: %d bytes, truncated %v, stderr %q", len(res.Stdout), res.Truncated, res.Stderr)
	}
	res = sh(t, sb, `printf '\x00\xff\xfe\n'`)
	if !bytes.Equal(res.Stdout, []byte{0, 0xff, 0xfe, '\n'}) {
		t.Errorf("binary output = %q", res.Stdout)
	}
	big := sh(t, sb, "head -c 3000000 /dev/urandom | base64 -w0", maxOutput(8<<20))
	if len(big.Stdout) != 4000000 {
		t.Errorf("large output = %d bytes, want 4000000", len(big.Stdout))
	}
}

func TestStdin(t *testing.T) {
	sb := newEnv(t).start()
	in := []byte("line one\nline two\n")
	res, err := sb.Exec(context.Background(), &agentproto.ExecRequest{Command: "wc -l; read -r x </dev/null; echo end", Timeout: 10 * time.Second, MaxOutput: 1 << 20}, in, nil)
	if err != nil || string(res.Stdout) != "2\nend\n" {
		t.Errorf("stdin via shell: %v %q", err, res.Stdout)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 200000) // 3.2 MB: streamed
	res, err = sb.Exec(context.Background(), &agentproto.ExecRequest{Argv: []string{"wc", "-c"}, Timeout: 10 * time.Second, MaxOutput: 1 << 20}, big, nil)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(len(big)) {
		t.Errorf("streamed stdin via argv: %v %q", err, res.Stdout)
	}
	// Without stdin a command reading it sees EOF at once.
	mustOut(t, sb, "cat; echo eof", "eof\n")
}

func TestArgvMode(t *testing.T) {
	sb := newEnv(t).start()
	mustOut(t, sb, "cd /etc && export FROM_SHELL=1", "")
	res := argv(t, sb, "sh", "-c", "pwd; echo $FROM_SHELL; exit 5")
	if res.ExitCode != 5 || string(res.Stdout) != "/etc\n1\n" {
		t.Errorf("argv: exit %d stdout %q", res.ExitCode, res.Stdout)
	}
	res = argv(t, sb, "no-such-program")
	if res.ExitCode != 127 {
		t.Errorf("missing program: exit %d, want 127", res.ExitCode)
	}
	res = argv(t, sb, "sh", "-c", "kill -TERM $$")
	if res.ExitCode != 143 || res.Signal != 15 {
		t.Errorf("signaled: exit %d signal %d, want 143 and 15", res.ExitCode, res.Signal)
	}
	// argv calls do not wait for the shell.
	done := make(chan struct{})
	go func() {
		sh(t, sb, "sleep 2")
		close(done)
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	argv(t, sb, "true")
	if took := time.Since(start); took > time.Second {
		t.Errorf("argv waited %v for the busy shell", took)
	}
	<-done
	// Per-call env and cwd do not change the session.
	res, err := sb.Exec(context.Background(), &agentproto.ExecRequest{Command: "cd /; echo $X; pwd", Env: map[string]string{"X": "scoped"}, Cwd: "/usr", Timeout: 5 * time.Second, MaxOutput: 1 << 20}, nil, nil)
	if err != nil || string(res.Stdout) != "scoped\n/\n" {
		t.Errorf("scoped call: %v %q", err, res.Stdout)
	}
	mustOut(t, sb, "pwd; echo x$X", "/etc\nx\n")
}

// TestAgentEnvironmentStaysOut: the agent runs with an environment of its
// own (GOMAXPROCS=1); sandboxed processes get the session's, never that.
func TestAgentEnvironmentStaysOut(t *testing.T) {
	sb := newEnv(t).start()
	if got := sh(t, sb, "env | grep -c '^GOMAXPROCS=' || true").Stdout; string(got) != "0\n" {
		t.Errorf("shell sees the agent's environment: %q", got)
	}
	if got := argv(t, sb, "sh", "-c", "env | grep -c '^GOMAXPROCS=' || true").Stdout; string(got) != "0\n" {
		t.Errorf("argv process sees the agent's environment: %q", got)
	}
}

// TestDriverFilesReplaced: the agent keeps the output FIFOs' read ends
// from one command to the next; code in the session that removes or
// replaces them (it runs as root there) must not cost a later command its
// output.
func TestDriverFilesReplaced(t *testing.T) {
	sb := newEnv(t).start()
	mustOut(t, sb, "echo one", "one\n")
	for _, tamper := range []string{
		"rm -f /run/warren/out /run/warren/err",
		"rm -f /run/warren/out && touch /run/warren/out",
		"rm -f /run/warren/err && mkfifo /run/warren/err",
		"rm -rf /run/warren",
	} {
		sh(t, sb, tamper)
		res := sh(t, sb, "echo out; echo err >&2")
		if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
			t.Errorf("after %q: stdout %q stderr %q, want out and err", tamper, res.Stdout, res.Stderr)
		}
	}
}
