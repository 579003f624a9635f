package mcpnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// asWarren makes this test binary run as warren (see TestMain): the
// Inspector's stdio mode starts it as `warren mcp`.
const asWarren = "WARREN_MCP_NODE_AS_WARREN"

// inspector runs the MCP Inspector's CLI (npx @modelcontextprotocol/inspector
// --cli ...) with args and decodes the JSON it prints.
func inspector(t *testing.T, node string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	cmd := exec.CommandContext(ctx, node, append([]string{bin, "--cli"}, args...)...)
	// Its catalog and secrets go to a directory of the test's, not $HOME.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// A tool error exits 5, with the result on stdout as ever.
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 5 && strings.Contains(stderr.String(), "tool_is_error") {
		err = nil
	}
	if err != nil {
		t.Fatalf("inspector --cli %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("inspector --cli %s: stderr: %s", args[len(args)-1], stderr.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("inspector --cli %s printed %q, not JSON: %v (stderr: %s)", strings.Join(args, " "), out, err, stderr.String())
	}
	return v
}

// TestInspectorCLI drives warren with the MCP Inspector's CLI, a client
// warren's code shares nothing with: tools/list and tools/call against
// /mcp (with the API key header) and against `warren mcp` on stdio.
func TestInspectorCLI(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (.ci/run installs it)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@modelcontextprotocol", "inspector")); err != nil {
		t.Skip("needs the npm packages: run npm ci in test/mcp-node (.ci/run does)")
	}
	// The Inspector asks for node 22.19 (its engines field); it runs on
	// 20, the oldest tried. Debian 12's own nodejs is 18.
	v, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < 20 {
		t.Skipf("the MCP Inspector needs node 20 or later, this is %s", strings.TrimSpace(string(v)))
	}
	h := daemontest.Start(t, nil)
	// A proxy in front of /mcp notes the protocol revision of each request.
	var mu sync.Mutex
	revisions := map[string]int{}
	target, _ := url.Parse(h.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		revisions[r.Header.Get("Mcp-Protocol-Version")]++
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	defer func() { t.Logf("MCP-Protocol-Version of the Inspector's requests: %v", revisions) }()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		target []string
	}{
		{"http", []string{proxy.URL + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + h.AdminKey}},
		// The server's own flags would read as the Inspector's: its
		// address and key go in the environment (-e).
		{"stdio", []string{"-e", asWarren + "=1", "-e", "WARREN_ADDR=" + h.URL, "-e", "WARREN_TOKEN=" + h.AdminKey, "--transport", "stdio", self, "mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// --strict: the Inspector's schema portability check fails the
			// run (exit 6) on any error-severity finding.
			v := inspector(t, node, append(tc.target, "--method", "tools/list", "--strict")...)
			tools, _ := v["tools"].([]any)
			if len(tools) != 14 {
				t.Fatalf("tools/list: %d tools, want 14: %v", len(tools), v)
			}
			for _, x := range tools {
				tool, _ := x.(map[string]any)
				ann, _ := tool["annotations"].(map[string]any)
				for _, hint := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
					if _, ok := ann[hint].(bool); !ok {
						t.Errorf("tool %v: %s not set (annotations %v)", tool["name"], hint, ann)
					}
				}
			}
			id := "insp-" + tc.name
			call := func(tool string, args ...string) (structured map[string]any, text string, isError bool) {
				t.Helper()
				v := inspector(t, node, append(append(tc.target, "--method", "tools/call", "--tool-name", tool, "--tool-arg"), args...)...)
				structured, _ = v["structuredContent"].(map[string]any)
				content, _ := v["content"].([]any)
				for _, c := range content {
					c, _ := c.(map[string]any)
					text += fmt.Sprint(c["text"])
				}
				return structured, text, v["isError"] == true
			}
			if s, text, isErr := call("create_session", "id="+id); isErr || s["id"] != id || s["state"] != "running" {
				t.Fatalf("create_session: %v %q", s, text)
			}
			s, text, isErr := call("exec", "session_id="+id, "command=echo hello from $0; echo oops >&2; (exit 3)")
			if isErr || s["stdout"] != "hello from bash\n" || s["stderr"] != "oops\n" || s["exit_code"] != float64(3) ||
				!strings.Contains(text, "exit_code: 3") || !strings.Contains(text, "stdout:\nhello from bash\n") {
				t.Errorf("exec: structured %v, text %q", s, text)
			}
			if _, text, isErr := call("exec", "session_id=no-such-session", "command=echo never"); !isErr || !strings.HasPrefix(text, "not_found: ") {
				t.Errorf("exec in a missing session: %q (error %v), want a not_found tool error", text, isErr)
			}
			if got, err := h.Client.GetSession(context.Background(), id); err != nil || got.State != "running" {
				t.Errorf("the daemon does not have the session the Inspector created: %v", err)
			}
		})
	}
}
