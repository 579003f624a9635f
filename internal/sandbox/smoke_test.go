package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	skel := filepath.Join(dir, "skel")
	for _, d := range []string{"usr", "etc", "tmp", "root", "proc", "dev", "sys", "run"} {
		os.MkdirAll(filepath.Join(skel, d), 0o755)
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		os.Symlink("usr/"+l, filepath.Join(skel, l))
	}
	os.WriteFile(filepath.Join(skel, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	h, err := cgroup.Detect("warren-smoke")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := NewRuntime(filepath.Join(dir, "sessions"), h)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Teardown()
	ctx := context.Background()
	t0 := time.Now()
	sb, err := rt.Start(ctx, &Config{Name: "smoke1", Hostname: "smoke", Lower: []string{skel},
		Overlays: []Overlay{{Source: "/usr", Target: "/usr"}}, BaseDir: "/workspace",
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"},
		Limits: cgroup.Limits{MemoryBytes: 256 << 20, Pids: 100, CPUs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start took %v", time.Since(t0))
	defer sb.Destroy(ctx)
	for _, cmd := range []string{"echo hi; hostname; pwd; id", "cd /tmp && export A=1 && X=2", "pwd; echo $A $X; ls /proc | head -5; cat /proc/self/cgroup | head -3", "exit 3", "pwd; echo $A"} {
		t0 := time.Now()
		res, err := sb.Exec(ctx, &agentproto.ExecRequest{Command: cmd, Timeout: 5 * time.Second, MaxOutput: 1 << 20}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%q -> %d restarted=%v out=%q err=%q (%v)", cmd, res.ExitCode, res.ShellRestarted, res.Stdout, res.Stderr, time.Since(t0))
	}
}
