package cli

import (
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
)

// newSessionCommand builds "warren session" and its subcommands.
func newSessionCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "session",
		Aliases: []string{"sessions"},
		Short:   "Create, list, inspect and delete sessions",
	}
	cmd.AddCommand(
		newSessionCreateCommand(a),
		newSessionListCommand(a),
		newSessionGetCommand(a),
		newSessionRemoveCommand(a),
	)
	return cmd
}

// limitFlags are the flags of a sandbox's limits, shared by session create
// and run.
type limitFlags struct {
	memoryMB, pids, diskMB int64
	cpus                   float64
}

func (l *limitFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int64Var(&l.memoryMB, "memory", 0, "memory limit in MiB (default: the daemon's)")
	f.Float64Var(&l.cpus, "cpus", 0, "CPU limit in cores, such as 0.5 (default: the daemon's)")
	f.Int64Var(&l.pids, "pids", 0, "process limit (default: the daemon's)")
	f.Int64Var(&l.diskMB, "disk", 0, "size limit of the writable layer in MiB (default: the daemon's)")
}

// limits returns the limits the flags set, or nil when they set none.
func (l *limitFlags) limits() (*api.Limits, error) {
	if l.memoryMB < 0 || l.cpus < 0 || l.pids < 0 || l.diskMB < 0 {
		return nil, fmt.Errorf("limits must not be negative")
	}
	if l.memoryMB == 0 && l.cpus == 0 && l.pids == 0 && l.diskMB == 0 {
		return nil, nil
	}
	return &api.Limits{MemoryMB: l.memoryMB, CPUs: l.cpus, Pids: l.pids, DiskMB: l.diskMB}, nil
}

func newSessionCreateCommand(a *app) *cobra.Command {
	var (
		req           api.CreateSessionRequest
		env, labels   []string
		lim           limitFlags
		netf          networkFlags
		ttl, lifetime time.Duration
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a session and print its id",
		Long: `Create a session and print its id (or, with --json, the session).

With --id the call is idempotent: creating an id that exists returns that
session.`,
		Example: `  warren session create --id demo --memory 512 --ttl 30m --env LANG=C.UTF-8
  warren session create --id dev --allow pypi.org:443 --allow files.pythonhosted.org:443
  warren session create --network open --deny '*.example.com'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.Env, err = parseKV("env", env); err != nil {
				return err
			}
			if req.Labels, err = parseKV("label", labels); err != nil {
				return err
			}
			if req.Limits, err = lim.limits(); err != nil {
				return err
			}
			if req.Network, err = netf.policy(); err != nil {
				return err
			}
			if ttl < 0 || lifetime < 0 {
				return fmt.Errorf("--ttl and --max-lifetime must not be negative")
			}
			req.TTLSeconds, req.MaxLifetimeSeconds = secondsUp(ttl), secondsUp(lifetime)
			s, err := a.client().CreateSession(cmd.Context(), &req)
			if err != nil {
				return fmt.Errorf("create session: %w", err)
			}
			if asJSON {
				return printJSON(a.stdout, s)
			}
			fmt.Fprintln(a.stdout, s.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.ID, "id", "", "the session's id ([a-z0-9][a-z0-9_-]{0,62}); default: the daemon picks one")
	f.StringVar(&req.Image, "image", "", "image to start from (default: the daemon's default image)")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringVar(&req.Cwd, "cwd", "", "initial working directory (default /workspace)")
	lim.register(cmd)
	netf.register(cmd)
	f.DurationVar(&ttl, "ttl", 0, "delete the session after this long unused, such as 30m (default: the daemon's)")
	f.DurationVar(&lifetime, "max-lifetime", 0, "delete the session this long after creation, used or not")
	f.StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	f.StringVar(&req.Workspace, "workspace", "", "workspace to mount at /workspace (see warren workspace)")
	f.StringVar(&req.WorkspaceMode, "workspace-mode", "", "mount the workspace rw (default) or ro")
	f.StringVar(&req.Snapshot, "snapshot", "", "snapshot to start from (see warren snapshot)")
	f.BoolVar(&asJSON, "json", false, "print the session as JSON")
	return cmd
}

func newSessionListCommand(a *app) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sessions",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := a.client()
			list := c.ListSessions
			if all {
				list = c.ListAllSessions
			}
			sessions, err := list(cmd.Context())
			if err != nil {
				return fmt.Errorf("list sessions: %w", err)
			}
			if asJSON {
				if sessions == nil {
					sessions = []api.Session{}
				}
				return printJSON(a.stdout, sessions)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			if all {
				fmt.Fprint(tw, "TENANT\t")
			}
			// A fleet names each session's node: a NODE column then.
			fleet := slices.ContainsFunc(sessions, func(s api.Session) bool { return s.Node != "" })
			fmt.Fprint(tw, "ID\tIMAGE\tSTATE\tCREATED\tEXPIRES\tMEMORY")
			if fleet {
				fmt.Fprint(tw, "\tNODE")
			}
			fmt.Fprintln(tw)
			for _, s := range sessions {
				if all {
					fmt.Fprintf(tw, "%s\t", orDash(s.Tenant))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s",
					s.ID, orDash(s.Image), s.State, age(now, s.CreatedAt), until(now, s.ExpiresAt), memory(&s))
				if fleet {
					fmt.Fprintf(tw, "\t%s", orDash(s.Node))
				}
				fmt.Fprintln(tw)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the sessions as a JSON array")
	cmd.Flags().BoolVar(&all, "all", false, "list the sessions of every tenant, with a TENANT column (admin)")
	return cmd
}

// memory formats a session's memory use and limit: "12MiB/512MiB".
func memory(s *api.Session) string {
	used, limit := "-", "-"
	if s.Usage != nil {
		used = humanBytes(int64(min(s.Usage.MemoryBytes, 1<<62)))
	}
	if s.Limits.MemoryMB > 0 {
		limit = humanBytes(s.Limits.MemoryMB << 20)
	}
	if used == "-" && limit == "-" {
		return "-"
	}
	return used + "/" + limit
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newSessionGetCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get SESSION",
		Aliases: []string{"inspect"},
		Short:   "Print a session as JSON",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client().GetSession(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get session %s: %w", args[0], err)
			}
			return printJSON(a.stdout, s)
		},
	}
}

func newSessionRemoveCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm SESSION...",
		Aliases: []string{"delete"},
		Short:   "Delete sessions",
		Long:    "Delete each session and everything of it, printing the ids deleted. Failures are reported and make warren exit 1 after trying every session.",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			failed := false
			for _, id := range args {
				if err := c.DeleteSession(cmd.Context(), id); err != nil {
					a.warn("delete session %s: %v", id, err)
					failed = true
					continue
				}
				fmt.Fprintln(a.stdout, id)
			}
			if failed {
				return exitError{code: 1}
			}
			return nil
		},
	}
}
