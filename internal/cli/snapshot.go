package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
)

// newSnapshotCommand builds "warren snapshot" and its subcommands.
func newSnapshotCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snapshots", "snap"},
		Short:   "Take, list, export and import snapshots of sessions' files",
		Long: `A snapshot is the files of a session at one moment (not its processes):
the session is frozen while the changes it made to its root filesystem are
copied. Start sessions from it with "warren session create --snapshot NAME",
or fork a session in one step with "warren fork".`,
	}
	cmd.AddCommand(newSnapshotCreateCommand(a), newSnapshotListCommand(a), newSnapshotGetCommand(a), newSnapshotRemoveCommand(a),
		newSnapshotExportCommand(a), newSnapshotImportCommand(a))
	return cmd
}

func newSnapshotCreateCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create SESSION NAME",
		Short: "Snapshot a session's files",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client().Snapshot(cmd.Context(), args[0], args[1])
			if err != nil {
				return fmt.Errorf("snapshot session %s: %w", args[0], err)
			}
			if asJSON {
				return printJSON(a.stdout, s)
			}
			fmt.Fprintln(a.stdout, s.Name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshot as JSON")
	return cmd
}

func newSnapshotListCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List snapshots",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sns, err := a.client().ListSnapshots(cmd.Context())
			if err != nil {
				return fmt.Errorf("list snapshots: %w", err)
			}
			if asJSON {
				if sns == nil {
					sns = []api.Snapshot{}
				}
				return printJSON(a.stdout, sns)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tIMAGE\tSIZE\tFROM\tCREATED\tUSED BY")
			for _, s := range sns {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", s.Name, s.Image, humanBytes(s.SizeBytes), orDash(s.Session), age(now, s.CreatedAt), len(s.UsedBy))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshots as a JSON array")
	return cmd
}

func newSnapshotGetCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"inspect"},
		Short:   "Print a snapshot as JSON",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client().GetSnapshot(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get snapshot %s: %w", args[0], err)
			}
			return printJSON(a.stdout, s)
		},
	}
}

func newSnapshotRemoveCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Delete snapshots",
		Long:    "Delete each snapshot, printing the names deleted. A snapshot that sessions started from is refused.",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return removeEach(a, args, "snapshot", func(name string) error { return a.client().DeleteSnapshot(cmd.Context(), name) })
		},
	}
}

func newSnapshotExportCommand(a *app) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:     "export NAME",
		Short:   "Write a snapshot as a zstd tarball",
		Example: "  warren snapshot export base-env -o base-env.tar.zst",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			rc, err := a.client().ExportSnapshot(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("export snapshot %s: %w", args[0], err)
			}
			defer rc.Close()
			w := a.stdout
			if out != "" && out != "-" {
				f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					return err
				}
				defer func() {
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}()
				w = f
			}
			if _, err := io.Copy(w, rc); err != nil {
				return fmt.Errorf("export snapshot %s: %w", args[0], err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default: standard output)")
	return cmd
}

func newSnapshotImportCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Store a zstd tarball from 'warren snapshot export' as a snapshot",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = a.stdin
			if args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			s, err := a.client().ImportSnapshot(cmd.Context(), args[0], r)
			if err != nil {
				return fmt.Errorf("import snapshot %s: %w", args[0], err)
			}
			fmt.Fprintln(a.stdout, s.Name)
			return nil
		},
	}
}

// newForkCommand builds "warren fork".
func newForkCommand(a *app) *cobra.Command {
	var req api.ForkRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fork SESSION",
		Short: "Start copies of a session's files as new sessions",
		Long: `Snapshot SESSION and start --count new sessions from the snapshot, printing
their ids. They get the session's files, image, limits, environment, user
and current directory; not its processes, shell variables or workspace.`,
		Example: "  warren fork s1 --count 3\n  warren fork s1 --id try-a --id try-b",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.client().Fork(cmd.Context(), args[0], &req)
			if err != nil {
				return fmt.Errorf("fork session %s: %w", args[0], err)
			}
			if asJSON {
				return printJSON(a.stdout, r)
			}
			for _, s := range r.Sessions {
				fmt.Fprintln(a.stdout, s.ID)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&req.Count, "count", 0, "number of new sessions, at most 10 (default: one per --id, else 1)")
	cmd.Flags().StringArrayVar(&req.IDs, "id", nil, "id of a new session (repeatable)")
	cmd.Flags().StringVar(&req.Snapshot, "snapshot", "", "keep the fork's snapshot under this name (default: deleted with the last fork)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshot and sessions as JSON")
	return cmd
}
