package daemon_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/session"
)

// waitPool waits until the pool holds n warm sandboxes.
func waitPool(t *testing.T, m *session.Manager, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for m.PoolSize() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d warm sandboxes after a minute, want %d", m.PoolSize(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWarmPool: a session from the pool is indistinguishable from a cold
// one (its own id, hostname, env, limits, cwd), a create that asks for
// something the pool was not made with starts cold, the pool refills, and
// stopping the daemon leaves nothing of the pool behind.
func TestWarmPool(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Session.PoolSize = 2 })
	m := h.Daemon.Manager()
	waitPool(t, m, 2)
	warmNames := m.WarmSandboxes()

	s, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "warm1", Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Get(bg, "default", "warm1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(warmNames, info.Name) {
		t.Fatalf("a create with default settings started cold (sandbox %s, pool %v)", info.Name, warmNames)
	}
	cold, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "cold1", Env: map[string]string{"A": "1"}, Limits: &api.Limits{MemoryMB: 300}})
	if err != nil {
		t.Fatal(err)
	}
	if ci, _ := m.Get(bg, "default", "cold1"); ci == nil || slices.Contains(warmNames, ci.Name) {
		t.Errorf("a create with its own memory limit took a warm sandbox")
	}
	if cold.Limits.MemoryMB != 300 {
		t.Errorf("the cold session's limits %+v, want memory 300", cold.Limits)
	}
	def := config.Default().Session.DefaultLimits
	if s.Limits.MemoryMB != def.MemoryMB || s.Limits.Pids != def.Pids || s.Limits.DiskMB != def.DiskMB {
		t.Errorf("the warm session's limits %+v, want the defaults %+v", s.Limits, def)
	}
	// The same command in both answers alike, each with its own identity.
	const probe = "hostname; echo $HOSTNAME $A; pwd; id -u; ls /proc | grep -c '^[0-9]'; cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || echo nolimitfile"
	for _, c := range []struct{ id, want string }{
		{"warm1", "warm1\nwarm1 1\n/workspace\n0\n"},
		{"cold1", "cold1\ncold1 1\n/workspace\n0\n"},
	} {
		res, err := h.Client.Exec(bg, c.id, &api.ExecRequest{Command: probe})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Stdout) < len(c.want) || res.Stdout[:len(c.want)] != c.want {
			t.Errorf("%s: %q, want it to start with %q", c.id, res.Stdout, c.want)
		}
	}
	// State persists as in any session.
	if res, err := h.Client.Exec(bg, "warm1", &api.ExecRequest{Command: "cd /tmp && export B=2"}); err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	if res, err := h.Client.Exec(bg, "warm1", &api.ExecRequest{Command: "pwd; echo $B"}); err != nil || res.Stdout != "/tmp\n2\n" {
		t.Errorf("state in a warm session: %+v, %v", res, err)
	}
	// The pool refills.
	waitPool(t, m, 2)
	for _, id := range []string{"warm1", "cold1"} {
		if err := h.Client.DeleteSession(bg, id); err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkCreateWarm times creates that take a warm sandbox: the pool is
// full before each one (waiting is not timed), and the session is deleted
// after (not timed).
func BenchmarkCreateWarm(b *testing.B) {
	h := daemontest.Start(b, func(c *config.Config) { c.Session.PoolSize = 1; c.Auth.RateLimit = 0 })
	m := h.Daemon.Manager()
	var ts timings
	i := 0
	for b.Loop() {
		b.StopTimer()
		for m.PoolSize() < 1 {
			time.Sleep(time.Millisecond)
		}
		i++
		id := "w" + strconv.Itoa(i)
		b.StartTimer()
		t0 := time.Now()
		if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
			b.Fatal(err)
		}
		ts = append(ts, time.Since(t0))
		b.StopTimer()
		if err := h.Client.DeleteSession(bg, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	ts.report(b)
}
