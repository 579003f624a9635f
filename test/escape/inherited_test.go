package escape

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inheritedFD is the descriptor number a daemon started under
// `exec 200<some-host-dir` holds (the audit's reproduction).
const inheritedFD = 200

// TestInheritedDescriptors: the daemon holds a descriptor it inherited
// without close-on-exec, to a host directory with a secret in it. Nothing
// may reach that directory from the session: not the sandbox's processes,
// not the file API through /proc/self/fd/N or through a planted symlink to
// /proc/1/fd/N, for any operation.
func TestInheritedDescriptors(t *testing.T) {
	hostDir := t.TempDir()
	const secret = "host-secret-6c1f"
	if err := os.WriteFile(filepath.Join(hostDir, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(hostDir, "sub"), 0o777)
	// Writable by anyone, so only the sandbox's walls keep writes out
	// (the sandbox's root is an unprivileged host uid).
	os.Chmod(hostDir, 0o777)
	os.Chmod(filepath.Join(hostDir, "secret.txt"), 0o666)
	// A descriptor without close-on-exec, as a shell's `exec 200<dir`
	// leaves it: every process the daemon starts inherits it.
	fd, err := unix.Open(hostDir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(fd, inheritedFD); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	t.Cleanup(func() { unix.Close(inheritedFD) })

	h := startDaemon(t, nil)
	b := newBox(t, h, "inherit", nil)
	n := strconv.Itoa(inheritedFD)
	b.out(t, "mkdir -p /workspace && ln -sfn /proc/1/fd/"+n+" /workspace/agentfd && ln -sfn /proc/self/fd/"+n+" /workspace/selffd")

	// resetHost puts the host directory back as it was, so each subtest
	// starts from the same state even after a failed one.
	resetHost := func() {
		os.WriteFile(filepath.Join(hostDir, "secret.txt"), []byte(secret), 0o666)
		ents, _ := os.ReadDir(hostDir)
		for _, e := range ents {
			if e.Name() != "secret.txt" && e.Name() != "sub" {
				os.RemoveAll(filepath.Join(hostDir, e.Name()))
			}
		}
		os.Mkdir(filepath.Join(hostDir, "sub"), 0o777)
	}
	hostUnchanged := func(t *testing.T, what string) {
		t.Helper()
		if got, err := os.ReadFile(filepath.Join(hostDir, "secret.txt")); err != nil || string(got) != secret {
			t.Fatalf("after %s the host's secret.txt is %q, %v", what, got, err)
		}
		ents, _ := os.ReadDir(hostDir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if strings.Join(names, ",") != "secret.txt,sub" {
			t.Fatalf("after %s the host directory holds %v", what, names)
		}
	}

	t.Run("no stray descriptor in the agent", func(t *testing.T) {
		// The agent's descriptors, as the agent sees them, are not
		// readable from inside (it is not dumpable), so look from the
		// host: PID 1 of the session is a child of this process.
		pids := sessionInitPids(t)
		if len(pids) == 0 {
			t.Fatal("no sandbox init found among this process's children")
		}
		for _, pid := range pids {
			if target, err := os.Readlink("/proc/" + pid + "/fd/" + n); err == nil {
				t.Errorf("the agent (host pid %s) holds descriptor %d -> %s, inherited from the daemon", pid, inheritedFD, target)
			}
		}
	})

	t.Run("sandboxed processes", func(t *testing.T) {
		res := b.sh(t, "cat /proc/self/fd/"+n+"/secret.txt 2>&1; ls /proc/1/fd/"+n+"/ 2>&1; cat /workspace/agentfd/secret.txt 2>&1; true")
		if strings.Contains(res.Stdout, secret) {
			t.Errorf("a sandboxed process reached the host directory: %q", res.Stdout)
		}
	})

	for _, base := range []string{"/proc/self/fd/" + n, "/proc/1/fd/" + n, "/proc/thread-self/fd/" + n, "/workspace/agentfd", "/workspace/selffd"} {
		t.Run("file API via "+base, func(t *testing.T) {
			resetHost()
			// Each operation must be refused: 403 where the path meets the
			// agent's /proc or a magic link, 404 where the descriptor is
			// simply not there any more (init closed it).
			refused := func(op string, err error) {
				t.Helper()
				if !oneOf(codeOf(err), "permission_denied", "not_found") {
					t.Errorf("%s via %s: %v; want permission_denied or not_found", op, base, err)
				} else {
					t.Logf("%s: %s", op, codeOf(err))
				}
			}
			got, err := readAPI(h, b.id, base+"/secret.txt")
			if strings.Contains(got, secret) {
				t.Errorf("GET %s/secret.txt returned the host's secret", base)
			}
			refused("GET", err)
			_, err = h.Client.ListFiles(bg, b.id, base)
			refused("list", err)
			_, err = h.Client.StatFile(bg, b.id, base+"/secret.txt")
			refused("stat", err)
			_, err = h.Client.WriteFile(bg, b.id, base+"/secret.txt", strings.NewReader("PWNED"), 0o644)
			refused("PUT over a file", err)
			_, err = h.Client.WriteFile(bg, b.id, base+"/planted.txt", strings.NewReader("PWNED"), 0o644)
			refused("PUT a new file", err)
			_, err = h.Client.Mkdir(bg, b.id, base+"/newdir")
			refused("mkdir", err)
			refused("DELETE", h.Client.RemoveFile(bg, b.id, base+"/sub", true))
			// An archive of a planted symlink is that link, nothing it
			// points to; through the link it is refused.
			rc, err := h.Client.DownloadArchive(bg, b.id, base)
			if err == nil {
				tr := tar.NewReader(rc)
				for {
					hdr, err := tr.Next()
					if err != nil {
						break
					}
					if hdr.Typeflag != tar.TypeSymlink || !strings.HasPrefix(base, "/workspace/") {
						t.Errorf("archive of %s holds %s (type %c)", base, hdr.Name, hdr.Typeflag)
					}
				}
				rc.Close()
			} else {
				refused("archive GET", err)
			}
			rc, err = h.Client.DownloadArchive(bg, b.id, base+"/")
			if err == nil {
				body, _ := io.ReadAll(rc)
				rc.Close()
				t.Errorf("archive of %s/ answered %d bytes", base, len(body))
			}
			refused("archive GET through", err)
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Name: "planted.txt", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg})
			tw.Write([]byte("PWNED"))
			tw.Close()
			_, err = h.Client.UploadArchive(bg, b.id, base, &buf)
			refused("archive PUT", err)
			hostUnchanged(t, "the file API via "+base)
		})
	}
	// The file API still reaches the sandbox's own files through links.
	b.out(t, "echo mine > /workspace/own.txt && ln -sfn /workspace/own.txt /workspace/ownlink")
	if got, err := readAPI(h, b.id, "/workspace/ownlink"); err != nil || got != "mine\n" {
		t.Errorf("GET through an ordinary symlink: %q, %v", got, err)
	}
	b.alive(t, "the inherited-descriptor attacks")
}

// sessionInitPids lists the host pids of this process's children that run
// `warren init`/`warren agent`: the sandboxes' PID 1s.
func sessionInitPids(t testing.TB) []string {
	t.Helper()
	me := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		rest := s[strings.LastIndexByte(s, ')')+2:]
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != me {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.HasPrefix(string(cmd), "warren\x00") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// statusOf reads /proc/<pid>/status on the host.
func statusOf(t testing.TB, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
