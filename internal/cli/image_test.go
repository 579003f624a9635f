package cli

import (
	"archive/tar"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

func TestImagePull(t *testing.T) {
	img := `{"name":"python:3.12-slim","digest":"sha256:0123456789abcdef","size":100,"created_at":"2026-11-22T10:00:00Z"}`
	stream := "event: progress\ndata: {\"status\":\"resolving\",\"current\":0,\"total\":0}\n\n" +
		"event: progress\ndata: {\"status\":\"waiting\",\"layer\":1,\"layers\":2,\"digest\":\"sha256:aaaaaaaaaaaaaaaa\",\"current\":0,\"total\":2048}\n\n" +
		"event: progress\ndata: {\"status\":\"waiting\",\"layer\":2,\"layers\":2,\"digest\":\"sha256:bbbbbbbbbbbbbbbb\",\"current\":0,\"total\":4096}\n\n" +
		"event: progress\ndata: {\"status\":\"downloading\",\"layer\":1,\"layers\":2,\"digest\":\"sha256:aaaaaaaaaaaaaaaa\",\"current\":1024,\"total\":2048}\n\n" +
		"event: progress\ndata: {\"status\":\"downloading\",\"layer\":1,\"layers\":2,\"digest\":\"sha256:aaaaaaaaaaaaaaaa\",\"current\":1536,\"total\":2048}\n\n" +
		"event: progress\ndata: {\"status\":\"downloaded\",\"layer\":1,\"layers\":2,\"digest\":\"sha256:aaaaaaaaaaaaaaaa\",\"current\":2048,\"total\":2048}\n\n" +
		"event: progress\ndata: {\"status\":\"downloaded\",\"layer\":2,\"layers\":2,\"digest\":\"sha256:bbbbbbbbbbbbbbbb\",\"current\":4096,\"total\":4096}\n\n" +
		"event: progress\ndata: {\"status\":\"extracting\",\"layers\":2,\"current\":0,\"total\":0}\n\n" +
		"event: image\ndata: " + img + "\n\n"
	f, srv := newFakeAPI(t, map[string]reply{"POST /v1/images/pull": {status: 200, header: http.Header{"Content-Type": {"text/event-stream"}}, body: stream}})
	stdout, stderr, code := runCLI(t, srv, "", "image", "pull", "--platform", "linux/amd64", "python:3.12-slim")
	if code != 0 || stdout != "python:3.12-slim sha256:0123456789abcdef\n" {
		t.Fatalf("warren image pull = exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// Not a terminal: a line per step, none per chunk.
	want := "resolving python:3.12-slim\n" +
		"layer 1/2 sha256:aaaaaaaaaaaa: downloading 2KiB\n" +
		"layer 1/2 sha256:aaaaaaaaaaaa: done\n" +
		"layer 2/2 sha256:bbbbbbbbbbbb: done\n" +
		"extracting 2 layers\n"
	if diff := cmp.Diff(want, stderr); diff != "" {
		t.Errorf("progress lines (-want +got):\n%s", diff)
	}
	calls := f.recorded()
	if len(calls) != 1 || !sameJSON(t, calls[0].Body, `{"ref":"python:3.12-slim","platform":"linux/amd64"}`) || calls[0].Accept != "text/event-stream" {
		t.Errorf("calls = %+v", calls)
	}

	// --quiet asks for no stream.
	f, srv = newFakeAPI(t, map[string]reply{"POST /v1/images/pull": {status: 200, body: img}})
	if _, stderr, code := runCLI(t, srv, "", "image", "pull", "-q", "--name", "py", "python:3.12-slim"); code != 0 || stderr != "" {
		t.Fatalf("pull -q: exit %d, stderr %q", code, stderr)
	}
	if calls := f.recorded(); len(calls) != 1 || calls[0].Accept != "application/json" || !sameJSON(t, calls[0].Body, `{"ref":"python:3.12-slim","name":"py"}`) {
		t.Errorf("calls = %+v", calls)
	}
}

func TestPullDisplayTerminal(t *testing.T) {
	var buf bytes.Buffer
	clock := now
	d := newPullDisplay(&buf, "busybox", true, func() time.Time { return clock })
	d.update(api.PullProgress{Status: "resolving"})
	d.update(api.PullProgress{Status: "waiting", Layer: 1, Layers: 1, Digest: "sha256:aaaaaaaaaaaaaaaa", Total: 1000})
	d.update(api.PullProgress{Status: "downloading", Layer: 1, Layers: 1, Digest: "sha256:aaaaaaaaaaaaaaaa", Current: 100, Total: 1000})
	before := buf.Len()
	d.update(api.PullProgress{Status: "downloading", Layer: 1, Layers: 1, Digest: "sha256:aaaaaaaaaaaaaaaa", Current: 200, Total: 1000})
	if buf.Len() != before {
		t.Errorf("redrawn within %v of the last draw", redrawEvery)
	}
	clock = clock.Add(time.Second)
	d.update(api.PullProgress{Status: "downloading", Layer: 1, Layers: 1, Digest: "sha256:aaaaaaaaaaaaaaaa", Current: 500, Total: 1000})
	out := buf.String()
	last := out[strings.LastIndex(out, "\x1b[2A"):]
	want := "\x1b[2A\r\x1b[2Kbusybox: downloading\n\r\x1b[2K  1/1 sha256:aaaaaaaaaaaa  downloading [##########..........]      500B / 1000B    \n"
	if last != want {
		t.Errorf("last draw = %q, want %q", last, want)
	}
}

func TestImageInspectRemovePrune(t *testing.T) {
	img := api.Image{Name: "py", Digest: "sha256:ab", Size: 3, CreatedAt: now, User: "app", Env: []string{"A=b"}}
	f, srv := newFakeAPI(t, map[string]reply{
		"GET /v1/images/py":      {status: 200, body: mustJSON(t, img)},
		"DELETE /v1/images/py":   {status: 204},
		"DELETE /v1/images/busy": {status: 409, body: `{"error":{"code":"conflict","message":"image \"busy\" is in use by 1 session(s): default/s1; delete them first"}}`},
		"POST /v1/images/prune":  {status: 200, body: `{"deleted":["sha256:ab","sha256:cd"],"reclaimed_bytes":2048}`},
	})
	stdout, _, code := runCLI(t, srv, "", "image", "inspect", "py")
	if code != 0 || !sameJSON(t, stdout, mustJSON(t, img)) {
		t.Errorf("inspect = exit %d, %q", code, stdout)
	}
	stdout, stderr, code := runCLI(t, srv, "", "image", "rm", "py", "busy")
	if code != 1 || stdout != "py\n" || !strings.Contains(stderr, "default/s1") {
		t.Errorf("rm = exit %d, stdout %q, stderr %q; want py removed and busy's users named", code, stdout, stderr)
	}
	stdout, _, code = runCLI(t, srv, "", "image", "prune")
	if code != 0 || stdout != "deleted sha256:ab\ndeleted sha256:cd\nreclaimed 2KiB\n" {
		t.Errorf("prune = exit %d, %q", code, stdout)
	}
	if n := len(f.recorded()); n != 4 {
		t.Errorf("%d calls, want 4", n)
	}
}

func TestImageImportFormats(t *testing.T) {
	img := `{"name":"x","digest":"sha256:abc","size":1,"created_at":"2026-11-22T10:00:00Z"}`
	tarOf := func(names ...string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, n := range names {
			tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644})
		}
		tw.Close()
		return buf.Bytes()
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	layout := filepath.Join(dir, "layout")
	os.MkdirAll(filepath.Join(layout, "blobs", "sha256"), 0o755)
	os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	os.WriteFile(filepath.Join(layout, "index.json"), []byte(`{}`), 0o644)
	for _, tc := range []struct {
		name       string
		args       []string
		wantFormat string
	}{
		{"docker archive", []string{write("d.tar", tarOf("abc/layer.tar", "manifest.json", "repositories"))}, "docker-archive"},
		{"docker 25 archive", []string{write("d25.tar", tarOf("blobs/sha256/ab", "index.json", "oci-layout", "manifest.json"))}, "docker-archive"},
		{"oci archive", []string{write("o.tar", tarOf("blobs/sha256/ab", "index.json", "oci-layout"))}, "oci-layout"},
		{"rootfs tar", []string{write("r.tar", tarOf("./", "./etc/passwd", "./manifest.json"))}, ""},
		{"layout dir", []string{layout}, "oci-layout"},
		{"forced", []string{"--format", "rootfs", write("f.tar", tarOf("manifest.json"))}, ""},
		{"platform", []string{"--platform", "linux/arm64", write("p.tar", tarOf("manifest.json"))}, "docker-archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeAPI(t, map[string]reply{"POST /v1/images": {status: 201, body: img}})
			args := append([]string{"image", "import"}, tc.args[:len(tc.args)-1]...)
			args = append(args, "x", tc.args[len(tc.args)-1])
			if _, stderr, code := runCLI(t, srv, "", args...); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			calls := f.recorded()
			if len(calls) != 1 || calls[0].Query.Get("format") != tc.wantFormat {
				t.Fatalf("calls = %+v, want format %q", calls, tc.wantFormat)
			}
		})
	}
	f, srv := newFakeAPI(t, nil)
	if _, stderr, code := runCLI(t, srv, "", "image", "import", "--platform", "linux/arm64", "x", write("q.tar", tarOf("./etc/x"))); code == 0 || !strings.Contains(stderr, "--platform") {
		t.Errorf("--platform with a rootfs: exit %d, stderr %q", code, stderr)
	}
	if calls := f.recorded(); len(calls) != 0 {
		t.Errorf("calls = %+v, want none", calls)
	}
}

func TestRunImageCommand(t *testing.T) {
	img := api.Image{Name: "hello", Entrypoint: []string{"/bin/echo"}, Cmd: []string{"hi", "there"}}
	f, srv := newFakeAPI(t, map[string]reply{
		"GET /v1/images/hello": {status: 200, body: mustJSON(t, img)},
		"POST /v1/run":         {status: 200, body: `{"stdout":"hi there\n","stderr":"","exit_code":0,"duration_ms":1,"timed_out":false,"truncated":false,"shell_restarted":false,"oom_killed":false}`},
	})
	stdout, stderr, code := runCLI(t, srv, "", "run", "--image", "hello")
	if code != 0 || stdout != "hi there\n" {
		t.Fatalf("run --image hello = exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	calls := f.recorded()
	if len(calls) != 2 || !sameJSON(t, calls[1].Body, `{"image":"hello","argv":["/bin/echo","hi","there"]}`) {
		t.Errorf("calls = %+v, want the image's entrypoint and cmd as argv", calls)
	}
	// An image without a command, or "--" with nothing after it, is an error.
	_, srv = newFakeAPI(t, map[string]reply{"GET /v1/images/none": {status: 200, body: `{"name":"none"}`}})
	if _, stderr, code := runCLI(t, srv, "", "run", "--image", "none"); code != 1 || !strings.Contains(stderr, "no entrypoint or cmd") {
		t.Errorf("run --image none = exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, srv, "", "run", "--image", "none", "--"); code != 1 || !strings.Contains(stderr, "no command given") {
		t.Errorf("run --image none -- = exit %d, stderr %q", code, stderr)
	}
}
