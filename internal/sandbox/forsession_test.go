package sandbox

import (
	"testing"

	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/runtimetest"
)

// TestSessionRuntime runs the runtime conformance suite on the real
// runtime, through the interface the manager drives.
func TestSessionRuntime(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) *runtimetest.Env {
		e := newEnv(t)
		return &runtimetest.Env{
			Runtime: ForSessions(e.rt),
			Config: func(name string) *session.SandboxConfig {
				c := &session.SandboxConfig{Name: name, Hostname: "box", Lower: []string{e.base.RootFS}, BaseDir: "/workspace",
					Env: e.base.Env, MemoryBytes: 256 << 20, Pids: 128, CPUs: 1}
				for _, d := range e.base.HostDirs {
					c.Overlays = append(c.Overlays, session.SandboxOverlay{Source: d, Target: d})
				}
				return c
			},
			Reopen: func(t *testing.T) session.Runtime {
				next, err := NewRuntime(e.rt.Dir(), e.rt.Cgroups(), e.rt.Options())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { next.Close() })
				return ForSessions(next)
			},
		}
	})
}
