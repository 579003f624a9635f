package client

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

func TestImageCalls(t *testing.T) {
	img := `{"name":"python:3.12","digest":"sha256:ab","size":9,"created_at":"2026-11-22T10:00:00Z","user":"app","cmd":["python3"]}`
	want := &api.Image{Name: "python:3.12", Digest: "sha256:ab", Size: 9, CreatedAt: t0, User: "app", Cmd: []string{"python3"}}

	t.Run("GetImage", func(t *testing.T) {
		srv, got := fakeDaemon(t, 200, http.Header{"Content-Type": {"application/json"}}, img)
		res, err := New(srv.URL).GetImage(t.Context(), "python:3.12")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("GetImage (-want +got):\n%s", diff)
		}
		if got.method != "GET" || got.path != "/v1/images/python:3.12" {
			t.Errorf("request = %s %s", got.method, got.path)
		}
	})
	t.Run("DeleteImage conflict", func(t *testing.T) {
		srv, got := fakeDaemon(t, 409, http.Header{"Content-Type": {"application/json"}},
			`{"error":{"code":"conflict","message":"image \"py\" is in use by 1 session(s): default/s1; delete them first"}}`)
		err := New(srv.URL).DeleteImage(t.Context(), "py")
		var e *Error
		if !errors.As(err, &e) || e.Code != "conflict" || !strings.Contains(e.Message, "default/s1") {
			t.Errorf("DeleteImage = %v, want the conflict naming the session", err)
		}
		if got.method != "DELETE" || got.path != "/v1/images/py" {
			t.Errorf("request = %s %s", got.method, got.path)
		}
	})
	t.Run("PruneImages", func(t *testing.T) {
		srv, got := fakeDaemon(t, 200, http.Header{"Content-Type": {"application/json"}}, `{"deleted":["sha256:ab"],"reclaimed_bytes":42}`)
		res, err := New(srv.URL).PruneImages(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&api.ImagePruneResult{Deleted: []string{"sha256:ab"}, ReclaimedBytes: 42}, res); diff != "" {
			t.Errorf("PruneImages (-want +got):\n%s", diff)
		}
		if got.method != "POST" || got.path != "/v1/images/prune" {
			t.Errorf("request = %s %s", got.method, got.path)
		}
	})
	t.Run("ImportImageFrom", func(t *testing.T) {
		srv, got := fakeDaemon(t, 201, http.Header{"Content-Type": {"application/json"}}, img)
		res, err := New(srv.URL).ImportImageFrom(t.Context(), "python:3.12", FormatDockerArchive, "linux/arm64", strings.NewReader("\x1f\x8barchive"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("ImportImageFrom (-want +got):\n%s", diff)
		}
		wantQ := url.Values{"name": {"python:3.12"}, "format": {"docker-archive"}, "platform": {"linux/arm64"}}
		if diff := cmp.Diff(wantQ, got.query); diff != "" || got.contentType != "application/gzip" || string(got.body) != "\x1f\x8barchive" {
			t.Errorf("request: query diff %s, content type %q, body %q", diff, got.contentType, got.body)
		}
	})
	t.Run("PullImage plain", func(t *testing.T) {
		srv, got := fakeDaemon(t, 200, http.Header{"Content-Type": {"application/json"}}, img)
		res, err := New(srv.URL).PullImage(t.Context(), &api.PullImageRequest{Ref: "python:3.12", Platform: "linux/amd64"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("PullImage (-want +got):\n%s", diff)
		}
		if got.accept != "application/json" || string(got.body) != `{"ref":"python:3.12","platform":"linux/amd64"}` {
			t.Errorf("request: accept %q body %s", got.accept, got.body)
		}
	})
	t.Run("PullImage stream", func(t *testing.T) {
		stream := "event: progress\ndata: {\"status\":\"resolving\",\"current\":0,\"total\":0}\n\n" +
			": keep-alive\n\n" +
			"event: progress\ndata: {\"status\":\"downloading\",\"layer\":1,\"layers\":2,\"digest\":\"sha256:l1\",\"current\":5,\"total\":10}\n\n" +
			"event: image\ndata: " + img + "\n\n"
		srv, got := fakeDaemon(t, 200, http.Header{"Content-Type": {"text/event-stream"}}, stream)
		var steps []api.PullProgress
		res, err := New(srv.URL).PullImage(t.Context(), &api.PullImageRequest{Ref: "python:3.12"}, func(p api.PullProgress) error {
			steps = append(steps, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("PullImage (-want +got):\n%s", diff)
		}
		wantSteps := []api.PullProgress{{Status: "resolving"}, {Status: "downloading", Layer: 1, Layers: 2, Digest: "sha256:l1", Current: 5, Total: 10}}
		if diff := cmp.Diff(wantSteps, steps); diff != "" {
			t.Errorf("progress (-want +got):\n%s", diff)
		}
		if got.accept != "text/event-stream" {
			t.Errorf("accept = %q", got.accept)
		}
	})
	t.Run("PullImage stream error", func(t *testing.T) {
		stream := "event: progress\ndata: {\"status\":\"resolving\",\"current\":0,\"total\":0}\n\n" +
			"event: error\ndata: {\"error\":{\"code\":\"not_found\",\"message\":\"nope: not found in the registry\"}}\n\n"
		srv, _ := fakeDaemon(t, 200, http.Header{"Content-Type": {"text/event-stream"}}, stream)
		_, err := New(srv.URL).PullImage(t.Context(), &api.PullImageRequest{Ref: "nope"}, func(api.PullProgress) error { return nil })
		if !IsNotFound(err) {
			t.Errorf("PullImage = %v, want not_found", err)
		}
	})
	t.Run("PullImage stream cut", func(t *testing.T) {
		srv, _ := fakeDaemon(t, 200, http.Header{"Content-Type": {"text/event-stream"}}, "event: progress\ndata: {\"status\":\"resolving\"}\n\n")
		if _, err := New(srv.URL).PullImage(t.Context(), &api.PullImageRequest{Ref: "x"}, func(api.PullProgress) error { return nil }); err == nil {
			t.Errorf("PullImage of a stream without an image event: no error")
		}
	})
}
