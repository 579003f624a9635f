package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/warrenhq/warren/api"
)

// Import formats of ImportImageFrom.
const (
	// FormatRootfs is a tar of a root filesystem.
	FormatRootfs = "rootfs"
	// FormatOCILayout is a tar of an OCI image layout directory.
	FormatOCILayout = "oci-layout"
	// FormatDockerArchive is the archive `docker save` writes.
	FormatDockerArchive = "docker-archive"
)

// imagePath returns the escaped path of an image.
func imagePath(name string) string {
	return "/v1/images/" + url.PathEscape(name)
}

// GetImage describes the image name.
func (c *Client) GetImage(ctx context.Context, name string) (*api.Image, error) {
	var img api.Image
	if _, err := c.doJSON(ctx, http.MethodGet, imagePath(name), nil, nil, &img); err != nil {
		return nil, err
	}
	return &img, nil
}

// DeleteImage removes the image name. While sessions use it the daemon
// refuses with an *Error of code "conflict" that names them. The content
// stays until PruneImages.
func (c *Client) DeleteImage(ctx context.Context, name string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, imagePath(name), nil, nil, nil)
	return err
}

// PruneImages deletes the stored content no image name points to and no
// session runs from.
func (c *Client) PruneImages(ctx context.Context) (*api.ImagePruneResult, error) {
	var res api.ImagePruneResult
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/images/prune", nil, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ImportImageFrom stores the image that r yields, in format (FormatRootfs,
// FormatOCILayout or FormatDockerArchive; "" is FormatRootfs), plain or
// gzip-compressed, as the image name, streaming it. platform picks the
// image of an OCI layout or docker archive ("" is the daemon host's).
func (c *Client) ImportImageFrom(ctx context.Context, name, format, platform string, r io.Reader) (*api.Image, error) {
	if r == nil {
		r = http.NoBody
	}
	q := url.Values{"name": {name}}
	if format != "" {
		q.Set("format", format)
	}
	if platform != "" {
		q.Set("platform", platform)
	}
	ct := "application/x-tar"
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		ct = "application/gzip"
	}
	resp, err := c.send(ctx, &request{
		method: http.MethodPost, path: "/v1/images", query: q,
		body: br, contentType: ct, accept: "application/json",
	})
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var img api.Image
	if err := json.NewDecoder(resp.Body).Decode(&img); err != nil {
		return nil, fmt.Errorf("POST /v1/images: decode response: %w", err)
	}
	return &img, nil
}

// PullImage has the daemon pull an image from its registry and returns the
// stored image. onProgress, if not nil, receives the pull's progress as the
// daemon reports it (a server-sent event stream); an error it returns ends
// the call (and so the pull) and is returned as is. An error the daemon
// reports, before or during the stream, is an *Error.
func (c *Client) PullImage(ctx context.Context, req *api.PullImageRequest, onProgress func(api.PullProgress) error) (*api.Image, error) {
	const path = "/v1/images/pull"
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: encode request: %w", path, err)
	}
	accept := "application/json"
	if onProgress != nil {
		accept = eventStream
	}
	resp, err := c.send(ctx, &request{
		method: http.MethodPost, path: path, body: bytes.NewReader(b),
		contentType: "application/json", accept: accept,
	})
	if err != nil {
		return nil, err
	}
	// Not closeBody: draining a stream that is still open would wait for it.
	defer resp.Body.Close()
	switch mt := mediaType(resp); mt {
	case eventStream:
	case "application/json":
		var img api.Image
		if err := json.NewDecoder(resp.Body).Decode(&img); err != nil {
			return nil, fmt.Errorf("POST %s: decode response: %w", path, err)
		}
		return &img, nil
	default:
		return nil, fmt.Errorf("POST %s: answer of type %q, want %s", path, mt, eventStream)
	}
	return readEvents[api.Image](resp.Body, path, "image", func(ev sseEvent) error {
		if ev.name != "progress" {
			return nil // for newer clients
		}
		var p api.PullProgress
		if err := json.Unmarshal([]byte(ev.data), &p); err != nil {
			return fmt.Errorf("POST %s: decode progress event: %w", path, err)
		}
		if onProgress != nil {
			return onProgress(p)
		}
		return nil
	})
}
