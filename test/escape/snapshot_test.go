package escape

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// TestSnapshotSetuid: a session makes a setuid-root binary and a huge
// sparse file, then snapshots itself. Re-based to canonical ids the binary
// would be a setuid file of the host's real root on the data filesystem:
// no snapshot file on the host may carry setuid or setgid, nor may the
// export. The sparse file makes the export too large: it is refused as
// too_large instead of streaming zeros.
func TestSnapshotSetuid(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "suidsnap", nil)
	b.out(t, "cp /bin/true /workspace/suid && chmod 6755 /workspace/suid && stat -c %a /workspace/suid")
	if _, err := h.Client.Snapshot(bg, b.id, "withsuid"); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var found []string
	filepath.WalkDir(filepath.Join(h.DataDir, "snapshots"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Errorf("setuid/setgid files on the host's data filesystem after a snapshot: %v", found)
	}
	rc, err := h.Client.ExportSnapshot(bg, "withsuid")
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	zr, err := zstd.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	seen := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read export: %v", err)
		}
		if strings.HasSuffix(hdr.Name, "workspace/suid") {
			seen = true
			if hdr.Mode&0o6000 != 0 {
				t.Errorf("the export carries %s with mode %o", hdr.Name, hdr.Mode)
			}
		}
	}
	zr.Close()
	rc.Close()
	if !seen {
		t.Errorf("the export has no workspace/suid")
	}

	// A 10 TiB sparse file: the export is refused, at once.
	res := b.sh(t, "truncate -s 10T /workspace/huge && echo ok")
	if res.Stdout != "ok\n" {
		t.Skipf("the session cannot make a 10 TiB sparse file: %+v", res)
	}
	if _, err := h.Client.Snapshot(bg, b.id, "huge"); err != nil {
		t.Skipf("snapshot with a 10 TiB sparse file: %v", err)
	}
	rc, err = h.Client.ExportSnapshot(bg, "huge")
	if err == nil {
		n, rerr := io.Copy(io.Discard, io.LimitReader(rc, 64<<20))
		rc.Close()
		t.Fatalf("export of a snapshot with a 10 TiB sparse file answered and streamed %d bytes (%v); want too_large", n, rerr)
	}
	if codeOf(err) != "too_large" {
		t.Errorf("export of a 10 TiB sparse file: %v, want too_large", err)
	}
}
