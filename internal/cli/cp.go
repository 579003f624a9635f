package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/client"
)

func newCpCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between this machine and a session",
		Long: `Copy a file or directory between this machine and a session. Exactly one of
SRC and DST is SESSION:PATH; a relative PATH is taken from the session's
working directory at creation, and an empty one means that directory.

When DST is an existing directory, SRC is copied into it under its own name;
otherwise it is copied to DST. Directories are streamed as a tar and keep
their symlinks as links; nothing extracted locally can land outside DST.
A file keeps its permission bits. "-" as the local side reads a file from
stdin or writes it to stdout (a directory goes to stdout as a tar).`,
		Example: `  warren cp main.py demo:/workspace/
  warren cp ./src demo:project
  warren cp demo:/workspace/out.csv .
  warren cp demo:results ./results
  echo hi | warren cp - demo:greeting.txt`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := parseLocation(args[0]), parseLocation(args[1])
			switch {
			case src.remote && !dst.remote:
				return a.copyFromSession(cmd.Context(), src, dst.path)
			case !src.remote && dst.remote:
				return a.copyToSession(cmd.Context(), src.path, dst)
			default:
				return fmt.Errorf("exactly one of SRC and DST must be SESSION:PATH")
			}
		},
	}
}

// location is one side of a copy.
type location struct {
	remote  bool
	session string
	path    string
}

func (l location) String() string { return l.session + ":" + l.path }

// parseLocation tells SESSION:PATH from a local path. A colon after a slash
// belongs to a local path, so "./a:b" is local.
func parseLocation(s string) location {
	i := strings.IndexByte(s, ':')
	if i <= 0 || strings.ContainsAny(s[:i], `/\`) {
		return location{path: s}
	}
	p := s[i+1:]
	if p == "" {
		p = "."
	}
	return location{remote: true, session: s[:i], path: p}
}

// copyToSession copies the local file or directory src (or stdin, for "-")
// to dst.
func (a *app) copyToSession(ctx context.Context, src string, dst location) error {
	c := a.client()
	if src == "-" {
		if _, err := c.WriteFile(ctx, dst.session, dst.path, a.stdin, 0); err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
		return nil
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file or a directory", src)
	}
	target, err := remoteTarget(ctx, c, dst, filepath.Base(src), fi.IsDir())
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := c.WriteFile(ctx, dst.session, target, f, fi.Mode()); err != nil {
			return fmt.Errorf("write %s:%s: %w", dst.session, target, err)
		}
		return nil
	}
	tr, wait := tarDir(src, tarOptions{skipped: func(name string) {
		a.warn("skipped %s: not a regular file, directory or symlink", filepath.Join(src, name))
	}})
	_, upErr := c.UploadArchive(ctx, dst.session, target, tr)
	if err := wait(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("archive %s: %w", src, err)
	}
	if upErr != nil {
		return fmt.Errorf("upload %s to %s:%s: %w", src, dst.session, target, upErr)
	}
	return nil
}

// remoteTarget returns the path in the session that a local file or
// directory named base is copied to: inside dst when dst is an existing
// directory (or ends in "/"), else dst itself.
func remoteTarget(ctx context.Context, c *client.Client, dst location, base string, isDir bool) (string, error) {
	st, err := c.StatFile(ctx, dst.session, dst.path)
	switch {
	case err == nil && st.Type == "dir":
		return path.Join(dst.path, base), nil
	case err == nil && isDir:
		return "", fmt.Errorf("%s exists and is not a directory", dst)
	case err == nil:
		return dst.path, nil
	case client.IsNotFound(err):
		if strings.HasSuffix(dst.path, "/") {
			return path.Join(dst.path, base), nil
		}
		return dst.path, nil
	default:
		return "", fmt.Errorf("stat %s: %w", dst, err)
	}
}

// copyFromSession copies the file or directory src of a session to the
// local path dst (or stdout, for "-").
func (a *app) copyFromSession(ctx context.Context, src location, dst string) error {
	c := a.client()
	st, err := c.StatFile(ctx, src.session, src.path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	base := path.Base(st.Path)
	if st.Path == "" {
		base = path.Base(src.path)
	}
	isDir := st.Type == "dir"

	// Where it goes, checked before anything is downloaded.
	target := dst
	if dst != "-" {
		fi, err := os.Stat(dst)
		switch {
		case err == nil && fi.IsDir():
			target = filepath.Join(dst, base)
		case err == nil && isDir:
			return fmt.Errorf("%s exists and is not a directory", dst)
		case err == nil:
		case !errors.Is(err, fs.ErrNotExist):
			return err
		case !isDir && strings.HasSuffix(dst, string(filepath.Separator)):
			return fmt.Errorf("directory %s does not exist", dst)
		}
	}

	if isDir {
		rc, err := c.DownloadArchive(ctx, src.session, src.path)
		if err != nil {
			return fmt.Errorf("download %s: %w", src, err)
		}
		defer rc.Close()
		if dst == "-" {
			if _, err := io.Copy(a.stdout, rc); err != nil {
				return fmt.Errorf("download %s: %w", src, err)
			}
			return nil
		}
		err = extractTar(rc, target, func(name string) {
			a.warn("skipped %s: not a regular file, directory or link", filepath.Join(target, name))
		})
		if err != nil {
			return fmt.Errorf("download %s to %s: %w", src, target, err)
		}
		return nil
	}

	rc, err := c.ReadFile(ctx, src.session, src.path)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	defer rc.Close()
	if dst == "-" {
		if _, err := io.Copy(a.stdout, rc); err != nil {
			return fmt.Errorf("read %s: %w", src, err)
		}
		return nil
	}
	if err := writeLocalFile(target, rc, parseMode(st.Mode), st.MTime); err != nil {
		return fmt.Errorf("read %s to %s: %w", src, target, err)
	}
	return nil
}

// parseMode parses octal permission bits such as "0644", keeping only the
// rwx bits; a mode it cannot parse gives 0644.
func parseMode(s string) fs.FileMode {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0o644
	}
	return fs.FileMode(m) & fs.ModePerm
}

// writeLocalFile writes r to the file target through a temporary file in
// the same directory, so that a failed copy leaves target as it was.
func writeLocalFile(target string, r io.Reader, perm fs.FileMode, mtime time.Time) error {
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".warren-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return err
	}
	ok = true
	if !mtime.IsZero() {
		_ = os.Chtimes(target, mtime, mtime) // a time not kept, as cp without -p
	}
	return nil
}
