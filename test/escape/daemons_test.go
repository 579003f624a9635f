package escape

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/testutil"
)

// hostBlock returns the first host uid of the session's id block, from its
// uid_map ("0 <host> <count>").
func (b *box) hostBlock(t testing.TB) (first, size uint64) {
	t.Helper()
	f := strings.Fields(b.out(t, "cat /proc/self/uid_map"))
	if len(f) != 3 || f[0] != "0" {
		t.Fatalf("uid_map of %s: %q", b.id, f)
	}
	first, err1 := strconv.ParseUint(f[1], 10, 32)
	size, err2 := strconv.ParseUint(f[2], 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("uid_map of %s: %q", b.id, f)
	}
	return first, size
}

// sandboxDirs returns the state directory and the writable layer of the
// sandbox whose id block starts at first: sandboxes are named apart from
// their sessions, and their ids.json records the block.
func sandboxDirs(t testing.TB, dataDir string, first uint64) (state, layer string) {
	t.Helper()
	recs, _ := filepath.Glob(filepath.Join(dataDir, "sessions", "*", "ids.json"))
	for _, r := range recs {
		b, err := os.ReadFile(r)
		if err != nil {
			continue
		}
		var ids struct {
			HostID uint64 `json:"host_id"`
		}
		if json.Unmarshal(b, &ids) == nil && ids.HostID == first {
			state = filepath.Dir(r)
			layer = filepath.Join(dataDir, "layers", filepath.Base(state))
			if _, err := os.Stat(filepath.Join(layer, "upper")); err != nil {
				layer = state
			}
			return state, layer
		}
	}
	t.Fatalf("no sandbox in %s has the id block %d", dataDir, first)
	return "", ""
}

// asHostUser runs a shell script on the host as uid and gid id: what a
// process that escaped a sandbox whose root is id can do. It returns the
// combined output and the exit code.
func asHostUser(t testing.TB, id uint32, script string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id, Gid: id, NoSetGroups: true}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestSecondDaemonGetsDisjointIDBlocks (issue 20, hole 4): two daemons on
// one host, with their own data directories and cgroup parents, used to
// hand out the same id blocks from the same base, so root of one daemon's
// session, escaped, was root of the other's. Blocks now come from a
// registry every daemon on the host shares.
func TestSecondDaemonGetsDisjointIDBlocks(t *testing.T) {
	h1 := startDaemon(t, nil)
	h2 := startDaemon(t, nil)
	if h1.Config.CgroupParent == h2.Config.CgroupParent || h1.DataDir == h2.DataDir {
		t.Fatal("the two daemons share a data directory or cgroup parent")
	}
	var boxes []*box
	for i := 0; i < 4; i++ {
		h := h1
		if i%2 == 1 {
			h = h2
		}
		boxes = append(boxes, newBox(t, h, fmt.Sprintf("d%d-%d", i%2+1, i), nil))
	}
	type block struct {
		first, size uint64
		id          string
	}
	var blocks []block
	for _, b := range boxes {
		f, s := b.hostBlock(t)
		blocks = append(blocks, block{f, s, b.id})
	}
	// Both daemons stop before either's leak check, which counts every
	// child of the test.
	defer h1.Stop()
	defer h2.Stop()
	for i, a := range blocks {
		for _, b := range blocks[i+1:] {
			if a.first < b.first+b.size && b.first < a.first+a.size {
				t.Errorf("sessions %s (host ids %d+%d) and %s (host ids %d+%d) share host ids", a.id, a.first, a.size, b.id, b.first, b.size)
			}
		}
	}
	// Root of one daemon's session, escaped to the host, cannot touch the
	// other daemon's session's writable layer, not even a file anyone
	// inside may read: the layer's directory lets only its own root pass.
	victim := boxes[1]
	victim.out(t, "echo secret > /root/victim; echo secret > /tmp/open; chmod 644 /tmp/open")
	_, layer := sandboxDirs(t, h2.DataDir, blocks[1].first)
	upper := filepath.Join(layer, "upper")
	if _, err := os.Stat(filepath.Join(upper, "root", "victim")); err != nil {
		t.Fatalf("the victim's file in its writable layer: %v", err)
	}
	out, code := asHostUser(t, uint32(blocks[0].first), `cat "$1/root/victim" "$1/tmp/open" 2>&1; echo x > "$1/root/planted" 2>&1`, upper)
	if code == 0 || strings.Contains(out, "secret") || strings.Count(out, "Permission denied") != 3 {
		t.Errorf("root of %s (host uid %d) on the host, against %s's layer: exit %d, %q; want Permission denied (EACCES)", boxes[0].id, blocks[0].first, victim.id, code, out)
	}
}

// TestStateDirectoryIsTheDaemons (issue 20, hole 4): the session's state
// directory, where the agent's socket is, belonged to the sandbox's root,
// so a process of that sandbox that reached the host could replace the
// socket the daemon dials. Now only the overlays' upper and work
// directories are the sandbox root's.
func TestStateDirectoryIsTheDaemons(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "owner", nil)
	first, _ := b.hostBlock(t)
	dir, _ := sandboxDirs(t, h.DataDir, first)
	out, _ := asHostUser(t, uint32(first), `cd "$1" || exit 9
mv agent.sock agent.old 2>&1 && echo MOVED
touch planted 2>&1 && echo PLANTED
rm -f agent.sock 2>&1 && echo REMOVED`, dir)
	for _, done := range []string{"MOVED", "PLANTED", "REMOVED"} {
		if strings.Contains(out, done) {
			t.Errorf("the sandbox's root on the host changed its state directory (%s): %q; want every change refused with Permission denied (EACCES)", done, out)
		}
	}
	if strings.Count(out, "Permission denied") != 3 {
		t.Errorf("the sandbox's root on the host in its own state directory: %q; want three times Permission denied (EACCES)", out)
	}
	if _, err := os.Lstat(filepath.Join(dir, "agent.sock")); err != nil {
		t.Errorf("agent.sock: %v", err)
	}
	b.alive(t, "the attempts on its state directory")
}

// TestImpostorAgentSocketRefused (issue 20, hole 4): the daemon dialled
// agent.sock and spoke to whatever listened there. A socket planted in its
// place, listened on by a process of the sandbox's own host uid that is not
// its PID 1 (one that escaped), now gets not one byte: the next daemon
// checks the listener's credentials (SO_PEERCRED) against the recorded
// PID 1.
func TestImpostorAgentSocketRefused(t *testing.T) {
	h1 := startDaemon(t, func(c *config.Config) { c.Shutdown = config.ShutdownKeep })
	b := newBox(t, h1, "victim", nil)
	first, _ := b.hostBlock(t)
	h1.Stop()
	// If the test fails before a daemon takes the session back, its
	// sandbox would outlive the test.
	t.Cleanup(func() { killCgroup(h1.Config.CgroupParent) })
	dir, _ := sandboxDirs(t, h1.DataDir, first)
	sock := filepath.Join(dir, "agent.sock")

	// The impostor: the sandbox's root uid on the host, listening in a
	// directory of its own; the socket is then moved into place (root
	// does it here: the state directory refuses that uid, as
	// TestStateDirectoryIsTheDaemons shows).
	own := filepath.Join(t.TempDir(), "impostor")
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, int(first), int(first)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(own), 0o755)
	cmd := exec.Command("/usr/bin/python3", "-c", `
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1] + "/agent.sock"); s.listen(1)
print("listening", flush=True)
s.settimeout(30)
try:
    c, _ = s.accept()
except socket.timeout:
    print("no connection", flush=True); sys.exit(0)
c.settimeout(20)
n = 0
try:
    while True:
        d = c.recv(65536)
        if not d: break
        n += len(d)
except socket.timeout:
    pass
print("%d bytes" % n, flush=True)
`, own)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(first), Gid: uint32(first), NoSetGroups: true}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("no python3 on the host: %v", err)
	}
	defer cmd.Process.Kill()
	r := bufio.NewReader(out)
	if l, _ := r.ReadString('\n'); l != "listening\n" {
		t.Fatalf("the impostor: %q", l)
	}
	if err := os.Rename(filepath.Join(own, "agent.sock"), sock); err != nil {
		t.Fatal(err)
	}
	h2 := startDaemon(t, func(c *config.Config) {
		c.DataDir, c.CgroupParent, c.Shutdown = h1.DataDir, h1.Config.CgroupParent, config.ShutdownDestroy
	})
	s, err := h2.Client.GetSession(bg, b.id)
	if err != nil || s.State == "running" {
		t.Errorf("the session whose agent socket was replaced: %+v, %v; want it not adopted", s, err)
	}
	cmd.Process.Signal(syscall.SIGINT) // the daemon never dialled, or is done
	if l, _ := r.ReadString('\n'); l != "0 bytes\n" && l != "" {
		t.Errorf("the impostor on agent.sock (host uid %d, the sandbox's own) got %q from the daemon; want nothing", first, strings.TrimSpace(l))
	}
	cmd.Wait()
}

// TestSecondDaemonOnSameCgroupParentRefused (issue 20, hole 4): a second
// daemon with its own data directory but the first's cgroup parent took the
// first's sandboxes for leftovers no session owns and destroyed them at
// start. The cgroup parent is now locked by the daemon that uses it, and
// the second one refuses to start, naming the first's data directory.
func TestSecondDaemonOnSameCgroupParentRefused(t *testing.T) {
	h1 := startDaemon(t, nil)
	b := newBox(t, h1, "first", nil)
	cfg := h1.Config
	cfg.DataDir = testutil.TraversableDir(t)
	cfg.Listen = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	d, err := daemon.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		go d.Serve(ctx)
		cancel()
		t.Fatalf("a second daemon on cgroup parent %s started; want it refused", cfg.CgroupParent)
	}
	if !strings.Contains(err.Error(), "cgroup parent "+cfg.CgroupParent+" is in use by another daemon") || !strings.Contains(err.Error(), h1.DataDir) {
		t.Errorf("the second daemon's error: %v; want it to name the cgroup parent and the first daemon's data directory %s", err, h1.DataDir)
	}
	b.alive(t, "a second daemon tried the same cgroup parent")
}

// killCgroup kills every process under the cgroup parent (a sandbox a
// failed test left without a daemon).
func killCgroup(parent string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "/"+parent+"/") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	time.Sleep(200 * time.Millisecond)
}
