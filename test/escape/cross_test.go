package escape

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSessionsIsolatedFromEachOther: a second session cannot see, signal,
// or share files, IPC or sockets with the first.
func TestSessionsIsolatedFromEachOther(t *testing.T) {
	h := startDaemon(t, nil)
	a := newBox(t, h, "victim", nil)
	b := newBox(t, h, "attacker", nil)
	b.needPython(t)
	a.needPython(t)

	// The victim: 30 sleepers (so its pid numbers run past the
	// attacker's), secrets in files, a SysV shm segment, an abstract Unix
	// socket and a TCP listener.
	a.out(t, `for i in $(seq 30); do sleep 1000 & done
echo victim-secret > /tmp/secret; echo victim-secret > /workspace/secret`)
	victim := pyPrelude + `
import socket, time
libc.shmget(0x5761726e, 4096, 0o1666)
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.bind("\0warren-victim"); u.listen(1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 9999)); s.listen(1)
open("/tmp/listening", "w").write("yes")
time.sleep(1000)
`
	if _, err := h.Client.WriteFile(bg, a.id, "/tmp/victim.py", strings.NewReader(victim), 0); err != nil {
		t.Fatal(err)
	}
	a.out(t, "nohup python3 /tmp/victim.py >/tmp/victim.log 2>&1 &")
	if eventually(10*time.Second, func() string {
		if a.sh(t, "test -e /tmp/listening").ExitCode != 0 {
			return "not yet"
		}
		return ""
	}) != "" {
		t.Fatal("the victim's listener did not start")
	}
	victimPids := strings.Fields(a.out(t, "ls /proc | grep -E '^[0-9]+$'"))
	attackerPids := map[string]bool{}
	for _, p := range strings.Fields(b.out(t, "ls /proc | grep -E '^[0-9]+$'")) {
		attackerPids[p] = true
	}

	t.Run("processes invisible", func(t *testing.T) {
		if res := b.sh(t, "ps -e -o comm= 2>/dev/null || cat /proc/[0-9]*/comm"); strings.Contains(res.Stdout, "sleep") {
			t.Errorf("the attacker sees the victim's sleepers: %q", res.Stdout)
		}
		if len(attackerPids) > 6 {
			t.Errorf("the attacker sees %d processes, want only its own few: %v", len(attackerPids), attackerPids)
		}
	})

	t.Run("signals by the victim's pids", func(t *testing.T) {
		var targets []int
		for _, p := range victimPids {
			if !attackerPids[p] {
				n, _ := strconv.Atoi(p)
				targets = append(targets, n)
			}
		}
		if len(targets) < 30 {
			t.Fatalf("only %d of the victim's pids are free in the attacker's namespace", len(targets))
		}
		checkKills(t, b, targets, "the victim's pid")
	})

	t.Run("signals by the victim's host pids", func(t *testing.T) {
		hostPids := sleepersOnHost(t, h.Config.CgroupParent)
		if len(hostPids) < 30 {
			t.Fatalf("found %d of the victim's sleepers on the host, want 30", len(hostPids))
		}
		var targets []int
		for _, p := range hostPids {
			if !attackerPids[strconv.Itoa(p)] {
				targets = append(targets, p)
			}
		}
		checkKills(t, b, targets, "the victim's host pid")
	})

	if got := strings.TrimSpace(a.out(t, "pgrep -c -x sleep || ls /proc/[0-9]*/comm | xargs grep -lx sleep | wc -l")); got != "30" {
		t.Errorf("the victim has %s sleepers left, want 30", got)
	}

	t.Run("files", func(t *testing.T) {
		if res := b.sh(t, "cat /tmp/secret /workspace/secret 2>&1; ls /proc/*/root/tmp/secret 2>&1"); strings.Contains(res.Stdout, "victim-secret") || !strings.Contains(res.Stdout, "No such file") {
			t.Errorf("the attacker reads the victim's files: %q", res.Stdout)
		}
		for _, p := range []string{"/tmp/secret", "/workspace/secret", "secret"} {
			if got, err := readAPI(h, b.id, p); codeOf(err) != "not_found" {
				t.Errorf("ReadFile(%s) in the attacker's session: %q, %v; want not_found", p, got, err)
			}
		}
		b.out(t, "echo attacker > /tmp/mine")
		if res := a.sh(t, "test -e /tmp/mine; echo $?"); res.Stdout != "1\n" {
			t.Errorf("the attacker's file appeared in the victim's session")
		}
	})

	t.Run("IPC and sockets", func(t *testing.T) {
		got := b.pyKV(t, `
r = libc.shmget(0x5761726e, 0, 0)
out("shm", "OK" if r >= 0 else ename(ctypes.get_errno()))
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out("abstract", tryos(u.connect, "\0warren-victim"))
s = socket.socket(); s.settimeout(5)
out("tcp", tryos(s.connect, ("127.0.0.1", 9999)))
`)
		for k, want := range map[string]string{"shm": "ENOENT", "abstract": "ECONNREFUSED", "tcp": "ECONNREFUSED"} {
			if got[k] != want {
				t.Errorf("the attacker reaching the victim's %s: %q, want %s", k, got[k], want)
			}
		}
	})
	a.alive(t, "the attacker's attempts")
}

// checkKills has b send SIGKILL to each pid, expecting ESRCH for all.
func checkKills(t *testing.T, b *box, pids []int, what string) {
	t.Helper()
	var list []string
	for _, p := range pids {
		list = append(list, strconv.Itoa(p))
	}
	got := b.pyKV(t, fmt.Sprintf(`
res = {}
for p in [%s]:
    if os.path.exists("/proc/%%d" %% p): continue  # our own (this python, say)
    r = sc("kill", p, 0)
    if r == "OK": r = "OK-signal-0"
    elif r == "ESRCH": r = sc("kill", p, 9)
    res.setdefault(r, []).append(p)
for k, v in res.items(): out(k, *v)
`, strings.Join(list, ",")))
	if len(strings.Fields(got["ESRCH"])) < len(pids)-3 {
		t.Errorf("only %d of %d kills of %s answered ESRCH: %v", len(strings.Fields(got["ESRCH"])), len(pids), what, got)
	}
	for k, v := range got {
		if k != "ESRCH" {
			t.Errorf("kill of %s from the attacker: %s for pids %s, want ESRCH", what, k, v)
		}
	}
}

// sleepersOnHost finds the host pids of "sleep 1000" processes in the
// daemon's cgroups.
func sleepersOnHost(t *testing.T, cgroupParent string) []int {
	t.Helper()
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Equal(cmd, []byte("sleep\x001000\x00")) {
			continue
		}
		cg, err := os.ReadFile(d + "/cgroup")
		if err != nil || !bytes.Contains(cg, []byte(cgroupParent+"/")) {
			continue
		}
		n, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, n)
	}
	return pids
}
