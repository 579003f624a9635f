package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The base image needs no download: the sandbox sees the host's /usr (and
// on hosts without merged /usr its /bin, /sbin and /lib*) through
// per-session overlays, on top of a small skeleton with a synthesized /etc.

// baseEnv is the base image's default environment. TERM is left unset: the
// session shell runs without a PTY.
var baseEnv = []string{
	"PATH=" + defaultPath,
	"HOME=/root",
	"LANG=C.UTF-8",
	"USER=root",
	"LOGNAME=root",
}

// baseWorkingDir is the base image's default cwd.
const baseWorkingDir = "/workspace"

// libDirs are the top-level host directories that are symlinks into /usr on
// a merged-/usr host and real directories elsewhere.
var libDirs = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// skeletonDirs are the base image's empty directories, in creation order.
var skeletonDirs = []struct {
	path     string
	mode     fs.FileMode
	uid, gid int
}{
	{"etc", 0o755, 0, 0},
	{"usr", 0o755, 0, 0},
	{"tmp", 0o777 | fs.ModeSticky, 0, 0},
	{"root", 0o700, 0, 0},
	{"home", 0o755, 0, 0},
	{"home/sandbox", 0o755, 1000, 1000},
	{"var", 0o755, 0, 0},
	{"var/tmp", 0o777 | fs.ModeSticky, 0, 0},
	{"var/log", 0o755, 0, 0},
	{"var/cache", 0o755, 0, 0},
	{"var/lib", 0o755, 0, 0},
	{"run", 0o755, 0, 0},
	{"proc", 0o555, 0, 0},
	{"dev", 0o755, 0, 0},
	{"sys", 0o555, 0, 0},
	{"workspace", 0o755, 0, 0},
	{"opt", 0o755, 0, 0},
	{"srv", 0o755, 0, 0},
	{"mnt", 0o755, 0, 0},
	{"media", 0o755, 0, 0},
}

// etcAllowList is everything of the host's /etc the base image copies:
// harmless files that programs need. Entries are paths relative to /etc;
// a directory is copied with its contents. Symlinks are copied as symlinks
// and never followed, and files or directories other users may not read
// are skipped even here. Nothing else of the host's /etc is copied: not
// shadow, gshadow, passwd, group, sudoers, ssh/, ssl/private/,
// machine-id, ...
var etcAllowList = []string{
	"alternatives", // Debian's command alternatives: awk, editor, ... break without it
	"ssl/certs",
	"ssl/openssl.cnf",
	"ca-certificates.conf",
	"ld.so.cache",
	"ld.so.conf",
	"ld.so.conf.d",
	"localtime",
	"timezone",
	"os-release",
	"debian_version",
	"profile",
	"profile.d",
	"bash.bashrc",
	"inputrc",
	"shells",
	"login.defs",
	"mime.types",
	"protocols",
	"services",
	"ethertypes",
	"rpc",
	"environment",
	"issue",
}

// etcFiles are the synthesized files of the base image's /etc.
var etcFiles = []struct {
	name    string
	mode    fs.FileMode
	content string
}{
	{"passwd", 0o644, "" +
		"root:x:0:0:root:/root:/bin/bash\n" +
		"sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/bash\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	// tty is gid 5 because devpts gives terminals that group.
	{"group", 0o644, "" +
		"root:x:0:\n" +
		"tty:x:5:\n" +
		"users:x:100:\n" +
		"sandbox:x:1000:\n" +
		"nogroup:x:65534:\n"},
	// Locked entries only, never the host's.
	{"shadow", 0o640, "" +
		"root:*::0:99999:7:::\n" +
		"sandbox:*::0:99999:7:::\n" +
		"nobody:*::0:99999:7:::\n"},
	{"gshadow", 0o640, "" +
		"root:*::\n" +
		"tty:*::\n" +
		"users:*::\n" +
		"sandbox:*::\n" +
		"nogroup:*::\n"},
	{"hosts", 0o644, "" +
		"127.0.0.1\tlocalhost\n" +
		"127.0.1.1\tsandbox\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"ff02::1\tip6-allnodes\n" +
		"ff02::2\tip6-allrouters\n"},
	{"hostname", 0o644, "sandbox\n"},
	{"resolv.conf", 0o644, "# This session has no network, so there is no name server to ask.\n"},
	{"nsswitch.conf", 0o644, "" +
		"passwd:         files\n" +
		"group:          files\n" +
		"shadow:         files\n" +
		"gshadow:        files\n" +
		"hosts:          files dns\n" +
		"networks:       files\n" +
		"protocols:      files\n" +
		"services:       files\n" +
		"ethers:         files\n" +
		"rpc:            files\n"},
}

// EnsureBase builds the built-in "base" image from the host and points the
// name "base" at it. The skeleton is built afresh in tmp/ and stored
// content-addressed, so on an unchanged host the digest stays the same and
// the stored content is reused.
//
// A full disk (ENOSPC, EDQUOT) must not keep a daemon from starting: then
// EnsureBase returns an errdefs.ErrUnavailable error together with the
// base image already stored, if there is one (it may predate a change of
// the host's /etc, and is otherwise sound), or a nil image, and Get("base")
// answers with the same class until a later EnsureBase succeeds.
func (s *Store) EnsureBase() (*Image, error) {
	img, err := s.buildBaseImage()
	if err == nil || !diskFull(err) {
		s.mu.Lock()
		s.baseErr = nil
		s.mu.Unlock()
		return img, err
	}
	err = errdefs.New(errdefs.ErrUnavailable, "the data directory's disk is full: %w", err)
	if prev, gerr := s.Get(BaseName); gerr == nil {
		return prev, err
	}
	s.mu.Lock()
	s.baseErr = err
	s.mu.Unlock()
	return nil, err
}

// diskFull reports whether err says the filesystem or a quota ran out.
func diskFull(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

func (s *Store) buildBaseImage() (*Image, error) {
	ctx := context.Background()
	work, err := os.MkdirTemp(s.tmpDir(), "base-*")
	if err != nil {
		return nil, fmt.Errorf("build base image: %w", err)
	}
	defer os.RemoveAll(work)
	rootfs := filepath.Join(work, "rootfs")
	hostDirs, err := s.buildBase(ctx, rootfs)
	if err != nil {
		return nil, fmt.Errorf("build base image: %w", err)
	}
	cfg := config{HostDirs: hostDirs, Env: baseEnv, WorkingDir: baseWorkingDir}
	return s.commit(ctx, BaseName, work, cfg, provenance{Source: "host", Layers: 1})
}

// buildBase writes the base skeleton into rootfs, which must not exist,
// and returns the host directories the sandbox shows from the host.
func (s *Store) buildBase(ctx context.Context, rootfs string) ([]string, error) {
	if err := mkdirOwned(rootfs, 0o755, 0, 0); err != nil {
		return nil, err
	}
	for _, d := range skeletonDirs {
		if err := mkdirOwned(filepath.Join(rootfs, d.path), d.mode, d.uid, d.gid); err != nil {
			return nil, err
		}
	}
	hostDirs := []string{filepath.Join(s.host, "usr")}
	for _, d := range libDirs {
		hp := filepath.Join(s.host, d)
		fi, err := os.Lstat(hp)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			// Merged /usr: bin -> usr/bin. The link is resolved inside the
			// sandbox, so its target is copied as it is.
			target, err := os.Readlink(hp)
			if err != nil {
				return nil, err
			}
			if err := os.Symlink(target, filepath.Join(rootfs, d)); err != nil {
				return nil, err
			}
		case fi.IsDir():
			if err := mkdirOwned(filepath.Join(rootfs, d), 0o755, 0, 0); err != nil {
				return nil, err
			}
			hostDirs = append(hostDirs, hp)
		}
	}
	if err := s.copyHostEtc(ctx, filepath.Join(rootfs, "etc")); err != nil {
		return nil, err
	}
	for _, f := range etcFiles {
		if err := writeNew(filepath.Join(rootfs, "etc", f.name), f.content, f.mode); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(filepath.Join(rootfs, "etc", "mtab")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.Symlink("../proc/self/mounts", filepath.Join(rootfs, "etc", "mtab")); err != nil {
		return nil, err
	}
	return hostDirs, nil
}

// writeNew writes a new root-owned file with exactly mode. Whatever was at
// p goes first, and O_EXCL never follows a symlink: a synthesized file can
// never write through a link copied from the host.
func writeNew(p, content string, mode fs.FileMode) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdirOwned creates dir with exactly mode (not subject to the umask),
// owned by uid:gid.
func mkdirOwned(dir string, mode fs.FileMode, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// copyHostEtc copies the entries of etcAllowList from the host's /etc into
// dst. A missing entry is left out, and so is one whose parent on the host
// is not a plain directory others may read.
func (s *Store) copyHostEtc(ctx context.Context, dst string) error {
	src, err := openDir(filepath.Join(s.host, "etc"))
	if err != nil {
		return err
	}
	defer src.Close()
	dd, err := openDir(dst)
	if err != nil {
		return err
	}
	defer dd.Close()
	c := &copier{ctx: ctx, maxBytes: DefaultMaxImportBytes, maxEntries: DefaultMaxImportEntries, publicOnly: true}
	for _, p := range etcAllowList {
		if err := c.copyHostEntry(src, dd, strings.Split(p, "/")); err != nil {
			return fmt.Errorf("copy /etc/%s: %w", p, err)
		}
	}
	return nil
}

// copyHostEntry copies src/comps... to dst/comps..., creating the parent
// directories with the host's owner and mode.
func (c *copier) copyHostEntry(src, dst *os.File, comps []string) error {
	name := comps[0]
	st, err := lstatAt(src, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(comps) == 1 {
		return c.copyEntry(src, dst, name, 1)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o005 != 0o005 {
		return nil
	}
	sd, dd, err := openDirPair(src, dst, name, st)
	if err != nil {
		return err
	}
	defer sd.Close()
	defer dd.Close()
	if err := c.copyHostEntry(sd, dd, comps[1:]); err != nil {
		return err
	}
	return setAttrs(dd, dst, name, st)
}
