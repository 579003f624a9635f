package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// HostImage describes an image built like the base image (the host's /usr
// seen through per-session overlays, a synthesized /etc) with one more
// user, whose home is the default working directory. The E2B facade's
// "base" template is one (internal/e2b): E2B's own has a user named "user"
// with passwordless sudo.
type HostImage struct {
	// User is the user's name; UID its uid and gid (1000 if 0).
	User string
	UID  int
	// Sudo lets the user run sudo without a password, where the host has
	// sudo and the sandbox maps the host's root (see docs/E2B.md).
	Sudo bool
}

// EnsureHostImage builds the HostImage h and points name at it. Like
// EnsureBase it needs no download and its content is addressed by digest,
// so an unchanged host gets the same image back.
func (s *Store) EnsureHostImage(name string, h HostImage) (*Image, error) {
	if err := checkImportName(name); err != nil {
		return nil, err
	}
	if err := ValidName(h.User); err != nil || h.User == "root" {
		return nil, fmt.Errorf("host image %q: bad user name %q", name, h.User)
	}
	uid := h.UID
	if uid == 0 {
		uid = 1000
	}
	ctx := context.Background()
	work, err := os.MkdirTemp(s.tmpDir(), "hostimage-*")
	if err != nil {
		return nil, fmt.Errorf("build image %q: %w", name, err)
	}
	defer os.RemoveAll(work)
	rootfs := filepath.Join(work, "rootfs")
	hostDirs, err := s.buildBase(ctx, rootfs)
	if err != nil {
		return nil, fmt.Errorf("build image %q: %w", name, err)
	}
	home := "/home/" + h.User
	id := strconv.Itoa(uid)
	// The skeleton's own user of this uid ("sandbox", 1000) gives way:
	// one name per uid, or ls and stat would name the other.
	var gone []string
	if b, err := os.ReadFile(filepath.Join(rootfs, "etc", "passwd")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Split(l, ":"); len(f) > 3 && (f[2] == id || f[3] == id) {
				gone = append(gone, f[0])
			}
		}
	}
	appendTo := func(file, line string) error {
		p := filepath.Join(rootfs, "etc", file)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var keep []string
		for _, l := range strings.SplitAfter(string(b), "\n") {
			name, _, _ := strings.Cut(l, ":")
			if l != "" && !slices.Contains(gone, name) {
				keep = append(keep, l)
			}
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		return writeNew(p, strings.Join(keep, "")+line, fi.Mode().Perm())
	}
	for _, u := range gone {
		if err := os.RemoveAll(filepath.Join(rootfs, "home", u)); err != nil {
			return nil, fmt.Errorf("build image %q: %w", name, err)
		}
	}
	sudoGroup := ""
	if h.Sudo {
		sudoGroup = "sudo:x:27:" + h.User + "\n"
	}
	for _, a := range []struct{ file, line string }{
		{"passwd", h.User + ":x:" + id + ":" + id + ":" + h.User + ":" + home + ":/bin/bash\n"},
		{"group", h.User + ":x:" + id + ":\n" + sudoGroup},
		{"shadow", h.User + ":*::0:99999:7:::\n"},
		{"gshadow", h.User + ":*::\n"},
	} {
		if err := appendTo(a.file, a.line); err != nil {
			return nil, fmt.Errorf("build image %q: %w", name, err)
		}
	}
	if err := mkdirOwned(filepath.Join(rootfs, home), 0o755, uid, uid); err != nil {
		return nil, fmt.Errorf("build image %q: %w", name, err)
	}
	if h.Sudo {
		if err := mkdirOwned(filepath.Join(rootfs, "etc", "sudoers.d"), 0o755, 0, 0); err != nil {
			return nil, fmt.Errorf("build image %q: %w", name, err)
		}
		if err := writeNew(filepath.Join(rootfs, "etc", "sudoers"),
			"Defaults env_reset\nDefaults !requiretty\nroot ALL=(ALL:ALL) ALL\n%sudo ALL=(ALL:ALL) NOPASSWD: ALL\n@includedir /etc/sudoers.d\n", 0o440); err != nil {
			return nil, fmt.Errorf("build image %q: %w", name, err)
		}
	}
	env := []string{"PATH=" + defaultPath, "HOME=" + home, "LANG=C.UTF-8", "USER=" + h.User, "LOGNAME=" + h.User}
	cfg := config{HostDirs: hostDirs, Env: env, WorkingDir: home, User: h.User}
	return s.commit(ctx, name, work, cfg, provenance{Source: "host", Layers: 1})
}
