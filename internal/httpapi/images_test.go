package httpapi

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
)

// fakeImages is an image store that pulls by script.
type fakeImages struct {
	pull     func(opts image.PullOptions) (*image.Image, error)
	imported string // the import method last called
}

var testImage = &image.Image{Name: "py", Digest: "sha256:ab", Size: 3, CreatedAt: time.Unix(1700000000, 0).UTC(), User: "app"}

func (f *fakeImages) List() ([]*image.Image, error)         { return nil, nil }
func (f *fakeImages) Get(name string) (*image.Image, error) { return testImage, nil }
func (f *fakeImages) Remove(name string) error              { return nil }
func (f *fakeImages) Prune() (*image.PruneResult, error)    { return &image.PruneResult{}, nil }
func (f *fakeImages) ImportTar(ctx context.Context, name string, r io.Reader) (*image.Image, error) {
	f.imported = "tar"
	return testImage, nil
}
func (f *fakeImages) ImportOCILayout(ctx context.Context, name string, r io.Reader, platform string) (*image.Image, error) {
	f.imported = "oci " + platform
	return testImage, nil
}
func (f *fakeImages) ImportDockerArchive(ctx context.Context, name string, r io.Reader, platform string) (*image.Image, error) {
	f.imported = "docker " + platform
	return testImage, nil
}
func (f *fakeImages) Pull(ctx context.Context, ref string, opts image.PullOptions) (*image.Image, error) {
	return f.pull(opts)
}

func serve(t *testing.T, s *Server, method, target, accept, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

func TestPullStream(t *testing.T) {
	imgs := &fakeImages{}
	s := New(Config{Images: imgs})
	imgs.pull = func(opts image.PullOptions) (*image.Image, error) {
		if opts.Name != "py" || opts.Platform != "linux/arm64" {
			t.Errorf("Pull options %+v", opts)
		}
		opts.Progress(image.Progress{Status: "resolving"})
		opts.Progress(image.Progress{Status: "downloading", Layer: 1, Layers: 1, Digest: "sha256:l", Current: 5, Total: 9})
		return testImage, nil
	}
	rec := serve(t, s, "POST", "/v1/images/pull", "text/event-stream", `{"ref":"python","name":"py","platform":"linux/arm64"}`)
	want := "event: progress\ndata: {\"status\":\"resolving\",\"current\":0,\"total\":0}\n\n" +
		"event: progress\ndata: {\"status\":\"downloading\",\"layer\":1,\"layers\":1,\"digest\":\"sha256:l\",\"current\":5,\"total\":9}\n\n" +
		"event: image\ndata: {\"name\":\"py\",\"digest\":\"sha256:ab\",\"size\":3,\"created_at\":\"2023-11-14T22:13:20Z\",\"user\":\"app\"}\n\n"
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Body.String() != want {
		t.Errorf("streamed pull = %d %q\n%s\nwant\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
	}

	// An error after the stream started is an event; one before is the
	// envelope with its status.
	imgs.pull = func(opts image.PullOptions) (*image.Image, error) {
		opts.Progress(image.Progress{Status: "resolving"})
		return nil, errdefs.New(errdefs.ErrNotFound, "python: not found in the registry")
	}
	rec = serve(t, s, "POST", "/v1/images/pull", "text/event-stream", `{"ref":"python"}`)
	if !strings.HasSuffix(rec.Body.String(), "event: error\ndata: {\"error\":{\"code\":\"not_found\",\"message\":\"python: not found in the registry\"}}\n\n") {
		t.Errorf("pull failing in the stream = %q", rec.Body)
	}
	imgs.pull = func(opts image.PullOptions) (*image.Image, error) {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "bad ref")
	}
	for _, accept := range []string{"text/event-stream", ""} {
		rec = serve(t, s, "POST", "/v1/images/pull", accept, `{"ref":"python"}`)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"code":"invalid_argument"`) {
			t.Errorf("pull failing at once (Accept %q) = %d %s", accept, rec.Code, rec.Body)
		}
	}
	if rec := serve(t, s, "POST", "/v1/images/pull", "", `{}`); rec.Code != 400 {
		t.Errorf("pull without ref = %d %s", rec.Code, rec.Body)
	}
}

func TestImportFormats(t *testing.T) {
	imgs := &fakeImages{}
	s := New(Config{Images: imgs})
	for _, tc := range []struct {
		query    string
		status   int
		imported string
	}{
		{"name=py", 201, "tar"},
		{"name=py&format=rootfs", 201, "tar"},
		{"name=py&format=oci-layout&platform=linux/arm64", 201, "oci linux/arm64"},
		{"name=py&format=docker-archive", 201, "docker "},
		{"name=py&format=zip", 400, ""},
		{"name=py&platform=linux/arm64", 400, ""},
		{"format=oci-layout", 400, ""},
	} {
		imgs.imported = ""
		rec := serve(t, s, "POST", "/v1/images?"+tc.query, "", "body")
		if rec.Code != tc.status || imgs.imported != tc.imported {
			t.Errorf("POST /v1/images?%s = %d %s, imported %q; want %d, %q", tc.query, rec.Code, rec.Body, imgs.imported, tc.status, tc.imported)
		}
	}
	if rec := serve(t, s, "POST", "/v1/images/prune", "", ""); rec.Code != 200 || rec.Body.String() != `{"deleted":[],"reclaimed_bytes":0}`+"\n" {
		t.Errorf("prune = %d %s", rec.Code, rec.Body)
	}
	if rec := serve(t, s, "GET", "/v1/images/py:3", "", ""); rec.Code != 200 {
		t.Errorf("GET /v1/images/py:3 = %d %s", rec.Code, rec.Body)
	}
}
