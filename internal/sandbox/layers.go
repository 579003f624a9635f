package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/snapshot"
	"github.com/warrenhq/warren/internal/spec"
)

// UpperDir is the host directory that holds the writable layer of the
// sandbox's root overlay: every change the sandbox made to its root
// filesystem, in overlayfs's format (whiteouts, opaque directories), owned
// by the sandbox's host ids. Its contents are the sandbox's to plant:
// whoever reads it must not follow its links.
func (sb *Sandbox) UpperDir() string { return filepath.Join(sb.writableDir(), "upper") }

// OverlayUpperDir is the writable layer of the sandbox's i-th extra overlay
// (Config.Overlays[i]).
func (sb *Sandbox) OverlayUpperDir(i int) string {
	return filepath.Join(sb.writableDir(), "ov"+strconv.Itoa(i), "upper")
}

// writableDir holds the sandbox's writable layers: its directory in the
// layer store, or its state directory without one.
func (sb *Sandbox) writableDir() string {
	if l := sb.rt.opts.Layers; l != nil {
		return filepath.Join(l.Dir(), sb.name)
	}
	return sb.dir
}

// IDs is the sandbox's block of host ids: its root is IDs().HostID on the
// host (with a user namespace), or every process of it runs as HostID
// (without).
func (sb *Sandbox) IDs() spec.IDRange { return sb.ids }

// Freeze stops every process of the sandbox, its agent included, with the
// cgroup freezer, so its files hold still until Thaw. A file call to the
// agent waits meanwhile.
func (sb *Sandbox) Freeze(ctx context.Context) error { return sb.cg.Freeze(ctx) }

// Thaw resumes the sandbox after Freeze.
func (sb *Sandbox) Thaw() error { return sb.cg.Thaw() }

// freezeTimeout bounds the wait for a sandbox's processes to freeze.
const freezeTimeout = 10 * time.Second

// CopyLayers freezes the sandbox's processes, copies its writable layers
// into the new directory dir (root/ for the root overlay's, ov/<i>/ for the
// i-th extra overlay's, whose parent dir/ov must exist) re-based to the
// canonical ids (see snapshot.Copy), and thaws the sandbox. It returns what
// was copied and how long the sandbox stood still. The layers are the
// sandbox's to plant: snapshot.Copy follows no link in them.
func (sb *Sandbox) CopyLayers(ctx context.Context, dir string, overlays int) (snapshot.Stats, time.Duration, error) {
	var total snapshot.Stats
	fctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	defer cancel()
	if err := sb.Freeze(fctx); err != nil {
		return total, 0, errdefs.New(errdefs.ErrUnavailable, "freeze the session's processes: %v", err)
	}
	start := time.Now()
	base := sb.IDs().HostID
	st, err := snapshot.Copy(ctx, filepath.Join(dir, "root"), sb.UpperDir(), base)
	total = st
	for i := 0; err == nil && i < overlays; i++ {
		st, err = snapshot.Copy(ctx, filepath.Join(dir, "ov", strconv.Itoa(i)), sb.OverlayUpperDir(i), base)
		total.Files, total.Dirs, total.Links = total.Files+st.Files, total.Dirs+st.Dirs, total.Links+st.Links
		total.Bytes, total.Skipped = total.Bytes+st.Bytes, total.Skipped+st.Skipped
	}
	frozen := time.Since(start)
	if terr := sb.Thaw(); terr != nil {
		// A sandbox left frozen answers nothing: the caller must hear it.
		terr = fmt.Errorf("thaw the sandbox after copying its layers (it answers nothing until thawed): %w", terr)
		if err == nil {
			err = terr
		} else {
			err = fmt.Errorf("%w; and %w", err, terr)
		}
	}
	return total, frozen, err
}
