package escape

import (
	"context"
	"os"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

func TestExplore(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := context.Background()
	if _, err := h.Client.CreateSession(ctx, &api.CreateSessionRequest{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(os.Getenv("EXPLORE"))
	res, err := h.Client.Exec(ctx, "x", &api.ExecRequest{Command: string(b), TimeoutMs: 60000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit %d\nSTDOUT:\n%s\nSTDERR:\n%s", res.ExitCode, res.Stdout, res.Stderr)
}
