package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
)

// newWorkspaceCommand builds "warren workspace" and its subcommands.
func newWorkspaceCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "workspace",
		Aliases: []string{"workspaces", "ws"},
		Short:   "Manage workspaces: directories that outlive sessions, mounted at /workspace",
		Long: `A workspace is a named directory of your tenant that outlives sessions.
Create a session with --workspace NAME to have it mounted at /workspace
(read-write; --workspace-mode ro for read-only). One session at a time may
mount a workspace read-write, unless it was created --shared.`,
	}
	cmd.AddCommand(newWorkspaceCreateCommand(a), newWorkspaceListCommand(a), newWorkspaceGetCommand(a), newWorkspaceRemoveCommand(a))
	return cmd
}

func newWorkspaceCreateCommand(a *app) *cobra.Command {
	var req api.CreateWorkspaceRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a workspace",
		Example: "  warren workspace create proj --size-mb 2048\n  warren session create --workspace proj",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			w, err := a.client().CreateWorkspace(cmd.Context(), &req)
			if err != nil {
				return fmt.Errorf("create workspace %s: %w", args[0], err)
			}
			if asJSON {
				return printJSON(a.stdout, w)
			}
			fmt.Fprintln(a.stdout, w.Name)
			return nil
		},
	}
	cmd.Flags().Int64Var(&req.SizeMB, "size-mb", 0, "size limit in MiB (default: the daemon's default disk limit)")
	cmd.Flags().BoolVar(&req.Shared, "shared", false, "let several sessions mount it read-write at once")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workspace as JSON")
	return cmd
}

func newWorkspaceListCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List workspaces",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := a.client().ListWorkspaces(cmd.Context())
			if err != nil {
				return fmt.Errorf("list workspaces: %w", err)
			}
			if asJSON {
				if ws == nil {
					ws = []api.Workspace{}
				}
				return printJSON(a.stdout, ws)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tUSED\tSIZE\tSHARED\tCREATED\tMOUNTED BY")
			for _, w := range ws {
				var by []string
				for _, m := range w.MountedBy {
					by = append(by, m.Session+":"+m.Mode)
				}
				size := "-"
				if w.SizeMB > 0 {
					size = humanBytes(w.SizeMB << 20)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", w.Name, humanBytes(w.UsedBytes), size, w.Shared, age(now, w.CreatedAt), orDash(strings.Join(by, ",")))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workspaces as a JSON array")
	return cmd
}

func newWorkspaceGetCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"inspect"},
		Short:   "Print a workspace as JSON",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := a.client().GetWorkspace(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get workspace %s: %w", args[0], err)
			}
			return printJSON(a.stdout, w)
		},
	}
}

func newWorkspaceRemoveCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Delete workspaces and their files",
		Long:    "Delete each workspace and its files, printing the names deleted. A workspace a session has mounted is refused.",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return removeEach(a, args, "workspace", func(name string) error { return a.client().DeleteWorkspace(cmd.Context(), name) })
		},
	}
}

// removeEach deletes every name with del, printing the ones deleted; a
// failure is reported and makes warren exit 1 after trying them all.
func removeEach(a *app, names []string, what string, del func(string) error) error {
	failed := false
	for _, n := range names {
		if err := del(n); err != nil {
			a.warn("delete %s %s: %v", what, n, err)
			failed = true
			continue
		}
		fmt.Fprintln(a.stdout, n)
	}
	if failed {
		return exitError{code: 1}
	}
	return nil
}
