package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
)

func newStartCommand(a *app) *cobra.Command {
	var (
		req  api.StartProcessRequest
		argv bool
		env  []string
	)
	cmd := &cobra.Command{
		Use:   "start [flags] SESSION -- COMMAND [ARGS...]",
		Short: "Start a process in a session and print its id",
		Long: `Start a process in a session and print its id. The process runs on its own,
whether or not a client is connected, and its output is kept (a bounded
amount) for "warren logs". It runs in the session's current cwd and exported
environment; unlike exec, it changes no state of the session's shell.

The words after -- are joined with single spaces and run by bash -c (sh -c
where the image has no bash); with --argv they are run as a program and its
arguments.

With --tty the process runs on a pseudo-terminal (stdout and stderr are then
one stream), which "warren shell SESSION --process ID" attaches to. With
--stdin its stdin stays open for writes; without, it reads an empty stdin.`,
		Example: `  warren start demo -- python3 -m http.server 8000
  warren start --tty demo -- top
  warren start --argv --env PORT=9000 demo -- node server.js`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			words, err := commandWords(cmd, args, 1)
			if err != nil {
				return err
			}
			if argv {
				req.Argv = words
			} else {
				req.Command = strings.Join(words, " ")
			}
			if req.Env, err = parseKV("env", env); err != nil {
				return err
			}
			p, err := a.client().StartProcess(cmd.Context(), id, &req)
			if err != nil {
				return fmt.Errorf("start a process in session %s: %w", id, err)
			}
			fmt.Fprintln(a.stdout, p.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&argv, "argv", false, "run the words as a program and its arguments, without a shell")
	f.BoolVarP(&req.TTY, "tty", "t", false, "run the process on a pseudo-terminal")
	f.BoolVarP(&req.Stdin, "stdin", "i", false, "keep the process's stdin open for writes")
	f.StringVar(&req.Cwd, "cwd", "", "working directory of the process")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE of the process (repeatable)")
	return cmd
}

func newPsCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ps SESSION",
		Short: "List the processes of a session",
		Long: `List the processes started in a session with "warren start" or "warren shell",
running and exited. PID is the process id inside the sandbox; EXIT is the
exit code, or the signal that ended the process.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			procs, err := a.client().ListProcesses(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("list processes of session %s: %w", id, err)
			}
			if asJSON {
				if procs == nil {
					procs = []api.Process{}
				}
				return printJSON(a.stdout, procs)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tPID\tEXIT\tSTARTED\tCOMMAND")
			for _, p := range procs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", p.ID, p.State, p.Pid, exitOf(&p), age(now, p.StartedAt), commandOf(&p))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the processes as a JSON array")
	return cmd
}

// exitOf formats how a process ended: the signal that ended it, its exit
// code, or "-" while it runs.
func exitOf(p *api.Process) string {
	switch {
	case p.Signal != "":
		return p.Signal
	case p.ExitCode != nil:
		return strconv.Itoa(*p.ExitCode)
	}
	return "-"
}

// commandOf formats what a process runs.
func commandOf(p *api.Process) string {
	if p.Command != "" {
		return p.Command
	}
	return strings.Join(p.Argv, " ")
}

func newLogsCommand(a *app) *cobra.Command {
	var (
		follow bool
		offset int64
	)
	cmd := &cobra.Command{
		Use:   "logs [flags] SESSION ID",
		Short: "Print the output of a process",
		Long: `Print the output that a process started with "warren start" wrote so far,
stdout and stderr merged as it wrote them, exactly. With -f, keep printing
its output as it comes, until the process exits.

The daemon keeps a bounded amount of each process's output; when bytes from
--offset on were already dropped, a note on stderr says so and the output
starts at the oldest byte kept.`,
		Example: `  warren logs demo p1
  warren logs -f demo p1
  warren logs --offset 4096 demo p1`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, pid := args[0], args[1]
			if offset < 0 {
				return fmt.Errorf("--offset must not be negative")
			}
			rc, start, err := a.client().ReadProcessOutput(cmd.Context(), id, pid, offset, follow)
			if err != nil {
				return fmt.Errorf("output of process %s in session %s: %w", pid, id, err)
			}
			defer rc.Close()
			if start > offset {
				a.warn("%d bytes of output were dropped before they could be read; the output starts at offset %d", start-offset, start)
			}
			if _, err := io.Copy(a.stdout, rc); err != nil {
				return fmt.Errorf("output of process %s in session %s: %w", pid, id, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing output as it comes, until the process exits")
	f.Int64Var(&offset, "offset", 0, "start at this byte of the process's output")
	return cmd
}

func newKillCommand(a *app) *cobra.Command {
	var sig string
	cmd := &cobra.Command{
		Use:   "kill [flags] SESSION ID",
		Short: "Kill a process, or send it a signal",
		Long: `Without --signal, kill a process and its process group and remove it from
the session's list. With --signal, send it that signal (a name with or
without SIG, such as TERM or SIGINT, or a number) and leave it listed.`,
		Example: `  warren kill demo p1
  warren kill --signal INT demo p2`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, pid := args[0], args[1]
			c := a.client()
			if cmd.Flags().Changed("signal") {
				if sig == "" {
					return fmt.Errorf("--signal needs a signal name or number")
				}
				if err := c.SignalProcess(cmd.Context(), id, pid, sig); err != nil {
					return fmt.Errorf("signal process %s in session %s: %w", pid, id, err)
				}
				return nil
			}
			if err := c.KillProcess(cmd.Context(), id, pid); err != nil {
				return fmt.Errorf("kill process %s in session %s: %w", pid, id, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&sig, "signal", "s", "", "send this signal instead of killing and removing the process")
	return cmd
}
