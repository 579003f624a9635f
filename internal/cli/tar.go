package cli

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// tarOptions says how a local directory is archived.
type tarOptions struct {
	// keepOwner keeps the files' uids and gids (an image's root
	// filesystem); otherwise entries belong to uid 0, the sandbox's user.
	keepOwner bool
	// skipped is told about files that a tar cannot hold (sockets, devices
	// and the like), which are left out.
	skipped func(name string)
}

// tarDir streams a tar of the contents of dir, made on the fly as the
// returned reader is read. The caller must call wait once done with the
// reader; it returns the error of making the tar, if any.
func tarDir(dir string, opts tarOptions) (r io.Reader, wait func() error) {
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := writeTar(pw, dir, opts)
		pw.CloseWithError(err)
		errc <- err
	}()
	return pr, func() error {
		pr.Close() // unblocks the writer if the reader stopped early
		return <-errc
	}
}

// writeTar writes a tar of the contents of dir to w: entry names relative to
// dir, symlinks stored as links and never followed.
func writeTar(w io.Writer, dir string, opts tarOptions) error {
	// dir itself may be a symlink to the directory to archive.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	err = filepath.WalkDir(root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if full == root {
			return nil
		}
		rel, err := filepath.Rel(root, full)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return addToTar(tw, full, name, fi, opts)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// addToTar writes one entry (and a regular file's contents).
func addToTar(tw *tar.Writer, full, name string, fi fs.FileInfo, opts tarOptions) error {
	mode := fi.Mode()
	link := ""
	switch {
	case mode.IsRegular(), mode.IsDir():
	case mode&fs.ModeSymlink != 0:
		var err error
		if link, err = os.Readlink(full); err != nil {
			return err
		}
	default:
		if opts.skipped != nil {
			opts.skipped(name)
		}
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	hdr.Name = name
	if mode.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	if !opts.keepOwner {
		hdr.Uid, hdr.Gid = 0, 0
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !mode.IsRegular() {
		return nil
	}
	f, err := os.Open(full)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	return nil
}

// extractTar extracts the tar that r yields into the directory dst, which is
// created. Nothing lands outside dst: names with "..", absolute symlinks and
// symlinks that point outside are contained by os.Root, which refuses to
// resolve any path that would leave it. Ownership is not restored;
// permission bits are, without setuid, setgid and sticky.
func extractTar(r io.Reader, dst string, skipped func(name string)) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	type dirMeta struct {
		name  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirMeta
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		name := path.Clean(strings.TrimLeft(hdr.Name, "/"))
		if name == "." {
			continue
		}
		if name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("tar entry %q leaves the target directory", hdr.Name)
		}
		if err := extractEntry(root, name, hdr, tr, skipped); err != nil {
			return fmt.Errorf("extract %q: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirMeta{name, hdr.FileInfo().Mode().Perm(), hdr.ModTime})
		}
	}
	// Directories last and deepest first: their contents are written, and a
	// read-only directory no longer needs to be written into.
	for _, d := range slices.Backward(dirs) {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return err
		}
		_ = root.Chtimes(d.name, d.mtime, d.mtime) // times are kept where possible, as tar does
	}
	return nil
}

// extractEntry creates one entry of a tar inside root.
func extractEntry(root *os.Root, name string, hdr *tar.Header, r io.Reader, skipped func(string)) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	perm := hdr.FileInfo().Mode().Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		return root.MkdirAll(name, 0o755)
	case tar.TypeReg:
		// Replace what is there rather than write through it (it may be
		// a symlink).
		removeNonDir(root, name)
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		if err := f.Chmod(perm); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	case tar.TypeSymlink:
		removeNonDir(root, name)
		return root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		target := path.Clean(strings.TrimLeft(hdr.Linkname, "/"))
		if target == ".." || strings.HasPrefix(target, "../") {
			return fmt.Errorf("hard link to %q leaves the target directory", hdr.Linkname)
		}
		removeNonDir(root, name)
		return root.Link(target, name)
	default:
		if skipped != nil {
			skipped(name)
		}
		return nil
	}
}

// removeNonDir removes name unless it is a directory or absent.
func removeNonDir(root *os.Root, name string) {
	if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
		_ = root.Remove(name) // the create that follows fails if it stays
	}
}
