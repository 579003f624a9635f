package image

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnsureBase(t *testing.T) {
	s := newStore(t)
	img, err := s.EnsureBase()
	if err != nil {
		t.Fatal(err)
	}
	root := img.RootFS

	if img.Name != BaseName || img.WorkingDir != "/workspace" || img.Shell != "" {
		t.Errorf("EnsureBase() = name %q cwd %q shell %q, want base, /workspace, \"\"", img.Name, img.WorkingDir, img.Shell)
	}
	wantEnv := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "USER=root", "LOGNAME=root"}
	if diff := cmp.Diff(wantEnv, img.Env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}

	// /usr always comes from the host; bin, lib, ... follow the host.
	wantHostDirs := []string{"/usr"}
	for _, d := range libDirs {
		fi, err := os.Lstat("/" + d)
		if err != nil {
			if _, err := os.Lstat(filepath.Join(root, d)); !os.IsNotExist(err) {
				t.Errorf("%s is in the skeleton but not on the host", d)
			}
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			hostTarget, _ := os.Readlink("/" + d)
			if got, err := os.Readlink(filepath.Join(root, d)); err != nil || got != hostTarget {
				t.Errorf("skeleton %s -> %q, %v; want -> %q as on the host", d, got, err, hostTarget)
			}
		} else {
			wantHostDirs = append(wantHostDirs, "/"+d)
			if fi, err := os.Lstat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
				t.Errorf("skeleton %s is not an empty directory: %v", d, err)
			}
		}
	}
	if diff := cmp.Diff(wantHostDirs, img.HostDirs); diff != "" {
		t.Errorf("HostDirs (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		path     string
		perm     uint32
		uid, gid uint32
	}{
		{".", 0o755, 0, 0},
		{"usr", 0o755, 0, 0},
		{"tmp", 0o1777, 0, 0},
		{"var/tmp", 0o1777, 0, 0},
		{"root", 0o700, 0, 0},
		{"home/sandbox", 0o755, 1000, 1000},
		{"workspace", 0o755, 0, 0},
		{"proc", 0o555, 0, 0},
		{"etc/shadow", 0o640, 0, 0},
		{"etc/gshadow", 0o640, 0, 0},
		{"etc/passwd", 0o644, 0, 0},
	} {
		st := statOf(t, filepath.Join(root, tc.path))
		if st.Mode&0o7777 != tc.perm || st.Uid != tc.uid || st.Gid != tc.gid {
			t.Errorf("%s = %#o %d:%d, want %#o %d:%d", tc.path, st.Mode&0o7777, st.Uid, st.Gid, tc.perm, tc.uid, tc.gid)
		}
	}
	for _, d := range []string{"usr", "root", "home/sandbox", "workspace", "proc", "dev", "sys", "run", "var/log", "var/cache", "var/lib", "opt", "srv", "mnt", "media"} {
		if got := dirNames(t, filepath.Join(root, d)); len(got) != 0 {
			t.Errorf("%s holds %q, want it empty", d, got)
		}
	}
	if got, err := os.Readlink(filepath.Join(root, "etc/mtab")); err != nil || got != "../proc/self/mounts" {
		t.Errorf("etc/mtab -> %q, %v; want ../proc/self/mounts", got, err)
	}

	passwd := readFile(t, filepath.Join(root, "etc/passwd"))
	for _, want := range []string{
		"root:x:0:0:root:/root:/bin/bash",
		"sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/bash",
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
	} {
		if !slices.Contains(strings.Split(passwd, "\n"), want) {
			t.Errorf("etc/passwd lacks %q:\n%s", want, passwd)
		}
	}
	group := strings.Split(readFile(t, filepath.Join(root, "etc/group")), "\n")
	for _, want := range []string{"root:x:0:", "tty:x:5:", "users:x:100:", "sandbox:x:1000:", "nogroup:x:65534:"} {
		if !slices.Contains(group, want) {
			t.Errorf("etc/group lacks %q", want)
		}
	}
	for _, f := range []string{"etc/shadow", "etc/gshadow"} {
		for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(root, f))), "\n") {
			if fields := strings.Split(line, ":"); len(fields) < 2 || fields[1] != "*" {
				t.Errorf("%s line %q is not locked with *", f, line)
			}
		}
	}
	if got := readFile(t, filepath.Join(root, "etc/hostname")); got != "sandbox\n" {
		t.Errorf("etc/hostname = %q", got)
	}
	if !strings.Contains(readFile(t, filepath.Join(root, "etc/nsswitch.conf")), "hosts:          files dns") {
		t.Errorf("etc/nsswitch.conf lacks hosts: files dns")
	}

	checkNoHostSecrets(t, root, "/")

	// What the allow-list brings, where the host has it.
	for _, p := range etcAllowList {
		hfi, err := os.Lstat(filepath.Join("/etc", p))
		if err != nil {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, "etc", p))
		if err != nil {
			t.Errorf("etc/%s is on the host but not copied: %v", p, err)
			continue
		}
		if fi.Mode().Type() != hfi.Mode().Type() {
			t.Errorf("etc/%s is %v, on the host %v", p, fi.Mode().Type(), hfi.Mode().Type())
		}
	}
	checkTmpEmpty(t, s)
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkNoHostSecrets checks the base skeleton at root against the host at
// host: no secret path exists, nothing outside the allow-list and the
// synthesized files is under etc/, and no file equals the host's shadow.
func checkNoHostSecrets(t *testing.T, root, host string) {
	t.Helper()
	for _, p := range []string{
		"etc/shadow-", "etc/gshadow-", "etc/passwd-", "etc/group-",
		"etc/sudoers", "etc/sudoers.d", "etc/ssh", "etc/ssl/private",
		"etc/machine-id", "etc/subuid", "etc/subgid", "etc/security",
		"etc/pam.d", "etc/npmrc", "etc/pip.conf", "etc/gitconfig",
		"etc/apt", "etc/cron.d", "etc/ldap", "etc/krb5.keytab",
	} {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists in the base skeleton (err %v), want it absent", p, err)
		}
	}
	allowed := func(rel string) bool {
		for _, f := range etcFiles {
			if rel == f.name {
				return true
			}
		}
		if rel == "mtab" {
			return true
		}
		for _, a := range etcAllowList {
			if rel == a || strings.HasPrefix(rel, a+"/") || strings.HasPrefix(a, rel+"/") {
				return true
			}
		}
		return false
	}
	var secrets [][]byte
	for _, f := range []string{"etc/shadow", "etc/gshadow"} {
		if b, err := os.ReadFile(filepath.Join(host, f)); err == nil && len(b) > 0 {
			secrets = append(secrets, b)
		}
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if etcRel, ok := strings.CutPrefix(rel, "etc"+string(filepath.Separator)); ok && !allowed(filepath.ToSlash(etcRel)) {
			t.Errorf("%s is in the base skeleton but neither allow-listed nor synthesized", rel)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, sec := range secrets {
			if bytes.Equal(b, sec) {
				t.Errorf("%s is byte-identical to the host's shadow file", rel)
			}
		}
		if bytes.Contains(b, []byte("TOPSECRET")) {
			t.Errorf("%s holds a host secret", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEnsureBaseStable(t *testing.T) {
	s := newStore(t)
	first, err := s.EnsureBase()
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.EnsureBase()
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest != second.Digest || first.RootFS != second.RootFS || !first.CreatedAt.Equal(second.CreatedAt) {
		t.Errorf("second EnsureBase() = %s at %s, want the first %s at %s", second.Digest, second.RootFS, first.Digest, first.RootFS)
	}
	// Another store on the same host gets the same digest.
	other, err := newStore(t).EnsureBase()
	if err != nil {
		t.Fatal(err)
	}
	if other.Digest != first.Digest {
		t.Errorf("EnsureBase in another store = %s, want %s", other.Digest, first.Digest)
	}
	if got := dirNames(t, s.blobsDir()); len(got) != 1 {
		t.Errorf("blobs = %q, want one", got)
	}
	got, err := s.Get(BaseName)
	if err != nil || got.Digest != first.Digest {
		t.Errorf("Get(base) = %v, %v; want digest %s", got, err, first.Digest)
	}
	if _, err := s.GC(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first.RootFS); err != nil {
		t.Errorf("GC removed the base image: %v", err)
	}
}

// TestEnsureBaseFakeHost builds the base image from a made-up host without
// merged /usr and with secrets in the places an allow-list could slip.
func TestEnsureBaseFakeHost(t *testing.T) {
	host := t.TempDir()
	type hostEntry struct {
		path, link, content string
		mode                os.FileMode
	}
	for _, e := range []hostEntry{
		{path: "usr/bin/", mode: 0o755},
		{path: "usr/sbin/", mode: 0o755},
		{path: "bin/sh", content: "#!fake", mode: 0o755},
		{path: "lib64/ld.so", content: "fake", mode: 0o755},
		{path: "sbin", link: "usr/sbin"},
		{path: "lib", link: "/usr/lib"},
		{path: "etc/shadow", content: "root:TOPSECRET-shadow:1::::::\n", mode: 0o640},
		{path: "etc/gshadow", content: "root:TOPSECRET-gshadow::\n", mode: 0o640},
		{path: "etc/passwd", content: "root:x:0:0:TOPSECRET-gecos:/root:/bin/sh\n", mode: 0o644},
		{path: "etc/sudoers", content: "TOPSECRET-sudoers\n", mode: 0o440},
		{path: "etc/machine-id", content: "TOPSECRET-machine-id\n", mode: 0o444},
		{path: "etc/ssh/ssh_host_ed25519_key", content: "TOPSECRET-hostkey\n", mode: 0o600},
		{path: "etc/ssl/private/server.key", content: "TOPSECRET-key\n", mode: 0o640},
		{path: "etc/ssl/certs/ca.pem", content: "public cert\n", mode: 0o644},
		{path: "etc/ssl/certs/leaked.pem", content: "TOPSECRET-unreadable\n", mode: 0o600},
		{path: "etc/ssl/certs/to-private", link: "../private"},
		{path: "etc/ssl/openssl.cnf", content: "# openssl\n", mode: 0o644},
		{path: "etc/alternatives/awk", link: "/usr/bin/mawk"},
		{path: "etc/profile.d/ok.sh", content: "export A=1\n", mode: 0o644},
		{path: "etc/profile.d/hidden.sh", content: "TOPSECRET-profile\n", mode: 0o600},
		{path: "etc/ld.so.conf.d", link: "../ssh"},
		{path: "etc/localtime", link: "/usr/share/zoneinfo/Etc/UTC"},
		{path: "etc/os-release", link: "../usr/lib/os-release"},
		{path: "etc/profile", content: "# profile\n", mode: 0o644},
	} {
		p := filepath.Join(host, e.path)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch {
		case strings.HasSuffix(e.path, "/"):
			must(t, os.MkdirAll(p, e.mode))
		case e.link != "":
			must(t, os.Symlink(e.link, p))
		default:
			must(t, os.WriteFile(p, []byte(e.content), e.mode))
			must(t, os.Chmod(p, e.mode))
		}
	}
	must(t, os.Chmod(filepath.Join(host, "etc/ssl/private"), 0o710))

	s := newStore(t)
	s.host = host
	img, err := s.EnsureBase()
	if err != nil {
		t.Fatal(err)
	}
	root := img.RootFS
	want := []string{filepath.Join(host, "usr"), filepath.Join(host, "bin"), filepath.Join(host, "lib64")}
	if diff := cmp.Diff(want, img.HostDirs); diff != "" {
		t.Errorf("HostDirs (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ path, want string }{
		{"sbin", "l -> usr/sbin"},
		{"lib", "l -> /usr/lib"},
		{"bin", "d"},
		{"lib64", "d"},
		{"lib32", ""},
		{"etc/alternatives/awk", "l -> /usr/bin/mawk"},
		{"etc/ld.so.conf.d", "l -> ../ssh"},
		{"etc/localtime", "l -> /usr/share/zoneinfo/Etc/UTC"},
		{"etc/ssl/certs/to-private", "l -> ../private"},
		{"etc/ssl/certs/ca.pem", "f"},
		{"etc/ssl/openssl.cnf", "f"},
		{"etc/profile.d/ok.sh", "f"},
		{"etc/profile", "f"},
		{"etc/profile.d/hidden.sh", ""},
		{"etc/ssl/certs/leaked.pem", ""},
	} {
		if got := kindOf(t, filepath.Join(root, tc.path)); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.path, got, tc.want)
		}
	}
	if got := dirNames(t, filepath.Join(root, "bin")); len(got) != 0 {
		t.Errorf("bin holds %q, want it empty (it comes from the host)", got)
	}
	checkNoHostSecrets(t, root, host)
}

// kindOf returns "" if p does not exist, "d" for a directory, "f" for a
// file and "l -> target" for a symlink.
func kindOf(t testing.TB, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	switch {
	case os.IsNotExist(err):
		return ""
	case err != nil:
		t.Fatal(err)
	case fi.IsDir():
		return "d"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			t.Fatal(err)
		}
		return "l -> " + target
	}
	return "f"
}
