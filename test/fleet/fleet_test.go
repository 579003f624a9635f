package fleet

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/api"
	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/fleet/etcdmember"
	"github.com/warrenhq/warren/internal/fleet/etcdreg"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/testutil"
)

var bg = context.Background()

const (
	ttl      = 2 * time.Second
	grace    = 3 * time.Second
	quota    = 5 // the tenant's sessions, fleet-wide
	capacity = 3 // each node's sessions
)

// node is one daemon of the fleet, a process of its own.
type node struct {
	name, dataDir, parent string
	cmd                   *exec.Cmd
	url, key              string
	c                     *client.Client
	exited                chan struct{}
	err                   error
	// killed: the test killed the node, whose sandboxes outlive it.
	killed bool
	// etcd, if set, is the node's --fleet-etcd instead of the fleet's.
	etcd string
	// listen, if set, is the node's --listen (default 127.0.0.1:0);
	// extra are more flags of warren serve; hc, if set, is the client's
	// HTTP client (TLS roots).
	listen string
	extra  []string
	hc     *http.Client
	logf   *os.File // the fleet's log, which n's lines go to
}

type fleetT struct {
	t         testing.TB
	endpoints string
	prefix    string
	logf      *os.File
}

// start runs "<test binary> serve" as fleet node n and waits until it
// serves.
func (f *fleetT) start(n *node) {
	t := f.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--listen", cmp.Or(n.listen, "127.0.0.1:0"), "--data-dir", n.dataDir,
		"--cgroup-parent", n.parent, "--cgroup-favor-dynmods=false", "--shutdown", "destroy", "--log-format", "json",
		"--pool-size", "0", "--tenant-max-sessions", fmt.Sprint(quota), "--max-sessions", fmt.Sprint(capacity), "--rate-limit", "0", "--preview-domain", "preview.test",
		"--fleet-etcd", cmp.Or(n.etcd, f.endpoints), "--fleet-node", n.name, "--fleet-prefix", f.prefix,
		"--fleet-node-ttl", ttl.String(), "--fleet-lost-grace", grace.String())
	cmd.Args = append(cmd.Args, n.extra...)
	cmd.Env = append(os.Environ(), "WARREN_LISTEN=", "WARREN_DATA_DIR=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = f.logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd, n.exited, n.err, n.killed = cmd, make(chan struct{}), nil, false
	n.logf = f.logf
	exited := n.exited
	addr, ready := make(chan string, 1), make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			f.logf.Write(append([]byte(n.name+" "), append(line, '\n')...))
			var l struct{ Msg, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "warren is serving" {
				addr <- l.Addr
			}
			if l.Msg == "fleet node ready" {
				ready <- struct{}{}
			}
		}
		n.err = cmd.Wait()
		close(exited)
	}()
	select {
	case n.url = <-addr:
	case <-exited:
		t.Fatalf("%s exited before serving: %v (log: %s)", n.name, n.err, f.logf.Name())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start serving (log: %s)", n.name, f.logf.Name())
	}
	key, err := os.ReadFile(filepath.Join(n.dataDir, daemon.AdminKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	n.key = strings.TrimSpace(string(key))
	n.c = client.New(n.url, client.WithToken(n.key))
	if n.hc != nil {
		n.c = client.New(n.url, client.WithToken(n.key), client.WithHTTPClient(n.hc))
	}
	// A node takes creates once it compared its sessions with the
	// registry (and fenced what the fleet gave away); until then a
	// create answers 503.
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("%s exited: %v", n.name, n.err)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not compare its sessions with the registry (log: %s)", n.name, f.logf.Name())
	}
}

func (n *node) running() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

func (n *node) kill() {
	n.cmd.Process.Kill()
	<-n.exited
	n.killed = true
}

func (n *node) stop(t testing.TB) {
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		if n.err != nil {
			t.Errorf("%s stopped with %v", n.name, n.err)
		}
	case <-time.After(60 * time.Second):
		// Its goroutines, for the log: what it was stuck in.
		n.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-n.exited:
		case <-time.After(5 * time.Second):
			n.cmd.Process.Kill()
		}
		t.Errorf("%s did not stop on SIGTERM; the end of its log:\n%s", n.name, n.logTail(4000))
	}
}

// logTail is the last lines of n's log (its lines in the fleet's log).
func (n *node) logTail(lines int) string {
	if n.logf == nil {
		return ""
	}
	b, _ := os.ReadFile(n.logf.Name())
	var mine []string
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, n.name+" ") {
			mine = append(mine, l)
		}
	}
	return strings.Join(mine[max(0, len(mine)-lines):], "")
}

func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getJSON does req and reads its 200 answer into out.
func getJSON(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// MCP's streamable HTTP: the answer is the event's data.
		for line := range strings.Lines(string(b)) {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(d)
			}
		}
	}
	return json.Unmarshal(b, out)
}

func status(err error) int {
	var e *client.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	if err == nil {
		return 0
	}
	return -1
}

// TestFleet: three daemons over three etcd members, one tenant with a
// fleet-wide quota of three sessions.
// TestFleet runs the fleet over three etcd members embedded in the test
// (go.etcd.io/etcd/server, the version the daemon embeds).
func TestFleet(t *testing.T) {
	testutil.RequiresRoot(t)
	testFleet(t, embeddedEtcd(t))
}

// TestFleetDebianEtcd runs the same over Debian's etcd-server (3.4) as
// three processes of their own, the second profile: an older etcd that
// operators run from their distribution.
func TestFleetDebianEtcd(t *testing.T) {
	testutil.RequiresRoot(t)
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd binary on PATH: install Debian's etcd-server (apt-get install etcd-server) to run the fleet against it")
	}
	testFleet(t, processEtcd(t, bin))
}

func testFleet(t *testing.T, endpoints []string) {
	f, nodes, reg := newFleet(t, 3, endpoints)
	n0, n1, n2 := nodes[0], nodes[1], nodes[2]
	listed, err := reg.Nodes(bg)
	if err != nil || len(listed) != 3 {
		t.Fatalf("registry nodes = %+v, %v; want 3", listed, err)
	}
	for i, ln := range listed {
		if ln.Name != nodes[i].name || ln.Addr != nodes[i].url || ln.Capacity < 1 {
			t.Errorf("node entry %+v, want %s at %s", ln, nodes[i].name, nodes[i].url)
		}
	}

	create := func(n *node, id string) error {
		_, err := n.c.CreateSession(bg, &api.CreateSessionRequest{ID: id})
		return err
	}
	byName := map[string]*node{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	// owner returns the node the registry says holds id.
	owner := func(t *testing.T, id string) *node {
		t.Helper()
		r, err := reg.GetSession(bg, daemon.BootstrapTenant, id)
		if err != nil || byName[r.Node] == nil {
			t.Fatalf("record of %s = %+v, %v", id, r, err)
		}
		return byName[r.Node]
	}
	// settle waits until the registry shows every node's free capacity
	// after used sessions, so that placement sees what the test expects.
	settle := func(t *testing.T, used int) {
		t.Helper()
		eventually(t, 3*time.Second, fmt.Sprintf("free capacity settles at %d used", used), func() bool {
			ns, err := reg.Nodes(bg)
			free := 0
			for _, n := range ns {
				free += n.Free
			}
			return err == nil && len(ns) == 3 && free == 3*capacity-used
		})
	}
	t.Run("KeysAndTenantsAreFleetWide", func(t *testing.T) {
		// Each node made its own admin key at its first start and brought
		// it into the fleet: n0's works on n2.
		if _, err := client.New(n2.url, client.WithToken(n0.key)).ListKeys(bg, ""); err != nil {
			t.Fatalf("n0's admin key on n2: %v", err)
		}
		// A key made through n0 works on n1 and n2 at once (their caches
		// have not seen it: they read the registry).
		k, err := n0.c.CreateKey(bg, &api.CreateKeyRequest{Tenant: "acme", Name: "fleet"})
		if err != nil {
			t.Fatal(err)
		}
		acme := map[string]*client.Client{}
		for _, n := range nodes {
			acme[n.name] = client.New(n.url, client.WithToken(k.Secret))
			if _, err := acme[n.name].ListSessions(bg); err != nil {
				t.Fatalf("the key made on n0 through %s: %v", n.name, err)
			}
		}
		// A quota set through n1 binds creates through every node: acme
		// may hold one session, fleet-wide.
		if _, err := n1.c.PutTenant(bg, "acme", &api.Tenant{Quota: api.TenantQuota{MaxSessions: 1}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, "n2 sees acme's settings", func() bool {
			tn, err := n2.c.GetTenant(bg, "acme")
			return err == nil && tn.Quota.MaxSessions == 1
		})
		if _, err := acme["n2"].CreateSession(bg, &api.CreateSessionRequest{ID: "a1", Limits: &api.Limits{MemoryMB: 256}}); err != nil {
			t.Fatalf("acme's first session: %v", err)
		}
		t.Cleanup(func() { _ = acme["n1"].DeleteSession(bg, "a1") })
		for _, n := range nodes {
			if _, err := acme[n.name].CreateSession(bg, &api.CreateSessionRequest{ID: "a2"}); status(err) != http.StatusTooManyRequests {
				t.Fatalf("acme's second session through %s = %v, want 429 (max_sessions 1 set on n1)", n.name, err)
			}
		}
		// Memory limits too are summed across the fleet, in the same
		// transaction as the session's record.
		if _, err := n1.c.PutTenant(bg, "acme", &api.Tenant{Quota: api.TenantQuota{MaxMemoryMB: 400}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, "n0 sees acme's memory quota", func() bool {
			tn, err := n0.c.GetTenant(bg, "acme")
			return err == nil && tn.Quota.MaxMemoryMB == 400
		})
		for _, n := range nodes {
			_, err := acme[n.name].CreateSession(bg, &api.CreateSessionRequest{ID: "a2", Limits: &api.Limits{MemoryMB: 256}})
			if status(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "max_memory_mb") {
				t.Fatalf("acme's 256 MiB more through %s = %v, want 429 max_memory_mb (256 of 400 MiB held on one node)", n.name, err)
			}
		}
		if err := acme["n0"].DeleteSession(bg, "a1"); err != nil {
			t.Fatal(err)
		}
		if u, err := reg.UsageOf(bg, "acme"); err != nil || u != (registry.Usage{}) {
			t.Fatalf("acme's usage after its delete = %+v, %v; want none", u, err)
		}
		// Every node authenticated the key once and keeps it in its key
		// cache; a revocation through n2 reaches them through the watch.
		start := time.Now()
		if err := n2.c.RevokeKey(bg, k.ID); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			eventually(t, 2*time.Second, "the revoked key refused by "+n.name, func() bool {
				_, err := acme[n.name].ListSessions(bg)
				return status(err) == http.StatusUnauthorized
			})
		}
		settle(t, 0)
		t.Logf("a revocation through n2 took effect on every node within %v", time.Since(start).Round(time.Millisecond))
		if _, err := n0.c.PutTenant(bg, "acme", &api.Tenant{}); err != nil {
			t.Fatal(err)
		}
		// Each node keeps its own audit log; its records name it, on
		// disk and in GET /v1/audit.
		for _, n := range nodes {
			b, err := os.ReadFile(filepath.Join(n.dataDir, "audit.log"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"node":"`+n.name+`"`) {
				t.Errorf("%s's audit log has no record naming it:\n%.400s", n.name, b)
			}
			recs, err := n.c.QueryAudit(bg, client.AuditQuery{})
			if err != nil || len(recs) == 0 {
				t.Fatalf("%s's audit = %v, %v", n.name, recs, err)
			}
			for _, r := range recs {
				if r.Node != n.name {
					t.Fatalf("%s's audit record %+v names node %q", n.name, r, r.Node)
				}
			}
		}
	})
	t.Run("E2BFacadeIsForwarded", func(t *testing.T) {
		k, err := n0.c.CreateKey(bg, &api.CreateKeyRequest{Tenant: "e2bt"})
		if err != nil {
			t.Fatal(err)
		}
		do := func(n *node, method, path string, hdr map[string]string, body string, out any) (int, string) {
			t.Helper()
			req, _ := http.NewRequest(method, n.url+path, strings.NewReader(body))
			for k, v := range hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if out != nil {
				_ = json.Unmarshal(b, out)
			}
			return resp.StatusCode, string(b)
		}
		bearer := map[string]string{"Authorization": "Bearer " + k.Secret}
		// A create through n1 is placed like a REST one.
		var sb struct{ SandboxID, EnvdAccessToken string }
		if st, b := do(n1, "POST", "/e2b/sandboxes", bearer, `{"templateID":"base","timeout":120}`, &sb); st != 201 {
			t.Fatalf("E2B create through n1: %d %s", st, b)
		}
		r, err := reg.GetSession(bg, "e2bt", sb.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("sandbox %s placed on %s", sb.SandboxID, r.Node)
		t.Cleanup(func() { _, _ = do(n0, "DELETE", "/e2b/sandboxes/"+sb.SandboxID, bearer, "", nil) })
		var first string
		for _, n := range nodes {
			// The control plane, the id in the path.
			var info struct{ SandboxID, State string }
			if st, b := do(n, "GET", "/e2b/sandboxes/"+sb.SandboxID, bearer, "", &info); st != 200 || info.SandboxID != sb.SandboxID {
				t.Fatalf("E2B get of %s (on %s) through %s: %d %s", sb.SandboxID, r.Node, n.name, st, b)
			}
			// envd with the sandbox's access token only (no tenant for
			// the edge): by E2b-Sandbox-Id, and by the envd host.
			for _, hdr := range []map[string]string{
				{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken},
				{"Host": "49983-" + sb.SandboxID + ".preview.test", "X-Access-Token": sb.EnvdAccessToken},
			} {
				path := "/e2b/files?path=/etc/hostname"
				if hdr["Host"] != "" {
					path = "/files?path=/etc/hostname"
				}
				st, b := do(n, "GET", path, hdr, "", nil)
				if st != 200 || b == "" {
					t.Fatalf("envd read through %s with %v: %d %s", n.name, hdr, st, b)
				}
				if first == "" {
					first = b
				} else if b != first {
					t.Fatalf("envd read through %s = %q, want %q", n.name, b, first)
				}
			}
			// A wrong token is refused by the owner, wherever it came in.
			if st, b := do(n, "GET", "/e2b/files?path=/etc/hostname", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": "nope"}, "", nil); st != 401 {
				t.Fatalf("envd with a wrong token through %s: %d %s, want 401", n.name, st, b)
			}
		}
		killer := nodes[0]
		if killer.name == r.Node {
			killer = nodes[1]
		}
		if st, b := do(killer, "DELETE", "/e2b/sandboxes/"+sb.SandboxID, bearer, "", nil); st != 204 {
			t.Fatalf("E2B kill through %s: %d %s", killer.name, st, b)
		}
		if _, err := reg.GetSession(bg, "e2bt", sb.SandboxID); err == nil {
			t.Fatalf("the record of %s outlived its kill", sb.SandboxID)
		}
		settle(t, 0)
	})
	t.Run("RPCWithoutHeaderAndCreates", func(t *testing.T) {
		k, err := n0.c.CreateKey(bg, &api.CreateKeyRequest{Tenant: "rpct"})
		if err != nil {
			t.Fatal(err)
		}
		var h2 http.Protocols
		h2.SetUnencryptedHTTP2(true)
		h2c := &http.Client{Transport: &http.Transport{Protocols: &h2}}
		auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+k.Secret)
				return next(ctx, req)
			}
		}))
		streamAuth := connect.WithInterceptors(streamAuthInterceptor("Bearer " + k.Secret))
		// No Warren-Session header anywhere: the id is read from the
		// message. gRPC (protobuf, h2c), Connect JSON, Connect protobuf.
		protocols := []struct {
			name   string
			client *http.Client
			opts   []connect.ClientOption
		}{
			{"grpc", h2c, []connect.ClientOption{auth, streamAuth, connect.WithGRPC()}},
			{"connect-json", http.DefaultClient, []connect.ClientOption{auth, streamAuth, connect.WithProtoJSON()}},
			{"connect-proto", http.DefaultClient, []connect.ClientOption{auth, streamAuth}},
		}
		// n0 drains: a create that reaches it must be placed elsewhere
		// (n0 itself refuses creates while draining).
		if err := reg.Drain(bg, "n0", true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Drain(bg, "n0", false) })
		eventually(t, 3*time.Second, "n0 sees itself draining", func() bool {
			req, _ := http.NewRequest("GET", n0.url+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+n0.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return strings.Contains(string(b), `warren_fleet_nodes{state="draining"} 1`+"\n")
		})
		// freeSettles waits until the registry shows every node's free
		// capacity after the creates so far, so that placement does not
		// pick a node that just filled up (it would refuse, 429).
		freeSettles := func(used int) {
			eventually(t, 3*time.Second, "free capacity settles", func() bool {
				ns, err := reg.Nodes(bg)
				free := 0
				for _, n := range ns {
					free += n.Free
				}
				return err == nil && free == 3*capacity-used
			})
		}
		ids := []string{}
		t.Cleanup(func() {
			rc := client.New(n1.url, client.WithToken(k.Secret))
			for _, id := range ids {
				_ = rc.DeleteSession(bg, id)
			}
		})
		for _, p := range protocols[:2] {
			id := "r-" + p.name
			sess := warrenv1connect.NewSessionServiceClient(p.client, n0.url, p.opts...)
			if _, err := sess.CreateSession(bg, connect.NewRequest(&warrenv1.CreateSessionRequest{Id: id})); err != nil {
				t.Fatalf("%s create through draining n0: %v", p.name, err)
			}
			ids = append(ids, id)
			freeSettles(len(ids))
		}
		// MCP's create_session is placed too.
		req, _ := http.NewRequest("POST", n0.url+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_session","arguments":{"id":"r-mcp"}}}`))
		req.Header.Set("Authorization", "Bearer "+k.Secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(b), `"isError":true`) {
			t.Fatalf("MCP create_session through draining n0 = %d %s", resp.StatusCode, b)
		}
		ids = append(ids, "r-mcp")
		for _, id := range ids {
			r, err := reg.GetSession(bg, "rpct", id)
			if err != nil || r.Node == "n0" {
				t.Fatalf("record of %s = %+v, %v; want it placed off the draining n0", id, r, err)
			}
		}
		if err := reg.Drain(bg, "n0", false); err != nil {
			t.Fatal(err)
		}
		// Every node serves every session, unary and streaming, over
		// every protocol, without the header.
		for _, n := range nodes {
			for _, p := range protocols {
				execs := warrenv1connect.NewExecServiceClient(p.client, n.url, p.opts...)
				for _, id := range ids {
					res, err := execs.Exec(bg, connect.NewRequest(&warrenv1.ExecRequest{SessionId: id, Command: "hostname"}))
					if err != nil || res.Msg.GetStdout() != id+"\n" {
						t.Fatalf("%s Exec in %s through %s = %v, %v", p.name, id, n.name, res, err)
					}
				}
				st, err := execs.ExecStream(bg, connect.NewRequest(&warrenv1.ExecStreamRequest{SessionId: ids[0], Command: "hostname"}))
				if err != nil {
					t.Fatalf("%s ExecStream through %s: %v", p.name, n.name, err)
				}
				var out strings.Builder
				for st.Receive() {
					out.WriteString(st.Msg().GetStdout().GetText())
				}
				if err := st.Err(); err != nil || out.String() != ids[0]+"\n" {
					t.Fatalf("%s ExecStream in %s through %s = %q, %v", p.name, ids[0], n.name, out.String(), err)
				}
				st.Close()
			}
		}
		rc := client.New(n0.url, client.WithToken(k.Secret))
		for _, id := range ids {
			if err := rc.DeleteSession(bg, id); err != nil {
				t.Fatal(err)
			}
		}
		ids = nil
		settle(t, 0)
	})
	t.Run("PlacementSpreadsAndSkipsFullNodes", func(t *testing.T) {
		// Every create goes through n0; placement spreads them, and a
		// node at its capacity (3) is never picked: all five creates
		// succeed although one node cannot take them all.
		count := map[string]int{}
		for i := 1; i <= quota; i++ {
			id := fmt.Sprint("s", i)
			if err := create(n0, id); err != nil {
				t.Fatalf("create %s through n0: %v", id, err)
			}
			count[owner(t, id).name]++
			settle(t, i)
		}
		t.Logf("placement of %d sessions created through n0: %v", quota, count)
		if len(count) < 2 {
			t.Errorf("all sessions on one node: %v", count)
		}
		for n, c := range count {
			if c > capacity {
				t.Errorf("%s holds %d sessions, over its capacity %d", n, c, capacity)
			}
		}
	})
	t.Run("Metrics", func(t *testing.T) {
		wants := []string{"warren_fleet_registered 1", `warren_fleet_nodes{state="ready"} 3`,
			fmt.Sprintf(`warren_fleet_sessions{state="live"} %d`, quota), fmt.Sprintf("warren_fleet_free_sessions %d", 3*capacity-quota)}
		var b []byte
		// n1's cache follows the registry's watch: give it a moment.
		eventually(t, 3*time.Second, "fleet gauges on n1", func() bool {
			req, _ := http.NewRequest("GET", n1.url+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+n1.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range wants {
				if !strings.Contains(string(b), want+"\n") {
					return false
				}
			}
			return true
		})
	})
	t.Run("IdsAndQuotaAreFleetWide", func(t *testing.T) {
		// The same id through another node is the same session (200).
		s, err := n2.c.CreateSession(bg, &api.CreateSessionRequest{ID: "s1"})
		if err != nil || s.ID != "s1" {
			t.Fatalf("create of s1 again through n2 = %+v, %v; want s1 itself", s, err)
		}
		if u, err := reg.Usage(bg, daemon.BootstrapTenant); err != nil || u != quota {
			t.Fatalf("usage = %d, %v; want %d", u, err, quota)
		}
		for _, n := range nodes {
			if err := create(n, "over"); status(err) != http.StatusTooManyRequests {
				t.Fatalf("a session over the quota through %s = %v, want 429 (quota %d across the fleet)", n.name, err, quota)
			}
		}
	})
	t.Run("LastSlotRace", func(t *testing.T) {
		// The tenant holds 5 of 5; one goes, and nine creates race for
		// its slot through the three nodes: exactly one wins.
		if err := n0.c.DeleteSession(bg, "s5"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var wins, refused atomic.Int32
		for i := range 9 {
			wg.Go(func() {
				err := create(nodes[i%3], fmt.Sprint("race", i))
				switch status(err) {
				case 0:
					wins.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					t.Errorf("create race%d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || refused.Load() != 8 {
			t.Fatalf("%d creates won and %d were refused, want 1 and 8", wins.Load(), refused.Load())
		}
		if u, err := reg.Usage(bg, daemon.BootstrapTenant); err != nil || u != quota {
			t.Fatalf("usage = %d, %v; want %d", u, err, quota)
		}
		settle(t, quota)
	})
	t.Run("AnyNodeServesEverySession", func(t *testing.T) {
		// s2 lives on one node; every node answers for it, REST and SSE.
		for _, n := range nodes {
			res, err := n.c.Exec(bg, "s2", &api.ExecRequest{Command: "echo via " + n.name + "; hostname"})
			if err != nil || res.Stdout != "via "+n.name+"\ns2\n" {
				t.Fatalf("exec in s2 through %s = %+v, %v", n.name, res, err)
			}
			var streamed strings.Builder
			res, err = n.c.ExecStream(bg, "s2", &api.ExecRequest{Command: "echo one; echo two >&2"}, func(stream string, p []byte) error {
				streamed.WriteString(stream + ":" + string(p))
				return nil
			})
			if err != nil || res.ExitCode != 0 || !strings.Contains(streamed.String(), "stdout:one") || !strings.Contains(streamed.String(), "stderr:two") {
				t.Fatalf("streamed exec in s2 through %s = %+v, %q, %v", n.name, res, streamed.String(), err)
			}
		}
		// gRPC (h2c) and Connect, routed by the warren-session header.
		var h2 http.Protocols
		h2.SetUnencryptedHTTP2(true)
		h2c := &http.Client{Transport: &http.Transport{Protocols: &h2}}
		for _, n := range nodes {
			key := n.key
			hdr := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
				return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
					req.Header().Set("Authorization", "Bearer "+key)
					req.Header().Set("Warren-Session", "s2")
					return next(ctx, req)
				}
			}))
			for _, p := range []struct {
				name   string
				client *http.Client
				opts   []connect.ClientOption
			}{{"grpc", h2c, []connect.ClientOption{hdr, connect.WithGRPC()}}, {"connect", http.DefaultClient, []connect.ClientOption{hdr}}} {
				execs := warrenv1connect.NewExecServiceClient(p.client, n.url, p.opts...)
				res, err := execs.Exec(bg, connect.NewRequest(&warrenv1.ExecRequest{SessionId: "s2", Command: "hostname"}))
				if err != nil || res.Msg.GetStdout() != "s2\n" {
					t.Fatalf("%s Exec in s2 through %s = %v, %v", p.name, n.name, res, err)
				}
			}
		}
		// MCP: a tool call names the session in its arguments.
		for _, n := range nodes {
			req, _ := http.NewRequest("POST", n.url+"/mcp", strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"session_id":"s2","command":"echo mcp-$((6*7)) on $(hostname)"}}}`))
			req.Header.Set("Authorization", "Bearer "+n.key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), "mcp-42 on s2") || strings.Contains(string(b), `"isError":true`) {
				t.Fatalf("MCP exec in s2 through %s = %d %s", n.name, resp.StatusCode, b)
			}
		}
		// The port proxy by preview host: a server in s2, reached at
		// 8080-s2.preview.test through every node. Sessions see the
		// host's /usr, so the host's python3 serves (where it has one).
		_, noPython := exec.LookPath("python3")
		if noPython != nil {
			t.Log("no python3 on this host to serve a port in a session: the preview host's forwarding is not checked here")
		} else if _, err := n0.c.Exec(bg, "s2", &api.ExecRequest{Command: "cd /tmp && python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 &"}); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if noPython != nil {
				break
			}
			var last string
			ok := false
			deadline := time.Now().Add(10 * time.Second)
			for !ok && time.Now().Before(deadline) {
				req, _ := http.NewRequest("GET", n.url+"/", nil)
				req.Host = "8080-s2.preview.test"
				req.Header.Set("Authorization", "Bearer "+n.key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = fmt.Sprintf("%d %s", resp.StatusCode, b)
				ok = resp.StatusCode == 200 && strings.Contains(string(b), "Directory listing")
				if !ok {
					time.Sleep(100 * time.Millisecond)
				}
			}
			if !ok {
				t.Fatalf("preview host 8080-s2 through %s: %s", n.name, last)
			}
		}
		// The WebSocket PTY, through a node that does not own s2.
		via := n0
		if owner(t, "s2") == n0 {
			via = n1
		}
		sh, err := via.c.Shell(bg, "s2", client.ShellOptions{})
		if err != nil {
			t.Fatalf("shell in s2 through %s: %v", via.name, err)
		}
		defer sh.Close()
		if _, err := sh.Write([]byte("echo pty-$((6*7))\n")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		buf := make([]byte, 4096)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), "pty-42") && time.Now().Before(deadline) {
			n, err := sh.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if !strings.Contains(out.String(), "pty-42") {
			t.Fatalf("shell through %s printed %q", via.name, out.String())
		}
		// A client cannot pose as a fleet node.
		req, _ := http.NewRequest("GET", n1.url+"/v1/sessions/s2", nil)
		req.Header.Set("Warren-Forwarded", "eyJ0IjoiZGVmYXVsdCJ9.AAAA")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a forged forwarded request got %d, want 401", resp.StatusCode)
		}
	})
	t.Run("ListIsFleetWide", func(t *testing.T) {
		// Two tenants' sessions created through different nodes: every
		// node lists all of a tenant's and none of the other's; an
		// admin's all=true lists both.
		keys := map[string]string{}
		for _, tn := range []string{"lista", "listb"} {
			k, err := n0.c.CreateKey(bg, &api.CreateKeyRequest{Tenant: tn})
			if err != nil {
				t.Fatal(err)
			}
			keys[tn] = k.Secret
		}
		want := map[string][]string{"lista": {"la0", "la1"}, "listb": {"lb2"}}
		owners := map[string]string{}
		made := 0
		for _, tn := range []string{"lista", "listb"} { // in the order all=true lists them
			for _, id := range want[tn] {
				n := byName["n"+id[2:]]
				c := client.New(n.url, client.WithToken(keys[tn]))
				if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
					t.Fatalf("create %s through %s: %v", id, n.name, err)
				}
				t.Cleanup(func() {
					// n.url now: a node restarted below listens elsewhere.
					if err := client.New(n.url, client.WithToken(keys[tn])).DeleteSession(bg, id); err != nil {
						t.Errorf("delete %s: %v", id, err)
					}
				})
				r, err := reg.GetSession(bg, tn, id)
				if err != nil {
					t.Fatal(err)
				}
				owners[id] = r.Node
				// The next placement reads this one's capacity.
				made++
				settle(t, quota+made)
			}
		}
		t.Logf("owners: %v", owners)
		list := func(n *node, key, query string) (int, http.Header, []string) {
			t.Helper()
			req, _ := http.NewRequest("GET", n.url+"/v1/sessions"+query, nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var l api.SessionList
			_ = json.NewDecoder(resp.Body).Decode(&l)
			var ids []string
			for _, s := range l.Sessions {
				if s.State == "lost" || strings.HasPrefix(s.ID, "la") || strings.HasPrefix(s.ID, "lb") {
					ids = append(ids, s.Tenant+"/"+s.ID+"/"+s.State)
				}
			}
			return resp.StatusCode, resp.Header, ids
		}
		for _, n := range nodes {
			for tn, ids := range want {
				var exp []string
				for _, id := range ids {
					exp = append(exp, "/"+id+"/running")
				}
				st, h, got := list(n, keys[tn], "")
				if st != 200 || !slices.Equal(got, exp) || h.Get(edge.PartialHeader) != "" {
					t.Fatalf("%s's list through %s = %d %v (partial %q), want %v", tn, n.name, st, got, h.Get(edge.PartialHeader), exp)
				}
			}
			if st, _, _ := list(n, keys["lista"], "?all=true"); st != http.StatusForbidden {
				t.Fatalf("a tenant's all=true through %s = %d, want 403", n.name, st)
			}
			st, _, got := list(n, n.key, "?all=true")
			exp := []string{"lista/la0/running", "lista/la1/running", "listb/lb2/running"}
			if st != 200 || !slices.Equal(got, exp) {
				t.Fatalf("the admin's all=true through %s = %d %v, want %v", n.name, st, got, exp)
			}
		}
		// Every transport lists the fleet's sessions, each with its node
		// where the transport shows one: REST, Connect, MCP, E2B.
		for _, n := range nodes {
			req, _ := http.NewRequest("GET", n.url+"/v1/sessions", nil)
			req.Header.Set("Authorization", "Bearer "+keys["lista"])
			var l api.SessionList
			if err := getJSON(req, &l); err != nil {
				t.Fatal(err)
			}
			for _, s := range l.Sessions {
				if s.Node != owners[s.ID] {
					t.Fatalf("%s listed through %s on node %q, want %q", s.ID, n.name, s.Node, owners[s.ID])
				}
			}
			auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
				return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
					req.Header().Set("Authorization", "Bearer "+keys["lista"])
					return next(ctx, req)
				}
			}))
			res, err := warrenv1connect.NewSessionServiceClient(http.DefaultClient, n.url, auth).ListSessions(bg, connect.NewRequest(&warrenv1.ListSessionsRequest{}))
			if err != nil {
				t.Fatalf("Connect ListSessions through %s: %v", n.name, err)
			}
			var got []string
			for _, s := range res.Msg.GetSessions() {
				got = append(got, s.GetId())
				if s.GetNode() != owners[s.GetId()] {
					t.Fatalf("Connect listed %s on node %q, want %q", s.GetId(), s.GetNode(), owners[s.GetId()])
				}
			}
			if !slices.Equal(got, want["lista"]) {
				t.Fatalf("Connect ListSessions through %s = %v, want %v", n.name, got, want["lista"])
			}
			req, _ = http.NewRequest("POST", n.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_sessions","arguments":{}}}`))
			req.Header.Set("Authorization", "Bearer "+keys["lista"])
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			var mcpRes struct {
				Result struct {
					StructuredContent api.SessionList `json:"structuredContent"`
				} `json:"result"`
			}
			if err := getJSON(req, &mcpRes); err != nil {
				t.Fatalf("MCP list_sessions through %s: %v", n.name, err)
			}
			got = nil
			for _, s := range mcpRes.Result.StructuredContent.Sessions {
				got = append(got, s.ID+"@"+s.Node)
			}
			if exp := []string{"la0@" + owners["la0"], "la1@" + owners["la1"]}; !slices.Equal(got, exp) {
				t.Fatalf("MCP list_sessions through %s = %v, want %v", n.name, got, exp)
			}
			req, _ = http.NewRequest("GET", n.url+"/e2b/v2/sandboxes", nil)
			req.Header.Set("Authorization", "Bearer "+keys["lista"])
			var sbs []struct{ SandboxID string }
			if err := getJSON(req, &sbs); err != nil {
				t.Fatalf("E2B list through %s: %v", n.name, err)
			}
			got = nil
			for _, sb := range sbs {
				got = append(got, sb.SandboxID)
			}
			slices.Sort(got)
			if !slices.Equal(got, want["lista"]) {
				t.Fatalf("E2B list through %s = %v, want %v", n.name, got, want["lista"])
			}
		}
		// The owner of la1 dies: the others still answer, without its
		// sessions, and say so; it comes back within the grace.
		dead := byName[owners["la1"]]
		var alive []*node
		for _, n := range nodes {
			if n != dead {
				alive = append(alive, n)
			}
		}
		dead.kill()
		for _, n := range alive {
			start := time.Now()
			st, h, got := list(n, keys["lista"], "")
			var exp []string
			for _, id := range want["lista"] {
				if owners[id] != dead.name {
					exp = append(exp, "/"+id+"/running")
				}
			}
			if st != 200 || !slices.Equal(got, exp) || h.Get(edge.PartialHeader) != dead.name {
				t.Fatalf("lista's list through %s with %s dead = %d %v (partial %q), want %v (partial %s)", n.name, dead.name, st, got, h.Get(edge.PartialHeader), exp, dead.name)
			}
			t.Logf("a list through %s with %s dead answered in %v", n.name, dead.name, time.Since(start).Round(time.Millisecond))
		}
		f.start(dead)
		eventually(t, 5*time.Second, "the list whole again", func() bool {
			st, h, got := list(alive[0], keys["lista"], "")
			return st == 200 && len(got) == 2 && h.Get(edge.PartialHeader) == ""
		})
	})
	t.Run("RestartWithinGrace", func(t *testing.T) {
		o := owner(t, "s2")
		o.kill()
		f.start(o)
		for _, n := range nodes {
			res, err := n.c.Exec(bg, "s2", &api.ExecRequest{Command: "echo still here"})
			if err != nil || strings.TrimSpace(res.Stdout) != "still here" {
				t.Fatalf("exec in s2 through %s after %s came back = %+v, %v", n.name, o.name, res, err)
			}
		}
	})
	t.Run("NodeDiesAndIsFenced", func(t *testing.T) {
		dead := owner(t, "s1")
		var other *node
		for _, n := range nodes {
			if n != dead {
				other = n
			}
		}
		var lost []string
		snap, err := reg.Snapshot(bg)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range snap.Sessions {
			if r.Node == dead.name {
				lost = append(lost, r.ID)
			}
		}
		dead.kill()
		died := time.Now()
		// Through another node, s1 answers 503 (retryable) within the
		// TTL and a second.
		eventually(t, ttl+time.Second, "s1 answers 503 through another node", func() bool {
			_, err := other.c.GetSession(bg, "s1")
			return status(err) == http.StatusServiceUnavailable
		})
		eventually(t, ttl+time.Second, dead.name+" leaves the registry", func() bool {
			ns, err := reg.Nodes(bg)
			return err == nil && len(ns) == 2
		})
		t.Logf("%s's entry gone %v after kill -9 (TTL %v)", dead.name, time.Since(died).Round(time.Millisecond), ttl)
		if _, err := other.c.GetSession(bg, "s1"); status(err) != http.StatusServiceUnavailable {
			t.Fatalf("s1 through %s with its owner gone = %v, want 503", other.name, err)
		}
		eventually(t, ttl+2*grace+2*time.Second, "s1 declared lost", func() bool {
			r, err := reg.GetSession(bg, daemon.BootstrapTenant, "s1")
			return err == nil && r.State == registry.Lost
		})
		t.Logf("%v lost %v after kill -9 (TTL %v + grace %v)", lost, time.Since(died).Round(time.Millisecond), ttl, grace)
		eventually(t, 2*time.Second, "s1 answers lost", func() bool {
			_, err := other.c.GetSession(bg, "s1")
			return status(err) == http.StatusNotFound && strings.Contains(err.Error(), "lost")
		})
		// Their quota is back, and placement skips the dead node.
		freeNow := func() int {
			ns, _ := reg.Nodes(bg)
			free := 0
			for _, n := range ns {
				free += n.Free
			}
			return free
		}
		free := freeNow()
		for _, id := range lost {
			if err := create(other, "re-"+id); err != nil {
				t.Fatalf("create with a lost session's quota: %v", err)
			}
			if o := owner(t, "re-"+id); o == dead {
				t.Fatalf("re-%s placed on the dead node", id)
			}
			free--
			eventually(t, 3*time.Second, "free capacity published", func() bool { return freeNow() == free })
		}
		// The dead node returns past its grace: it deletes what the
		// fleet gave away and keeps nothing.
		f.start(dead)
		eventually(t, 10*time.Second, dead.name+" fenced its lost sessions", func() bool {
			l, err := dead.c.ListSessions(bg)
			if err != nil {
				return false
			}
			// The list is the fleet's: what dead holds itself is what it
			// lists with its name and not as lost; none of it may be a
			// session the fleet declared lost.
			for _, s := range l {
				if s.Node == dead.name && s.State != "lost" && slices.Contains(lost, s.ID) {
					return false
				}
			}
			return true
		})
		for _, id := range lost {
			if err := other.c.DeleteSession(bg, id); err != nil {
				t.Errorf("delete lost record %s: %v", id, err)
			}
		}
	})
	t.Run("Cleanup", func(t *testing.T) {
		all, err := reg.Snapshot(bg)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all.Sessions {
			if err := n0.c.DeleteSession(bg, r.ID); err != nil {
				t.Errorf("delete %s through n0: %v", r.ID, err)
			}
		}
		if u, err := reg.Usage(bg, daemon.BootstrapTenant); err != nil || u != 0 {
			t.Errorf("usage after deleting everything = %d, %v; want 0", u, err)
		}
		if all, _ := reg.Snapshot(bg); len(all.Sessions) != 0 {
			t.Errorf("records left: %+v", all.Sessions)
		}
	})
	for _, n := range nodes {
		n.stop(t)
	}
	if ns, err := reg.Nodes(bg); err != nil || len(ns) != 0 {
		t.Errorf("nodes after every daemon stopped = %+v, %v; want none (a stop leaves at once)", ns, err)
	}
}

// embeddedEtcd starts three etcd members in the test process; they stop
// when t ends, after the daemons (cleanups run last first).
func embeddedEtcd(t testing.TB) []string {
	return embeddedCluster(t).Endpoints()
}

func embeddedCluster(t testing.TB) *etcdmember.Cluster {
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	cluster, err := etcdmember.StartCluster(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster
}

// processEtcd starts three etcd processes of bin on loopback and waits
// until they answer; they are killed when t ends. The ports are picked
// free and then given to etcd, so another test can take one in between:
// a start whose member exits is made again on other ports.
func processEtcd(t testing.TB, bin string) []string {
	var why []string
	for range 3 {
		clients, err := startProcessEtcd(t, bin)
		if err == nil {
			return clients
		}
		why = append(why, err.Error())
	}
	t.Fatalf("etcd processes did not start:\n%s", strings.Join(why, "\n"))
	return nil
}

// startProcessEtcd is one try of processEtcd: an error (with the members'
// output) when a member exited or they did not answer within 30 s.
func startProcessEtcd(t testing.TB, bin string) ([]string, error) {
	var initial, clients []string
	for i := range 3 {
		pp, err1 := etcdmember.FreePort()
		cp, err2 := etcdmember.FreePort()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i, pp))
		clients = append(clients, fmt.Sprintf("http://127.0.0.1:%d", cp))
	}
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var out syncBuffer
	exited := make(chan error, 3)
	stop := func() {
		for _, cmd := range cmds {
			cmd.Process.Kill()
		}
		for range cmds {
			<-exited
		}
	}
	for i := range 3 {
		peer := strings.SplitN(initial[i], "=", 2)[1]
		cmd := exec.Command(bin, "--name", fmt.Sprint("e", i), "--data-dir", filepath.Join(dir, fmt.Sprint("e", i)),
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--listen-client-urls", clients[i], "--advertise-client-urls", clients[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", fmt.Sprint("warren-test-", os.Getpid()),
			"--initial-cluster-state", "new", "--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "error")
		cmd.Env = []string{"PATH=/usr/bin:/bin"} // no ETCD_* from the host's environment
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		go func() { exited <- fmt.Errorf("etcd member e%d exited: %v", i, cmd.Wait()) }()
	}
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: clients})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	deadline := time.After(30 * time.Second)
	for {
		if res, err := reg.Ping(bg); err == nil && res.Endpoints == 3 && res.Leader != "" {
			t.Cleanup(stop)
			return clients, nil
		}
		select {
		case err := <-exited:
			exited <- err // stop waits for every member
			stop()
			return nil, fmt.Errorf("%v; its output:\n%s", err, out.String())
		case <-deadline:
			stop()
			return nil, fmt.Errorf("they did not answer within 30 s; their output:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// syncBuffer is a bytes.Buffer several processes' output goes to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFleet starts count daemons over the etcd at endpoints, and stops
// them when tb ends.
func newFleet(t testing.TB, count int, endpoints []string, setup ...func(i int, n *node)) (*fleetT, []*node, *etcdreg.Registry) {
	logf, err := os.Create(filepath.Join(t.TempDir(), "daemons.log"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fleetT{t: t, endpoints: strings.Join(endpoints, ","), prefix: fmt.Sprintf("/fleet%d-%d/", os.Getpid(), time.Now().UnixNano()), logf: logf}
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: endpoints, Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	var nodes []*node
	for i := range count {
		n := &node{name: fmt.Sprint("n", i), dataDir: testutil.TraversableDir(t),
			parent: fmt.Sprintf("%s%d-fleet%d", testutil.TestCgroupPrefix, os.Getpid(), i)}
		for _, f := range setup {
			f(i, n)
		}
		testutil.CheckLeaks(t, n.parent, filepath.Join(n.dataDir, "sessions"))
		nodes = append(nodes, n)
	}
	// Whatever happened, every node ends with a stop that deletes its
	// sessions (--shutdown destroy); a node the test killed is started
	// again for that, since its sandboxes outlived it.
	t.Cleanup(func() {
		for _, n := range nodes {
			if n.killed {
				f.start(n)
			}
			if n.running() {
				n.stop(t)
			}
		}
	})
	for _, n := range nodes {
		f.start(n)
	}
	return f, nodes, reg
}

// TestFleetEtcdFailures: etcd's leader stops, then two of its three
// members: the daemons keep running and serving their sessions (through
// other nodes too, from their cached routes), creates answer 503 at once
// while there is no quorum, and everything works again once it is back.
func TestFleetEtcdFailures(t *testing.T) {
	testutil.RequiresRoot(t)
	cluster := embeddedCluster(t)
	_, nodes, reg := newFleet(t, 2, cluster.Endpoints())
	n0, n1 := nodes[0], nodes[1]
	if _, err := n0.c.CreateSession(bg, &api.CreateSessionRequest{ID: "q1"}); err != nil {
		t.Fatal(err)
	}
	r, err := reg.GetSession(bg, daemon.BootstrapTenant, "q1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("q1 is on %s", r.Node)

	leader := cluster.Leader()
	cluster.Stop(leader)
	stopped := time.Now()
	eventually(t, 2*time.Second, "creates after the leader stopped", func() bool {
		_, err := n1.c.CreateSession(bg, &api.CreateSessionRequest{ID: "after-leader"})
		return err == nil
	})
	t.Logf("creates resumed %v after etcd's leader stopped", time.Since(stopped).Round(time.Millisecond))
	if err := cluster.Restart(leader); err != nil {
		t.Fatal(err)
	}

	// Quorum lost: two of three members down.
	down := []int{(leader + 1) % 3, (leader + 2) % 3}
	for _, i := range down {
		cluster.Stop(i)
	}
	start := time.Now()
	_, err = n0.c.CreateSession(bg, &api.CreateSessionRequest{ID: "no-quorum"})
	if status(err) != http.StatusServiceUnavailable {
		t.Fatalf("create without quorum = %v, want 503", err)
	}
	t.Logf("create without quorum answered 503 in %v", time.Since(start).Round(time.Millisecond))
	// At once when the member reached already knows it has no leader,
	// else within the registry's call timeout (3 s).
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("create without quorum took %v to answer", d)
	}
	// Sessions keep serving, through either node, for longer than a TTL.
	deadline := time.Now().Add(ttl + time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			res, err := n.c.Exec(bg, "q1", &api.ExecRequest{Command: "echo ok"})
			if err != nil || res.Stdout != "ok\n" {
				t.Fatalf("exec in q1 through %s without quorum = %+v, %v", n.name, res, err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range nodes {
		if !n.running() {
			t.Fatalf("%s exited without quorum: %v", n.name, n.err)
		}
	}
	for _, i := range down {
		if err := cluster.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 15*time.Second, "creates after quorum is back", func() bool {
		_, err := n0.c.CreateSession(bg, &api.CreateSessionRequest{ID: "back"})
		return err == nil
	})
	// n0's routes come back with its cache's next snapshot after the
	// outage: a session placed on n1 meanwhile may need a moment.
	for _, id := range []string{"q1", "after-leader", "back"} {
		eventually(t, 5*time.Second, "delete "+id+" through n0", func() bool {
			return n0.c.DeleteSession(bg, id) == nil
		})
	}
	eventually(t, 5*time.Second, "usage back to 0", func() bool {
		u, err := reg.Usage(bg, daemon.BootstrapTenant)
		return err == nil && u == 0
	})
}

// cutter is a TCP proxy to etcd endpoints that the test can cut: a node
// that reaches etcd through it loses etcd while its clients still reach it.
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// proxy starts a proxy to target and returns its URL.
func (c *cutter) proxy(t testing.TB, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	host := strings.TrimPrefix(target, "http://")
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			if c.cut {
				c.mu.Unlock()
				in.Close()
				continue
			}
			out, err := net.Dial("tcp", host)
			if err != nil {
				c.mu.Unlock()
				in.Close()
				continue
			}
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return "http://" + ln.Addr().String()
}

// newCuttableFleet starts a fleet of count nodes on embedded etcd in which
// node cuttable reaches etcd through a cutter's proxies.
func newCuttableFleet(t testing.TB, count, cuttable int) (*cutter, []*node, *etcdreg.Registry) {
	eps := embeddedEtcd(t)
	cut := &cutter{}
	var proxied []string
	for _, ep := range eps {
		proxied = append(proxied, cut.proxy(t, ep))
	}
	_, nodes, reg := newFleet(t, count, eps, func(i int, n *node) {
		if i == cuttable {
			n.etcd = strings.Join(proxied, ",")
		}
	})
	return cut, nodes, reg
}

// set cuts (true) or restores (false) the proxied connections.
func (c *cutter) set(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for _, conn := range c.conns {
			conn.Close()
		}
		c.conns = nil
	}
}

// TestFleetNodeCutOff: a node that loses etcd but not its clients stops
// taking sessions and keeps serving its own to clients that reach it;
// the fleet answers 503 for them, then lost after the grace; when the node
// reaches etcd again it deletes them (fencing) and takes sessions again.
func TestFleetNodeCutOff(t *testing.T) {
	testutil.RequiresRoot(t)
	cut, nodes, reg := newCuttableFleet(t, 2, 0)
	n0, n1 := nodes[0], nodes[1]
	// A session on n0: created through n0 until placement puts one there.
	var id string
	for i := 0; id == ""; i++ {
		cand := fmt.Sprint("c", i)
		if _, err := n0.c.CreateSession(bg, &api.CreateSessionRequest{ID: cand}); err != nil {
			t.Fatal(err)
		}
		if r, err := reg.GetSession(bg, daemon.BootstrapTenant, cand); err == nil && r.Node == "n0" {
			id = cand
		}
		if i > 20 {
			t.Fatal("placement never picked n0")
		}
	}
	cut.set(true)
	cutAt := time.Now()
	eventually(t, ttl+2*time.Second, "n0 gone from the registry", func() bool {
		ns, err := reg.Nodes(bg)
		return err == nil && len(ns) == 1
	})
	t.Logf("n0 gone from the registry %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	eventually(t, time.Second, id+" through n1 answers 503 while n0 is cut off", func() bool {
		_, err := n1.c.GetSession(bg, id)
		return status(err) == http.StatusServiceUnavailable
	})
	// n0 still serves its session to a client that reaches it directly,
	// and takes no new one: a create through it is refused (503) or, as
	// n0 refuses it for a reason of its own (it cannot record it), placed
	// on a node that can.
	if res, err := n0.c.Exec(bg, id, &api.ExecRequest{Command: "echo alive"}); err != nil || res.Stdout != "alive\n" {
		t.Fatalf("exec in %s on n0 while cut off = %+v, %v", id, res, err)
	}
	for i := range 3 {
		cid := fmt.Sprint("while-cut", i)
		_, err := n0.c.CreateSession(bg, &api.CreateSessionRequest{ID: cid})
		switch {
		case err == nil:
			r, err := reg.GetSession(bg, daemon.BootstrapTenant, cid)
			if err != nil || r.Node == n0.name {
				t.Fatalf("%s, created through n0 while it is cut off, is recorded as %+v, %v; want on another node", cid, r, err)
			}
			t.Logf("%s, created through n0 while it is cut off, went to %s", cid, r.Node)
		case status(err) != http.StatusServiceUnavailable:
			t.Fatalf("create through n0 while it is cut off = %v, want 503 or a session on another node", err)
		}
	}
	if l, err := n0.c.ListSessions(bg); err == nil {
		for _, s := range l {
			if s.Node == n0.name && s.ID != id {
				t.Fatalf("n0 took %s while cut off", s.ID)
			}
		}
	}
	eventually(t, 2*grace+2*time.Second, id+" declared lost", func() bool {
		r, err := reg.GetSession(bg, daemon.BootstrapTenant, id)
		return err == nil && r.State == registry.Lost
	})
	// Back: n0 registers again and, having read that its session was
	// given away, deletes it (the daemon did not restart: the fencing is
	// of a live node).
	cut.set(false)
	eventually(t, 10*time.Second, "n0 registered again", func() bool {
		ns, err := reg.Nodes(bg)
		return err == nil && len(ns) == 2
	})
	eventually(t, 10*time.Second, "n0 fenced "+id, func() bool {
		_, err := n0.c.GetSession(bg, id)
		return status(err) == http.StatusNotFound
	})
}

// streamAuthInterceptor sets Authorization on streaming calls (Connect's
// UnaryInterceptorFunc covers unary ones only).
type streamAuthInterceptor string

func (a streamAuthInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (a streamAuthInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(a))
		return conn
	}
}

func (a streamAuthInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
