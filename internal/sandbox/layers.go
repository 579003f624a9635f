package sandbox

import (
	"context"
	"path/filepath"
	"strconv"

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
