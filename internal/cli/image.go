package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
)

// newImageCommand builds "warren image" and its subcommands.
func newImageCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "image",
		Aliases: []string{"images"},
		Short:   "Import and list the root filesystems sessions start from",
	}
	cmd.AddCommand(newImageImportCommand(a), newImageListCommand(a))
	return cmd
}

func newImageImportCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "import NAME DIR|TARBALL",
		Short: "Store a root filesystem as an image",
		Long: `Store a root filesystem as the image NAME and print its name and digest.
The source is a directory (sent as a tar made on the fly, keeping owners and
symlinks) or a tarball, plain or gzip-compressed, sent as it is.`,
		Example: `  warren image import alpine ./alpine-rootfs
  warren image import python python-rootfs.tar.gz`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, src := args[0], args[1]
			fi, err := os.Stat(src)
			if err != nil {
				return err
			}
			c := a.client()
			var img *api.Image
			if fi.IsDir() {
				tr, wait := tarDir(src, tarOptions{keepOwner: true, skipped: func(n string) {
					a.warn("skipped %s: not a regular file, directory or symlink", filepath.Join(src, n))
				}})
				var upErr error
				img, upErr = c.ImportImage(cmd.Context(), name, tr)
				if err := wait(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
					return fmt.Errorf("archive %s: %w", src, err)
				}
				if upErr != nil {
					return fmt.Errorf("import image %s: %w", name, upErr)
				}
			} else {
				f, err := os.Open(src)
				if err != nil {
					return err
				}
				defer f.Close()
				if img, err = c.ImportImage(cmd.Context(), name, f); err != nil {
					return fmt.Errorf("import image %s: %w", name, err)
				}
			}
			fmt.Fprintf(a.stdout, "%s %s\n", img.Name, img.Digest)
			return nil
		},
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

// shortDigest shortens "sha256:<64 hex>" to "sha256:<12 hex>".
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}
