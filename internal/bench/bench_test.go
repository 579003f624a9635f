package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// TestRun runs the harness for a few repetitions against a real daemon:
// every measurement is there, the density run cleans up after itself, and
// the JSON output decodes.
func TestRun(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Auth.RateLimit = 0 })
	rep, err := Run(context.Background(), h.Client, Options{N: 3, Warmup: 1, Clients: 2, Duration: 200 * time.Millisecond, Density: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fork+exec /bin/true", "create session (cold)", "delete session", "exec echo hi (builtin)",
		"exec /bin/true (argv)", "write 1 MiB file", "read 1 MiB file", "streamed exec, first byte",
		"exec true, 2 clients (shell)", "3 idle sessions created", "3 sessions deleted"}
	got := map[string]Result{}
	for _, r := range rep.Results {
		got[r.Name] = r
	}
	for _, w := range want {
		r, ok := got[w]
		if !ok {
			t.Errorf("no result %q", w)
			continue
		}
		if r.Unit == "ms" && (r.N != 3 || r.P50 <= 0) {
			t.Errorf("%s: %+v", w, r)
		}
	}
	if r := got["exec /bin/true (argv)"]; r.Floor != "fork+exec /bin/true" || r.Ratio <= 0 {
		t.Errorf("exec /bin/true has no floor: %+v", r)
	}
	list, err := h.Client.ListSessions(context.Background())
	if err != nil || len(list) != 0 {
		t.Errorf("sessions left after the run: %d, %v", len(list), err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Results) != len(rep.Results) {
		t.Errorf("JSON round trip: %v", err)
	}
	buf.Reset()
	rep.WriteTable(&buf)
	if !strings.Contains(buf.String(), "create session (cold)") {
		t.Errorf("table:\n%s", buf.String())
	}
}
