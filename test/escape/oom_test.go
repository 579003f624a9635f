package escape

import (
	"testing"

	"github.com/warrenhq/warren/api"
)

// TestOOMKillBelongsToItsCall (issue 20, hole 7): oom_killed was looked up
// only when the call's last command died of SIGKILL, and then it reported
// every kill not reported yet. So a command whose OOM-killed process was not
// its last read false, and the kill was blamed on the next call that ended
// with SIGKILL. Now each call compares the workload's OOM kill counter
// before and after it.
func TestOOMKillBelongsToItsCall(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "oom", &api.CreateSessionRequest{Limits: &api.Limits{MemoryMB: 64}})
	res := b.sh(t, "tail /dev/zero; echo after")
	if res.ExitCode != 0 || res.Stdout != "after\n" || !res.OOMKilled {
		t.Errorf("a command whose first process met the OOM killer: exit %d stdout %q oom_killed %v; want 0, \"after\", true", res.ExitCode, res.Stdout, res.OOMKilled)
	}
	res = b.exec(t, &api.ExecRequest{Argv: []string{"sh", "-c", "kill -KILL $$"}})
	if res.Signal != "SIGKILL" || res.OOMKilled {
		t.Errorf("the next call, killed by itself: signal %q oom_killed %v; want SIGKILL, false (the earlier kill is not its)", res.Signal, res.OOMKilled)
	}
	res = b.sh(t, "true")
	if res.ExitCode != 0 || res.OOMKilled {
		t.Errorf("a call with no kill: exit %d oom_killed %v; want 0, false", res.ExitCode, res.OOMKilled)
	}
	b.alive(t, "the OOM kills")
}
