package e2b

import (
	"net/http"
	"testing"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// TestPausedAcrossRestart checks that a paused sandbox, its E2B records
// and its envd access token survive a daemon restart (--shutdown=keep),
// and that connect then resumes it with its processes running.
func TestPausedAcrossRestart(t *testing.T) {
	h1 := daemontest.Start(t, func(c *config.Config) { c.Shutdown = config.ShutdownKeep })
	key := e2bKey(t, h1)
	var sb struct{ SandboxID, EnvdAccessToken string }
	if st := call(t, h1, key, "POST", "/sandboxes", `{"templateID":"base","timeout":300,"metadata":{"k":"v"}}`, &sb); st != 201 {
		t.Fatalf("create: %d", st)
	}
	if st, out := exec1(t, h1, sb.SandboxID, "(sleep 300 &) ; echo ok"); st != 200 {
		t.Fatalf("exec: %d %v", st, out)
	}
	if st := call(t, h1, key, "POST", "/sandboxes/"+sb.SandboxID+"/pause", "", nil); st != 204 {
		t.Fatalf("pause: %d", st)
	}
	h1.Stop()

	h2 := daemontest.Start(t, func(c *config.Config) {
		c.DataDir, c.CgroupParent, c.Shutdown = h1.DataDir, h1.Config.CgroupParent, config.ShutdownDestroy
	})
	var info struct {
		State    string
		Metadata map[string]string
	}
	if st := call(t, h2, key, "GET", "/sandboxes/"+sb.SandboxID, "", &info); st != 200 || info.State != "paused" || info.Metadata["k"] != "v" {
		t.Fatalf("after the restart: %d %+v", st, info)
	}
	var again struct{ EnvdAccessToken string }
	if st := call(t, h2, key, "POST", "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":60}`, &again); st != 201 || again.EnvdAccessToken != sb.EnvdAccessToken {
		t.Fatalf("connect after the restart: %d, token kept %v", st, again.EnvdAccessToken == sb.EnvdAccessToken)
	}
	if st, out := exec1(t, h2, sb.SandboxID, "pgrep -c -f '^sleep 300'"); st != 200 || out["stdout"] != "1\n" {
		t.Fatalf("after resume: %d %v, want the sleep still there", st, out)
	}
	req, _ := http.NewRequest("GET", h2.URL+"/e2b/health", nil)
	req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
	req.Header.Set("X-Access-Token", sb.EnvdAccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("envd /health with the token of before the restart: %v %v", resp, err)
	}
	resp.Body.Close()
}
