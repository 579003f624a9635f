package restart

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/testutil"
)

var bg = context.Background()

// proc is a daemon running as a process of its own.
type proc struct {
	cmd    *exec.Cmd
	url    string
	c      *client.Client
	exited chan struct{} // closed once the daemon exited; then err is its end
	err    error
}

// start runs "<test binary> serve" on dataDir and waits until it serves.
func start(t *testing.T, dataDir, cgroupParent, shutdown string, logf *os.File) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--cgroup-parent", cgroupParent, "--cgroup-favor-dynmods=false", "--shutdown", shutdown, "--log-format", "json", "--log-level", "info")
	cmd.Env = append(os.Environ(), "WARREN_LISTEN=", "WARREN_DATA_DIR=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	// No daemon outlives its test, whatever the test's end.
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			logf.Write(append(line, '\n'))
			var l struct{ Msg, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "warren is serving" {
				addr <- l.Addr
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	select {
	case p.url = <-addr:
	case <-p.exited:
		t.Fatalf("the daemon exited before serving: %v (log: %s)", p.err, logf.Name())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the daemon did not start serving (log: %s)", logf.Name())
	}
	key, err := os.ReadFile(filepath.Join(dataDir, daemon.AdminKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	p.c = client.New(p.url, client.WithToken(strings.TrimSpace(string(key))))
	return p
}

// kill ends the daemon with SIGKILL: no shutdown code runs.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Kill()
	<-p.exited
}

// stop ends the daemon with SIGTERM, as an operator or systemd does.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			t.Errorf("daemon stopped with %v", p.err)
		}
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("the daemon did not stop on SIGTERM")
	}
}

// TestCrashLoop kills the daemon at random points while sessions are being
// created, used and deleted. After every restart each session whose create
// was acknowledged, and not deleted since, is there and running with its
// state; nothing half done lingers; at the end nothing is left on the host.
func TestCrashLoop(t *testing.T) {
	testutil.RequiresRoot(t)
	dataDir := testutil.TraversableDir(t)
	parent := fmt.Sprintf("%s%d-crash", testutil.TestCgroupPrefix, os.Getpid())
	testutil.CheckLeaks(t, parent, filepath.Join(dataDir, "sessions"), filepath.Join(dataDir, "layers"))
	logf, err := os.Create(filepath.Join(t.TempDir(), "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	// A failed round leaves the kept sandboxes of killed daemons: one more
	// daemon, which destroys its sessions when it stops, adopts and removes
	// them before the leak check runs (cleanups run last first).
	t.Cleanup(func() {
		if t.Failed() {
			start(t, dataDir, parent, "destroy", logf).stop(t)
		}
	})
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("daemon log (tail):\n%s", b)
			logs, _ := filepath.Glob(filepath.Join(dataDir, "sessions", "*", "agent.log"))
			for _, l := range logs {
				if b, _ := os.ReadFile(l); len(b) > 0 {
					t.Logf("%s:\n%s", l, b[max(0, len(b)-2000):])
				}
			}
		}
	}()

	// A session with state, a background process and a durable process,
	// that every crash must leave intact.
	d := start(t, dataDir, parent, "keep", logf)
	if _, err := d.c.CreateSession(bg, &api.CreateSessionRequest{ID: "steady"}); err != nil {
		t.Fatal(err)
	}
	if res, err := d.c.Exec(bg, "steady", &api.ExecRequest{Command: "mkdir -p /srv/x && cd /srv/x && export STEADY=1 && echo v1 > file && (sleep 600 &)"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	ticker, err := d.c.StartProcess(bg, "steady", &api.StartProcessRequest{Command: "while :; do echo tick; sleep 0.02; done"})
	if err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	acked := map[string]bool{}  // sessions whose create was acknowledged and not deleted since
	doomed := map[string]bool{} // sessions a delete was sent for, answered or not
	n := 0
	const rounds = 6
	for round := 0; round < rounds; round++ {
		// Creates and deletes race with a SIGKILL at a random moment.
		var mu sync.Mutex
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(bg)
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					mu.Lock()
					n++
					id := fmt.Sprintf("s%d", n)
					var victim string
					for v := range acked {
						victim = v
						break
					}
					del := victim != "" && rng.IntN(3) == 0
					if del {
						doomed[victim] = true
					}
					mu.Unlock()
					if del {
						if err := d.c.DeleteSession(ctx, victim); err == nil || client.IsNotFound(err) {
							mu.Lock()
							delete(acked, victim)
							mu.Unlock()
						}
						continue
					}
					if _, err := d.c.CreateSession(ctx, &api.CreateSessionRequest{ID: id}); err == nil {
						mu.Lock()
						acked[id] = true
						mu.Unlock()
					}
				}
			}()
		}
		mu.Lock()
		wait := time.Duration(rng.IntN(400)) * time.Millisecond
		mu.Unlock()
		time.Sleep(wait)
		d.kill(t)
		cancel()
		wg.Wait()

		d = start(t, dataDir, parent, "keep", logf)
		list, err := d.c.ListSessions(bg)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]string{}
		for _, s := range list {
			listed[s.ID] = s.State
		}
		for id := range acked {
			if listed[id] == "" && doomed[id] {
				delete(acked, id) // its delete was cut short, but done
				continue
			}
			if listed[id] != "running" {
				t.Errorf("round %d: acknowledged session %s is %q after the crash", round, id, listed[id])
			}
		}
		for id, state := range listed {
			if state != "running" {
				t.Errorf("round %d: session %s is %q after the crash; a daemon crash kills no sandbox", round, id, state)
			}
			if id != "steady" && !acked[id] {
				// Created, but the answer was lost in the crash: it is
				// there, so the client's retry finds it.
				acked[id] = true
			}
		}
		res, err := d.c.Exec(bg, "steady", &api.ExecRequest{Command: "pwd; echo $STEADY; cat file; pgrep -fc '^sleep 600'"})
		if err != nil || res.Stdout != "/srv/x\n1\nv1\n1\n" {
			t.Errorf("round %d: steady after the crash: %+v, %v", round, res, err)
		}
		if p, err := d.c.GetProcess(bg, "steady", ticker.ID); err != nil || p.State != "running" || p.OutputBytes == 0 {
			t.Errorf("round %d: the durable process after the crash: %+v, %v", round, p, err)
		}
		if t.Failed() {
			break
		}
	}
	d.kill(t)

	// The last daemon deletes everything on SIGTERM.
	d = start(t, dataDir, parent, "destroy", logf)
	list, err := d.c.ListSessions(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(acked)+1 {
		t.Errorf("%d sessions at the end, want %d", len(list), len(acked)+1)
	}
	d.stop(t)
	ents, _ := os.ReadDir(filepath.Join(dataDir, "sessions"))
	if len(ents) != 0 {
		t.Errorf("sandbox directories left after the last stop: %d", len(ents))
	}
}

// TestSIGTERMKeepsSessions: systemd's stop (SIGTERM) with the default
// --shutdown=keep leaves sessions running, and the next start carries on
// with their processes, files, cwd and environment.
func TestSIGTERMKeepsSessions(t *testing.T) {
	testutil.RequiresRoot(t)
	dataDir := testutil.TraversableDir(t)
	parent := fmt.Sprintf("%s%d-term", testutil.TestCgroupPrefix, os.Getpid())
	testutil.CheckLeaks(t, parent, filepath.Join(dataDir, "sessions"), filepath.Join(dataDir, "layers"))
	logf, err := os.Create(filepath.Join(t.TempDir(), "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	d := start(t, dataDir, parent, "keep", logf)
	if _, err := d.c.CreateSession(bg, &api.CreateSessionRequest{ID: "kept"}); err != nil {
		t.Fatal(err)
	}
	if res, err := d.c.Exec(bg, "kept", &api.ExecRequest{Command: "cd /tmp && export KEPT=1 && echo data > f && (sleep 600 &)"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	p, err := d.c.StartProcess(bg, "kept", &api.StartProcessRequest{Command: "while :; do echo tick; sleep 0.05; done"})
	if err != nil {
		t.Fatal(err)
	}
	d.stop(t)

	d = start(t, dataDir, parent, "destroy", logf)
	res, err := d.c.Exec(bg, "kept", &api.ExecRequest{Command: "pwd; echo $KEPT; cat f; pgrep -fc '^sleep 600'"})
	if err != nil || res.Stdout != "/tmp\n1\ndata\n1\n" {
		t.Errorf("after SIGTERM and a restart: %+v, %v", res, err)
	}
	if pr, err := d.c.GetProcess(bg, "kept", p.ID); err != nil || pr.State != "running" {
		t.Errorf("the process after SIGTERM and a restart: %+v, %v", pr, err)
	}
	d.stop(t) // destroy: the leak check sees a clean host
}
