package escape

import (
	"fmt"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
)

// TestSigqueueToAgent: sigqueue(2) sends a signal with si_code SI_QUEUE,
// which the Go runtime takes for a fault of its own (a SIGSEGV it did not
// cause becomes a nil-pointer panic and the agent dies). Every signal a
// sandboxed process can queue to PID 1 must leave the agent serving.
func TestSigqueueToAgent(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "sigq", nil)
	b.needPython(t)
	before := b.out(t, "cut -d' ' -f22 /proc/1/stat")
	// The audit's signals first, one exec each, then every signal.
	named := []struct {
		name string
		sig  int
	}{{"SIGILL", 4}, {"SIGTRAP", 5}, {"SIGBUS", 7}, {"SIGFPE", 8}, {"SIGSEGV", 11}, {"SIGSTKFLT", 16}, {"SIGSYS", 31}}
	for _, s := range named {
		// The audit's exact one-liner, and a non-null value.
		for _, val := range []string{"ctypes.c_void_p(0)", "ctypes.c_void_p(0x1000)"} {
			got := b.pyKV(t, fmt.Sprintf(`
r = libc.sigqueue(1, %d, %s)
out("sent", "OK" if r == 0 else ename(ctypes.get_errno()))
time.sleep(0.05)
`, s.sig, val))
			if got["sent"] != "OK" {
				t.Logf("sigqueue(1, %s): %s", s.name, got["sent"])
			}
			b.alive(t, "sigqueue(1, "+s.name+", "+val+")")
		}
	}
	res := b.exec(t, &api.ExecRequest{Argv: []string{"python3", "-c", pyPrelude + `
for r in range(5):
    for s in range(1, 65):
        if s in (9, 19): continue
        libc.sigqueue(1, s, ctypes.c_void_p(0))
print("sent")
`}})
	if strings.TrimSpace(res.Stdout) != "sent" {
		t.Errorf("queueing every signal to PID 1: %+v", res)
	}
	b.alive(t, "every signal queued to PID 1")
	if after := b.out(t, "cut -d' ' -f22 /proc/1/stat"); after != before {
		t.Errorf("PID 1 changed after the queued signals: start time %q, now %q", before, after)
	}
	if s, err := h.Client.GetSession(bg, b.id); err != nil || s.State != "running" {
		t.Errorf("the session after the queued signals: %+v, %v", s, err)
	}
}

// TestHugeEnvironment: the shell reports its exported environment after
// every command; a 75 MB variable must not make the agent buffer it until
// the session's memory limit takes the agent. The report is dropped past
// its cap (the shell keeps the variable; argv calls and a restarted shell
// keep the last environment within the cap) and the call says so on
// stderr.
func TestHugeEnvironment(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "bigenv", nil)
	b.out(t, "export SMALL=before")
	res := b.sh(t, "export BIG=$(printf '%075000000d' 0); echo set")
	if res.ExitCode != 0 || res.Stdout != "set\n" {
		t.Fatalf("export of a 75 MB variable: %+v", res)
	}
	if !strings.Contains(res.Stderr, "warren: the exported environment") {
		t.Errorf("the call that made the environment too large says nothing about it: stderr %q", short(res.Stderr))
	}
	b.alive(t, "a 75 MB environment")
	// The shell itself keeps the variable.
	if got := b.out(t, "echo ${#BIG}"); got != "75000000\n" {
		t.Errorf("${#BIG} in the shell = %q", got)
	}
	// An argv call gets the last environment within the cap.
	argv := b.exec(t, &api.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo ${SMALL:-unset} ${#BIG}"}})
	if argv.ExitCode != 0 || argv.Stdout != "before 0\n" {
		t.Errorf("argv call after the huge export: %+v", argv)
	}
	// Unset, and the reports flow again.
	b.out(t, "unset BIG; export SMALL=after")
	argv = b.exec(t, &api.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo ${SMALL:-unset}"}})
	if argv.Stdout != "after\n" {
		t.Errorf("argv call after unset: %+v", argv)
	}
	if s, err := h.Client.GetSession(bg, b.id); err != nil || s.State != "running" {
		t.Errorf("the session after a 75 MB environment: %+v, %v", s, err)
	}
}

// TestAgentOOMScore: sandboxed root can raise PID 1's oom_score_adj (the
// kernel lets the owner of a process's /proc files raise it, and the
// agent's belong to the sandbox's root; see SECURITY.md). It must not
// matter: a memory bomb is killed inside the workload cgroup, which the
// agent is not in, so the agent is never the victim of the session's own
// OOM.
func TestAgentOOMScore(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "oomadj", &api.CreateSessionRequest{Limits: &api.Limits{MemoryMB: 64}})
	pid1 := b.out(t, "cut -d' ' -f22 /proc/1/stat")
	res := b.sh(t, "echo 1000 > /proc/1/oom_score_adj; echo $?; cat /proc/1/oom_score_adj")
	t.Logf("raising PID 1's oom_score_adj from inside: %q %q", res.Stdout, res.Stderr)
	bomb := b.exec(t, &api.ExecRequest{Command: "tail /dev/zero", TimeoutMs: 60_000})
	if !bomb.OOMKilled {
		t.Errorf("memory bomb: %+v, want oom_killed", bomb)
	}
	b.alive(t, "a memory bomb with PID 1's oom_score_adj at 1000")
	if got := b.out(t, "cut -d' ' -f22 /proc/1/stat"); got != pid1 {
		t.Errorf("the agent (PID 1) was replaced: start %q -> %q", pid1, got)
	}
}
