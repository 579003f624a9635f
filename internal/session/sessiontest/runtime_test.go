package sessiontest

import (
	"testing"

	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/runtimetest"
)

// TestRuntime holds the fake to the real runtime's contract.
func TestRuntime(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) *runtimetest.Env {
		rt := NewRuntime(t.TempDir())
		return &runtimetest.Env{
			Runtime: rt,
			Config: func(name string) *session.SandboxConfig {
				return &session.SandboxConfig{Name: name, Hostname: "box", BaseDir: "/workspace", Env: []string{"PATH=/bin"}}
			},
			// The fake's "host" is the runtime itself: the next daemon
			// finds it as this one left it.
			Reopen: func(*testing.T) session.Runtime { return rt },
		}
	})
}
