package daemon_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// blobExists reports whether the image store of h holds the content digest.
func blobExists(t *testing.T, h *daemontest.Harness, digest string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(h.DataDir, "images", "blobs", strings.Replace(digest, ":", "-", 1)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// prune prunes the images of h and checks what went.
func prune(t *testing.T, c *client.Client, want ...string) {
	t.Helper()
	pr, err := c.PruneImages(bg)
	if err != nil {
		t.Fatalf("PruneImages: %v", err)
	}
	if got := slices.Sorted(slices.Values(pr.Deleted)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("PruneImages deleted %q, want %q", got, want)
	}
}

// TestSnapshotKeepsImage: a snapshot leases the image content its changes
// apply to. Sessions from it run on that content after the image's name
// moved to other content and a prune ran; the content goes with the
// snapshot. An imported snapshot whose content is gone names the digest it
// needs, and leases it once a pull brings it back.
func TestSnapshotKeepsImage(t *testing.T) {
	reg := testRegistry(t)
	pushImage(t, reg+"/test/bb:v1", busyboxImage(t, "v1"))
	pushImage(t, reg+"/test/bb:v2", busyboxImage(t, "v2"))
	h := daemontest.Start(t, nil)
	c := h.Client
	v1, err := c.PullImage(bg, &api.PullImageRequest{Ref: reg + "/test/bb:v1", Name: "bb"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a", Image: "bb"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "a", "echo mine > /app/mine")
	sn, err := c.Snapshot(bg, "a", "snap")
	if err != nil {
		t.Fatal(err)
	}
	if sn.Image != "bb" || sn.ImageDigest != v1.Digest {
		t.Errorf("snapshot of image %q %s, want bb %s", sn.Image, sn.ImageDigest, v1.Digest)
	}
	if err := c.DeleteSession(bg, "a"); err != nil {
		t.Fatal(err)
	}

	// The name moves on to v2; no session runs from v1 any more, but the
	// snapshot keeps it through a prune.
	v2, err := c.PullImage(bg, &api.PullImageRequest{Ref: reg + "/test/bb:v2", Name: "bb"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Digest == v1.Digest {
		t.Fatal("v1 and v2 have the same digest")
	}
	prune(t, c)
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b", Snapshot: "snap"}); err != nil {
		t.Fatalf("a session from the snapshot after the name moved: %v", err)
	}
	if got := sh(t, c, "b", "cat /opt/x/3; echo; cat /app/mine; id -un"); got != "v1\nmine\napp\n" {
		t.Errorf("a session from the snapshot sees %q, want v1's files and the snapshot's", got)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "c", Image: "bb"}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "c", "cat /opt/x/3; test -e /app/mine || echo none"); got != "v2none\n" {
		t.Errorf("a new session of bb sees %q, want v2 without the snapshot's file", got)
	}
	rc, err := c.ExportSnapshot(bg, "snap")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Deleting the snapshot ends its lease: the next prune takes v1.
	if err := c.DeleteSnapshot(bg, "snap"); client.Code(err) != "conflict" {
		t.Errorf("DeleteSnapshot while b uses it = %v, want conflict", err)
	}
	for _, id := range []string{"b", "c"} {
		if err := c.DeleteSession(bg, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteSnapshot(bg, "snap"); err != nil {
		t.Fatal(err)
	}
	prune(t, c, v1.Digest)
	if blobExists(t, h, v1.Digest) {
		t.Errorf("v1's content is still stored after its snapshot and a prune")
	}

	// An import of the snapshot is stored, but sessions from it say which
	// content they need until a pull brings it back.
	imp, err := c.ImportSnapshot(bg, "imp", bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("ImportSnapshot without its image content: %v", err)
	}
	if imp.ImageDigest != v1.Digest {
		t.Errorf("the imported snapshot applies to %s, want %s", imp.ImageDigest, v1.Digest)
	}
	_, err = c.CreateSession(bg, &api.CreateSessionRequest{ID: "d", Snapshot: "imp"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != "conflict" || !strings.Contains(ce.Message, v1.Digest) {
		t.Fatalf("a session from a snapshot without its image content = %v, want a conflict naming %s", err, v1.Digest)
	}
	again, err := c.PullImage(bg, &api.PullImageRequest{Ref: reg + "/test/bb:v1", Name: "old"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != v1.Digest {
		t.Fatalf("v1 pulled again has digest %s, want %s", again.Digest, v1.Digest)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "d", Snapshot: "imp"}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "d", "cat /opt/x/3; echo; cat /app/mine"); got != "v1\nmine\n" {
		t.Errorf("a session from the imported snapshot sees %q", got)
	}
	if err := c.DeleteSession(bg, "d"); err != nil {
		t.Fatal(err)
	}
	// The first session leased the content to the snapshot too.
	if err := c.DeleteImage(bg, "old"); err != nil {
		t.Fatal(err)
	}
	prune(t, c)
	if err := c.DeleteSnapshot(bg, "imp"); err != nil {
		t.Fatal(err)
	}
	prune(t, c, v1.Digest)
	checkLayersGone(t, h)
}

// TestSnapshotImageLeasesAtRestart: a daemon that starts drops the image
// leases of snapshots that are gone and leases the content of snapshots
// that hold no lease (those of a daemon from before snapshot leases).
func TestSnapshotImageLeasesAtRestart(t *testing.T) {
	reg := testRegistry(t)
	pushImage(t, reg+"/test/bb:v1", busyboxImage(t, "v1"))
	pushImage(t, reg+"/test/bb:v2", busyboxImage(t, "v2"))
	h1 := daemontest.Start(t, nil)
	c := h1.Client
	v1, err := c.PullImage(bg, &api.PullImageRequest{Ref: reg + "/test/bb:v1", Name: "bb"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a", Image: "bb"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "a", "echo mine > /app/mine")
	if _, err := c.Snapshot(bg, "a", "keep"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSession(bg, "a"); err != nil {
		t.Fatal(err)
	}
	v2, err := c.PullImage(bg, &api.PullImageRequest{Ref: reg + "/test/bb:v2", Name: "bb"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h1.Stop()

	// keep's lease is lost, and a snapshot that no longer exists leases v2.
	leases := filepath.Join(h1.DataDir, "images", "leases.json")
	b, err := json.Marshal(map[string]any{"version": 1, "leases": map[string]string{"snapshot:n00000000deadbeef": v2.Digest}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leases, b, 0o600); err != nil {
		t.Fatal(err)
	}

	h2 := restartAt(t, h1, config.ShutdownDestroy)
	c = h2.Client
	prune(t, c) // v1 leased again by keep, v2 named bb
	if err := c.DeleteImage(bg, "bb"); err != nil {
		t.Fatal(err)
	}
	prune(t, c, v2.Digest)
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b", Snapshot: "keep"}); err != nil {
		t.Fatalf("a session from the snapshot after the restart: %v", err)
	}
	if got := sh(t, c, "b", "cat /opt/x/3; echo; cat /app/mine"); got != "v1\nmine\n" {
		t.Errorf("a session from the snapshot sees %q", got)
	}
	if err := c.DeleteSession(bg, "b"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(bg, "keep"); err != nil {
		t.Fatal(err)
	}
	prune(t, c, v1.Digest)
	checkLayersGone(t, h2)
}
