package cli

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
)

// newImageCommand builds "warren image" and its subcommands.
func newImageCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "image",
		Aliases: []string{"images"},
		Short:   "Pull, import, list, inspect and remove the root filesystems sessions start from",
	}
	cmd.AddCommand(
		newImagePullCommand(a),
		newImageImportCommand(a),
		newImageListCommand(a),
		newImageInspectCommand(a),
		newImageRemoveCommand(a),
		newImagePruneCommand(a),
	)
	return cmd
}

func newImagePullCommand(a *app) *cobra.Command {
	var (
		platform, name string
		quiet          bool
	)
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from an OCI registry into the daemon",
		Long: `Have the daemon pull the image REF from its registry, flatten its layers and
store it, then print its name and digest. REF is what docker takes: a Docker
Hub short name (python:3.12-slim), another registry's image
(ghcr.io/org/tool:v1) or a digest (busybox@sha256:...).

The local name is the last component of the repository, with :TAG unless the
tag is latest ("python:3.12-slim", "tool:v1"); --name picks another. The
daemon pulls for its own platform unless --platform names one, and reads
registry credentials from its own Docker config (~/.docker/config.json of
the user it runs as, or $DOCKER_CONFIG). Progress goes to stderr: a live
display on a terminal, a line per step otherwise.`,
		Example: `  warren image pull python:3.12-slim
  warren image pull --platform linux/arm64 --name node node:22-bookworm-slim`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := args[0]
			req := &api.PullImageRequest{Ref: ref, Platform: platform, Name: name}
			var onProgress func(api.PullProgress) error
			var disp *pullDisplay
			if !quiet {
				disp = newPullDisplay(a.stderr, ref, isTerminal(a.stderr), a.now)
				onProgress = disp.update
			}
			img, err := a.client().PullImage(cmd.Context(), req, onProgress)
			if err != nil {
				return fmt.Errorf("pull %s: %w", ref, err)
			}
			if disp != nil {
				_ = disp.done("done") // the display is cosmetic; the result line follows
			}
			fmt.Fprintf(a.stdout, "%s %s\n", img.Name, img.Digest)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&platform, "platform", "", "platform to pull, os/arch[/variant] (default: the daemon's)")
	f.StringVar(&name, "name", "", "local name of the image (default: from REF)")
	f.BoolVarP(&quiet, "quiet", "q", false, "show no progress")
	return cmd
}

func newImageImportCommand(a *app) *cobra.Command {
	var format, platform string
	cmd := &cobra.Command{
		Use:   "import NAME DIR|ARCHIVE",
		Short: "Store a root filesystem, an OCI layout or a docker save archive as an image",
		Long: `Store an image as NAME and print its name and digest. The source is:

  - a directory holding a root filesystem, sent as a tar made on the fly
    that keeps owners and symlinks;
  - a directory holding an OCI image layout (oci-layout, index.json, blobs/);
  - a tarball, plain or gzip-compressed, sent as it is: a root filesystem, an
    OCI layout, or the archive of "docker save" of one image.

--format auto (the default) tells them apart by the oci-layout and
manifest.json files. The image of an OCI layout or docker archive keeps its
environment, working directory, user and command as session defaults; the
daemon picks the image of its own platform unless --platform names one.
See docs/IMAGES.md for building Python or Node images with debootstrap.`,
		Example: `  warren image import alpine ./alpine-rootfs
  warren image import python python-rootfs.tar.gz
  docker save python:3.12-slim | gzip > py.tar.gz && warren image import python:3.12 py.tar.gz
  warren image import --platform linux/arm64 tool ./oci-layout-dir`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, src := args[0], args[1]
			fi, err := os.Stat(src)
			if err != nil {
				return err
			}
			f := format
			if f == "auto" {
				if f, err = detectImageFormat(src, fi); err != nil {
					return err
				}
			}
			var send string // "" for the rootfs default
			switch f {
			case client.FormatRootfs:
			case client.FormatOCILayout, client.FormatDockerArchive:
				send = f
			default:
				return fmt.Errorf("--format %q: want auto, rootfs, oci-layout or docker-archive", format)
			}
			if platform != "" && send == "" {
				return fmt.Errorf("--platform applies to OCI layouts and docker archives only")
			}
			if fi.IsDir() && f == client.FormatDockerArchive {
				return fmt.Errorf("%s is a directory; a docker save archive is a file", src)
			}
			c := a.client()
			var img *api.Image
			if fi.IsDir() {
				tr, wait := tarDir(src, tarOptions{keepOwner: f == client.FormatRootfs, skipped: func(n string) {
					a.warn("skipped %s: not a regular file, directory or symlink", filepath.Join(src, n))
				}})
				var upErr error
				img, upErr = c.ImportImageFrom(cmd.Context(), name, send, platform, tr)
				if err := wait(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
					return fmt.Errorf("archive %s: %w", src, err)
				}
				if upErr != nil {
					return fmt.Errorf("import image %s: %w", name, upErr)
				}
			} else {
				file, err := os.Open(src)
				if err != nil {
					return err
				}
				defer file.Close()
				if img, err = c.ImportImageFrom(cmd.Context(), name, send, platform, file); err != nil {
					return fmt.Errorf("import image %s: %w", name, err)
				}
			}
			fmt.Fprintf(a.stdout, "%s %s\n", img.Name, img.Digest)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "auto", "what the source is: auto, rootfs, oci-layout or docker-archive")
	cmd.Flags().StringVar(&platform, "platform", "", "platform of the image to take from an OCI layout or docker archive, os/arch[/variant] (default: the daemon's)")
	return cmd
}

// rootfsTopDirs are top-level directories of a root filesystem, which no
// OCI layout or docker archive has: finding one ends the scan of a tarball.
var rootfsTopDirs = map[string]bool{"bin": true, "etc": true, "usr": true, "lib": true, "sbin": true, "var": true}

// detectImageFormat tells what src holds: an OCI layout has an oci-layout
// file at its top, a docker save archive a manifest.json (docker 25 and
// later write both: it is read as a docker archive). Anything else is a
// root filesystem; a tarball that cannot be read is sent as one too, for
// the daemon to judge.
func detectImageFormat(src string, fi os.FileInfo) (string, error) {
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(src, "oci-layout")); err == nil {
			return client.FormatOCILayout, nil
		}
		return client.FormatRootfs, nil
	}
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return client.FormatRootfs, nil
		}
		defer zr.Close()
		r = zr
	}
	found := client.FormatRootfs
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return found, nil // the end, or not a tar: the daemon judges
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "/"))
		switch {
		case name == "manifest.json":
			return client.FormatDockerArchive, nil
		case name == "oci-layout":
			found = client.FormatOCILayout // docker's archives have manifest.json too
		case rootfsTopDirs[strings.SplitN(name, "/", 2)[0]]:
			return client.FormatRootfs, nil
		}
	}
}

func newImageListCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			images, err := a.client().ListImages(cmd.Context())
			if err != nil {
				return fmt.Errorf("list images: %w", err)
			}
			if asJSON {
				if images == nil {
					images = []api.Image{}
				}
				return printJSON(a.stdout, images)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tCREATED")
			for _, img := range images {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", img.Name, shortDigest(img.Digest), humanBytes(img.Size), age(now, img.CreatedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the images as a JSON array")
	return cmd
}

func newImageInspectCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect NAME",
		Short: "Print an image's details as JSON",
		Long: `Print an image as JSON: its digest, size, when it was stored and where it came
from, how many layers it was flattened from, and the defaults it gives
sessions (env, working_dir, user) with the OCI entrypoint and cmd.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, err := a.client().GetImage(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("inspect image %s: %w", args[0], err)
			}
			return printJSON(a.stdout, img)
		},
	}
}

func newImageRemoveCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"remove", "delete"},
		Short:   "Remove images",
		Long: `Remove the names of images. The daemon refuses while sessions created from an
image exist, and names them. The content is deleted by "warren image prune".`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := 0
			for _, name := range args {
				if err := a.client().DeleteImage(cmd.Context(), name); err != nil {
					a.warn("remove image %s: %v", name, err)
					failed++
					continue
				}
				fmt.Fprintln(a.stdout, name)
			}
			if failed > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
}

func newImagePruneCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Delete image content that no name points to and no session or snapshot uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := a.client().PruneImages(cmd.Context())
			if err != nil {
				return fmt.Errorf("prune images: %w", err)
			}
			for _, d := range res.Deleted {
				fmt.Fprintf(a.stdout, "deleted %s\n", d)
			}
			fmt.Fprintf(a.stdout, "reclaimed %s\n", humanBytes(res.ReclaimedBytes))
			return nil
		},
	}
}

// shortDigest shortens "sha256:<64 hex>" to "sha256:<12 hex>".
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}
