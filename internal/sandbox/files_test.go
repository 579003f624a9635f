package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func readAll(t *testing.T, sb *Sandbox, path string) ([]byte, error) {
	t.Helper()
	d, first, err := sb.ReadFile(context.Background(), path, 1<<30)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	rest, err := io.ReadAll(d)
	if err != nil {
		return nil, err
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return append(first, rest...), nil
}

func TestFilesRoundTrip(t *testing.T) {
	sb := newEnv(t).start()
	ctx := context.Background()
	data := make([]byte, 50<<20)
	rand.Read(data)
	n, err := sb.WriteFile(ctx, "big/data.bin", 0o600, 1<<30, bytes.NewReader(data))
	if err != nil || n != int64(len(data)) {
		t.Fatalf("WriteFile = %d, %v", n, err)
	}
	got, err := readAll(t, sb, "/workspace/big/data.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile: %v, %d bytes, equal %v", err, len(got), bytes.Equal(got, data))
	}
	e, err := sb.Stat(ctx, "big/data.bin")
	if err != nil || e.Size != int64(len(data)) || e.Mode != 0o600 || e.Type != "file" {
		t.Errorf("Stat = %+v, %v", e, err)
	}
	mustOut(t, sb, "sha256sum /workspace/big/data.bin | cut -c1-8", shaPrefix(data)+"\n")
	if _, err := sb.WriteFile(ctx, "small.txt", 0, 10, strings.NewReader("more than ten bytes")); !errdefs.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("oversize write = %v, want too_large", err)
	}
	if _, err := sb.Stat(ctx, "small.txt"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a failed write left a file: %v", err)
	}
	if err := sb.Mkdir(ctx, "d/e/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.WriteFile(ctx, "d/e/f/x", 0, 0, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	ents, err := sb.List(ctx, "/workspace/d/e")
	if err != nil || len(ents) != 1 || ents[0].Name != "f" || ents[0].Type != "dir" {
		t.Errorf("List = %+v, %v", ents, err)
	}
	if err := sb.Remove(ctx, "d", false); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("non-recursive remove of a full dir = %v, want conflict", err)
	}
	if err := sb.Remove(ctx, "d", true); err != nil {
		t.Errorf("recursive remove: %v", err)
	}
	for _, tc := range []struct {
		path  string
		class *errdefs.Class
	}{{"missing", errdefs.ErrNotFound}, {"/workspace", errdefs.ErrInvalidArgument}, {"/dev/null", errdefs.ErrInvalidArgument}} {
		if _, err := readAll(t, sb, tc.path); !errdefs.Is(err, tc.class) {
			t.Errorf("ReadFile(%q) = %v, want %s", tc.path, err, tc.class)
		}
	}
}

func shaPrefix(b []byte) string {
	h := sha256Sum(b)
	return h[:8]
}

// TestFilesStayInside plants links and climbs with "..": everything must
// resolve inside the sandbox.
func TestFilesStayInside(t *testing.T) {
	sb := newEnv(t).start()
	ctx := context.Background()
	mustOut(t, sb, "echo inside > /etc/shadow; ln -s /etc/shadow /workspace/shadow; ln -s / /workspace/root; ln -s ../../../../../../etc/shadow /workspace/up; echo ok", "ok\n")
	host, _ := os.ReadFile("/etc/shadow")
	// /proc magic links are never followed by the file API.
	for _, p := range []string{"/proc/1/root/etc/shadow", "/proc/self/cwd/../../etc/shadow"} {
		if _, err := readAll(t, sb, p); !errdefs.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("ReadFile(%q): %v, want permission_denied", p, err)
		}
	}
	for _, p := range []string{"shadow", "root/etc/shadow", "up", "../../../../etc/shadow", "/../../etc/shadow"} {
		got, err := readAll(t, sb, p)
		if err != nil {
			t.Errorf("ReadFile(%q): %v", p, err)
			continue
		}
		if string(got) != "inside\n" || (len(host) > 0 && bytes.Contains(got, host[:min(len(host), 20)])) {
			t.Errorf("ReadFile(%q) = %q, want the sandbox's own file", p, got)
		}
	}
	// Writing through the planted link changes the sandbox's file, never
	// the host's.
	if _, err := sb.WriteFile(ctx, "root/etc/written", 0, 0, strings.NewReader("w")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/written"); err == nil {
		os.Remove("/etc/written")
		t.Fatal("a write through a symlink reached the host")
	}
	mustOut(t, sb, "cat /etc/written", "w")
	// The tar upload cannot leave its target.
	for _, name := range []string{"../escape", "/abs/../../escape"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
		tw.Close()
		_, err := sb.TarPut(ctx, "/workspace/t", 1<<20, &buf)
		if name == "../escape" && !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("TarPut(%q) = %v, want invalid_argument", name, err)
		}
	}
	mustOut(t, sb, "test -e /workspace/escape || test -e /escape || echo contained", "contained\n")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "link", Linkname: "/etc", Typeflag: tar.TypeSymlink})
	tw.WriteHeader(&tar.Header{Name: "link/passwd", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	if _, err := sb.TarPut(ctx, "/workspace/t2", 1<<20, &buf); err == nil {
		t.Errorf("TarPut through a symlink to /etc succeeded")
	}
	mustOut(t, sb, "grep -c root /etc/passwd", "1\n")
}

func TestArchiveRoundTrip(t *testing.T) {
	sb := newEnv(t).start()
	ctx := context.Background()
	mustOut(t, sb, "mkdir -p /workspace/p/q && echo a > /workspace/p/a && echo b > /workspace/p/q/b && ln -s a /workspace/p/l && chmod 750 /workspace/p/q && echo ok", "ok\n")
	d, first, err := sb.TarGet(ctx, "/workspace/p", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(d)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	archive := append(first, rest...)
	names := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = h.Linkname
	}
	for _, want := range []string{"a", "q/", "q/b", "l"} {
		if _, ok := names[want]; !ok {
			t.Errorf("archive lacks %q: %v", want, names)
		}
	}
	if _, err := sb.TarPut(ctx, "/workspace/copy", 1<<30, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	mustOut(t, sb, "cat /workspace/copy/q/b; readlink /workspace/copy/l; stat -c %a /workspace/copy/q", "b\na\n750\n")
}
