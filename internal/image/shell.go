package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// ShellPath is the shell every session's commands run through (the agent
// prefers bash where the image has it, and falls back to it).
const ShellPath = "/bin/sh"

// maxLinkHops bounds the symlinks followed to resolve a path, as the
// kernel's ELOOP does (40).
const maxLinkHops = 40

// checkShell checks that rootfs has a working ShellPath, resolved as the
// sandbox will resolve it: an absolute link target starts at the image's
// root, not the host's. A link that leads nowhere in the image, such as
// the host-absolute links of "busybox --install -s", is refused naming the
// link; so is a ShellPath that is missing, unless optional (an OCI image
// made to run one program, such as a distroless one, has no shell, and
// runs with argv). Otherwise the failure would come at the first command,
// as "session shell: start /bin/sh: no such file or directory", which
// reads like a daemon outage. The errors are errdefs.ErrInvalidArgument.
func checkShell(rootfs string, optional bool) error {
	err := resolveIn(rootfs, ShellPath)
	var missing *notInImageError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &missing) && missing.chain == nil:
		if optional {
			return nil
		}
		return errdefs.New(errdefs.ErrInvalidArgument, "the image has no %s, which runs every session's commands: add a shell (with busybox: ln -s busybox ROOTFS/bin/sh)", ShellPath)
	case errors.As(err, &missing):
		last := missing.chain[len(missing.chain)-1]
		where := last.link + " -> " + last.target
		if missing.path != path.Clean(last.target) {
			where += " (" + missing.path + ")"
		}
		return errdefs.New(errdefs.ErrInvalidArgument, "%s is a broken link: %s is not in the image. Link targets resolve inside the image, never on the host that made them (busybox --install -s makes host-absolute links); make the link relative, such as ln -sf busybox ROOTFS/bin/sh",
			ShellPath, where)
	default:
		return errdefs.New(errdefs.ErrInvalidArgument, "%s: %v", ShellPath, err)
	}
}

// hop is one symlink followed by resolveIn.
type hop struct{ link, target string }

// notInImageError says that path is missing from the image, reached
// through the links of chain (none if p itself is missing).
type notInImageError struct {
	path  string
	chain []hop
}

func (e *notInImageError) Error() string { return e.path + " is not in the image" }

// resolveIn follows p (absolute, in the image's terms) inside root with
// chroot semantics, and returns nil if it ends at an executable regular
// file. Only directories that are not links are ever descended into, so
// the walk never leaves root.
func resolveIn(root, p string) error {
	var chain []hop
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(next)))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) || (err == nil && len(rest) > 0 && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0) {
			return &notInImageError{path: path.Join(append([]string{next}, rest...)...), chain: chain}
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if len(chain) == maxLinkHops {
			return fmt.Errorf("more than %d links to follow from %s (a loop?)", maxLinkHops, p)
		}
		target, err := os.Readlink(filepath.Join(root, filepath.FromSlash(next)))
		if err != nil {
			return err
		}
		chain = append(chain, hop{link: next, target: target})
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(cur)))
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file (mode %v)", cur, fi.Mode())
	}
	return nil
}
