package escape

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
)

// TestNoHostPathsInSysOrMountinfo (issue 20, hole 7): a session with a
// workspace saw its host image's path. The workspace (and every layer image)
// is a loop device, and sysfs's loop/backing_file named the file behind each
// loop device on the host: this session's, its neighbours', and other
// daemons' data directories. The host's virtual block devices are masked,
// and the mount table names no host path.
func TestNoHostPathsInSysOrMountinfo(t *testing.T) {
	h := startDaemon(t, nil)
	if _, err := h.Client.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "ws"}); err != nil {
		t.Fatal(err)
	}
	b := newBox(t, h, "paths", &api.CreateSessionRequest{Workspace: "ws"})
	res := b.sh(t, `cat /proc/self/mountinfo /proc/self/mounts
for f in /sys/block/*/loop/backing_file /sys/class/block/*/loop/backing_file /sys/devices/virtual/block/*/loop/backing_file; do cat "$f"; done 2>/dev/null
ls /sys/devices/virtual/block`)
	out := res.Stdout
	for _, p := range []string{h.DataDir, filepath.Dir(h.DataDir), "layer-images", ".img"} {
		if strings.Contains(out, p) {
			t.Errorf("a host path (%s) shows inside:\n%s", p, out)
		}
	}
	if !strings.Contains(out, " /workspace ") {
		t.Errorf("the workspace is not in the mount table:\n%s", out)
	}
}
