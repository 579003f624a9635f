package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/fleet/etcdmember"
	"github.com/warrenhq/warren/internal/fleet/etcdreg"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/fleet/registrytest"
)

func TestNodeCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := etcdmember.StartCluster(ctx, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ep := c.Endpoints()[0]
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	m, err := reg.Join(ctx, registry.Node{Name: "n1", Addr: "http://10.0.0.1:7433", Capacity: 10, Free: 9, Version: "v1", Started: now.Add(-time.Hour)}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	registrytest.Eventually(t, 5*time.Second, "registered", m.Registered)
	if err := reg.CreateSession(ctx, registry.Session{Tenant: "t", ID: "s1", Node: "n1"}, registry.Quota{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.CreateSession(ctx, registry.Session{Tenant: "t", ID: "s2", Node: "gone"}, registry.Quota{}); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append(args, "--fleet-etcd", ep), &app{stdout: &out, stderr: &errOut,
			getenv: func(string) string { return "" }, now: func() time.Time { return now }})
		return out.String(), errOut.String(), code
	}
	out, errOut, code := cli("node", "ls")
	if code != 0 || !strings.Contains(out, "n1    http://10.0.0.1:7433  1         9     10        ready") || !strings.Contains(out, "1h0m0s") ||
		!strings.Contains(out, "gone") || !strings.Contains(out, "unreachable") {
		t.Fatalf("node ls = %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = cli("node", "drain", "n1", "--no-wait"); code != 0 || !strings.Contains(out, "n1 is draining") {
		t.Fatalf("node drain --no-wait = %d %q %q", code, out, errOut)
	}
	if nodes, _ := reg.Nodes(ctx); len(nodes) != 1 || !nodes[0].Draining {
		t.Fatalf("after drain: %+v", nodes)
	}
	if out, _, _ := cli("node", "ls"); !strings.Contains(out, "draining") {
		t.Fatalf("node ls after drain:\n%s", out)
	}
	// With a session left, a bounded wait gives up and says so.
	if out, errOut, code = cli("node", "drain", "n1", "--timeout", "1500ms"); code == 0 || !strings.Contains(errOut, "still holds 1 session") {
		t.Fatalf("node drain --timeout with a session = %d %q %q", code, out, errOut)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		reg.DeleteSession(context.Background(), "t", "s1", "n1")
	}()
	if out, errOut, code = cli("node", "drain", "n1"); code != 0 || !strings.Contains(out, "n1 holds no sessions") {
		t.Fatalf("node drain waiting for the last session = %d %q %q", code, out, errOut)
	}
	// --move: the node is marked moving, and the wait reports each
	// session it moved (its record re-made on another node) or that ended.
	for _, id := range []string{"s3", "s4"} {
		if err := reg.CreateSession(ctx, registry.Session{Tenant: "t", ID: id, Node: "n1"}, registry.Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		bg := context.Background()
		reg.DeleteSession(bg, "t", "s3", "n1")
		reg.CreateSession(bg, registry.Session{Tenant: "t", ID: "s3", Node: "n2"}, registry.Quota{})
		reg.DeleteSession(bg, "t", "s4", "n1")
	}()
	out, errOut, code = cli("node", "drain", "n1", "--move", "--timeout", "20s")
	if code != 0 || !strings.Contains(out, "moves its sessions to other nodes") || !strings.Contains(out, "n1 holds 2 sessions; waiting") ||
		!strings.Contains(out, "moved t/s3 to n2") || !strings.Contains(out, "t/s4 ended") || !strings.Contains(out, "n1 holds no sessions") {
		t.Fatalf("node drain --move = %d %q %q", code, out, errOut)
	}
	if nodes, _ := reg.Nodes(ctx); len(nodes) != 1 || !nodes[0].Draining || !nodes[0].Moving {
		t.Fatalf("after drain --move: %+v", nodes)
	}
	if out, _, _ = cli("node", "drain", "nope", "--move", "--no-wait"); !strings.Contains(out, "nope is not a live node now") {
		t.Fatalf("node drain --move of a node without an entry:\n%s", out)
	}
	if out, _, _ := cli("node", "ls"); !strings.Contains(out, "draining (moving)") {
		t.Fatalf("node ls after drain --move:\n%s", out)
	}
	if out, errOut, code = cli("node", "undrain", "n1"); code != 0 || !strings.Contains(out, "takes new sessions again") {
		t.Fatalf("node undrain = %d %q %q", code, out, errOut)
	}
	if nodes, _ := reg.Nodes(ctx); nodes[0].Draining || nodes[0].Moving {
		t.Fatal("still draining after undrain")
	}
	// doctor's fleet checks: etcd answers with a leader, the clocks agree.
	cfg := config.Default()
	cfg.Fleet.Etcd = []string{ep}
	checks := fleetChecks(ctx, cfg)
	if len(checks) != 2 || !checks[0].OK || !strings.Contains(checks[0].Detail, "leader") || !checks[1].OK || !strings.Contains(checks[1].Detail, "from ours") {
		t.Fatalf("fleet checks = %+v", checks)
	}
	cfg.Fleet.Etcd = []string{"http://127.0.0.1:1"}
	if checks := fleetChecks(ctx, cfg); checks[0].OK || !checks[0].Required || checks[len(checks)-1].OK {
		t.Fatalf("fleet checks against nothing = %+v", checks)
	}
	// Without a fleet the command says what is missing.
	var errBuf bytes.Buffer
	if code := run(t.Context(), []string{"node", "ls"}, &app{stdout: &bytes.Buffer{}, stderr: &errBuf, getenv: func(string) string { return "" }, now: time.Now}); code == 0 || !strings.Contains(errBuf.String(), "no fleet configured") {
		t.Fatalf("node ls without a fleet = %d %q", code, errBuf.String())
	}
}
