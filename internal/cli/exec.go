package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
)

// execFlags are the flags of one command, shared by exec and run.
type execFlags struct {
	argv    bool
	timeout time.Duration
	cwd     string
	env     []string
	stdin   bool
}

func (e *execFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&e.argv, "argv", false, "run the words as a program and its arguments, without a shell")
	f.DurationVar(&e.timeout, "timeout", 0, "kill the command after this long, such as 30s (default: the daemon's)")
	f.StringVar(&e.cwd, "cwd", "", "working directory of this command only")
	f.StringArrayVar(&e.env, "env", nil, "environment variable KEY=VALUE of this command only (repeatable)")
	f.BoolVarP(&e.stdin, "stdin", "i", false, "send this process's standard input to the command")
}

// request builds the exec request of words.
func (e *execFlags) request(a *app, words []string) (*api.ExecRequest, error) {
	req := &api.ExecRequest{Cwd: e.cwd}
	if e.argv {
		req.Argv = words
	} else {
		req.Command = strings.Join(words, " ")
	}
	if e.timeout < 0 {
		return nil, fmt.Errorf("--timeout must not be negative")
	}
	req.TimeoutMs = millisUp(e.timeout)
	var err error
	if req.Env, err = parseKV("env", e.env); err != nil {
		return nil, err
	}
	if e.stdin {
		// The request is JSON, so stdin is sent whole.
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		if utf8.Valid(b) {
			s := string(b)
			req.Stdin = &s
		} else {
			s := base64.StdEncoding.EncodeToString(b)
			req.StdinBase64 = &s
		}
	}
	return req, nil
}

// commandWords returns the words of the command after the flags: all of
// args, with "--" (which cobra removes) only at or before skip, the number of
// arguments that precede the command.
func commandWords(cmd *cobra.Command, args []string, skip int) ([]string, error) {
	if dash := cmd.ArgsLenAtDash(); dash > skip {
		return nil, fmt.Errorf("unexpected arguments %q before --", args[skip:dash])
	}
	words := args[skip:]
	if len(words) == 0 {
		return nil, fmt.Errorf("no command given: put it after --")
	}
	return words, nil
}

func newExecCommand(a *app) *cobra.Command {
	var (
		ef       execFlags
		noStream bool
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] SESSION -- COMMAND [ARGS...]",
		Short: "Run a command in a session",
		Long: `Run a command in a session, print its stdout and stderr as it writes them,
and exit with its exit code. With --no-stream the output is printed when the
command is done.

By default the words after -- are joined with single spaces and run by the
session's persistent shell, as ssh does: "warren exec demo -- cd /tmp" changes
the session's cwd for the next command, and variables, functions and
activated environments carry over too. Quote what the local shell must not
interpret: warren exec demo -- 'ls *.py | wc -l'.

With --argv the words are run as a program and its arguments, without a
shell and without changing the session's state.`,
		Example: `  warren exec demo -- cd /tmp
  warren exec demo -- 'echo $PWD'
  warren exec --argv demo -- python3 -c 'print(1)'
  echo data | warren exec -i demo -- wc -c`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			words, err := commandWords(cmd, args, 1)
			if err != nil {
				return err
			}
			req, err := ef.request(a, words)
			if err != nil {
				return err
			}
			var res *api.ExecResult
			if noStream {
				res, err = a.client().Exec(cmd.Context(), id, req)
			} else {
				res, err = a.client().ExecStream(cmd.Context(), id, req, a.writeOutput)
			}
			if err != nil {
				return fmt.Errorf("exec in session %s: %w", id, err)
			}
			return a.printResult(res)
		},
	}
	ef.register(cmd)
	cmd.Flags().BoolVar(&noStream, "no-stream", false, "print the output when the command is done instead of as it comes")
	return cmd
}

// writeOutput writes a chunk of a command's streamed output exactly, to
// stdout or stderr as the command wrote it.
func (a *app) writeOutput(stream string, p []byte) error {
	w := a.stdout
	if stream == "stderr" {
		w = a.stderr
	}
	if _, err := w.Write(p); err != nil {
		return fmt.Errorf("write %s: %w", stream, err)
	}
	return nil
}

func newRunCommand(a *app) *cobra.Command {
	var (
		ef    execFlags
		lim   limitFlags
		netf  networkFlags
		image string
	)
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Run one command in a fresh sandbox, destroyed afterwards",
		Long: `Run one command in a fresh sandbox that is destroyed afterwards, print its
stdout and stderr, and exit with its exit code. The words are run by a shell
unless --argv is given, as with exec: quote what the local shell must not
split, or use --argv.

With --image and no command at all, the image's own command runs: its OCI
entrypoint followed by its cmd, as a program and its arguments.

With --network, --allow or --deny the sandbox gets that egress policy. The
daemon's one-call run has no network, so then warren creates a session,
runs the command in it and deletes it: the session is listed while the
command runs, and is left to its idle TTL if warren is killed first.`,
		Example: `  warren run -- uname -a
  warren run --image python:3.12-slim --memory 256 --argv -- python3 -c 'print(1)'
  warren run --image python:3.12-slim -- 'python3 -c "print(1)"'
  warren run --image hello
  warren run --image python:3.12-slim --allow pypi.org:443 --allow files.pythonhosted.org:443 -- pip download requests`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var words []string
			var err error
			if len(args) == 0 && image != "" && cmd.ArgsLenAtDash() < 0 {
				// The image's own command.
				img, err := a.client().GetImage(cmd.Context(), image)
				if err != nil {
					return fmt.Errorf("run: %w", err)
				}
				words = append(append(words, img.Entrypoint...), img.Cmd...)
				if len(words) == 0 {
					return fmt.Errorf("no command given, and image %s has no entrypoint or cmd: put one after --", image)
				}
				ef.argv = true
			} else if words, err = commandWords(cmd, args, 0); err != nil {
				return err
			}
			req, err := ef.request(a, words)
			if err != nil {
				return err
			}
			limits, err := lim.limits()
			if err != nil {
				return err
			}
			policy, err := netf.policy()
			if err != nil {
				return err
			}
			if policy != nil {
				return a.runWithNetwork(cmd.Context(), &api.CreateSessionRequest{Image: image, Limits: limits, Network: policy}, req)
			}
			res, err := a.client().Run(cmd.Context(), &api.RunRequest{Image: image, Limits: limits, ExecRequest: *req})
			if err != nil {
				return fmt.Errorf("run: %w", err)
			}
			return a.printResult(res)
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "image to start from (default: the daemon's default image)")
	lim.register(cmd)
	netf.register(cmd)
	ef.register(cmd)
	return cmd
}

// runWithNetwork is run for a sandbox with egress: create, exec, delete.
func (a *app) runWithNetwork(ctx context.Context, create *api.CreateSessionRequest, req *api.ExecRequest) error {
	c := a.client()
	s, err := c.CreateSession(ctx, create)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	res, err := c.Exec(ctx, s.ID, req)
	// The session goes whatever happened, even when ctx was cancelled.
	if derr := c.DeleteSession(context.WithoutCancel(ctx), s.ID); derr != nil {
		a.warn("delete session %s: %v", s.ID, derr)
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return a.printResult(res)
}

// printResult writes a command's stdout and stderr exactly (none for a
// streamed result, whose output was written as it came), notes what went
// wrong around it, and returns the command's exit code as an error (nil for
// 0).
func (a *app) printResult(res *api.ExecResult) error {
	if err := writeStream(a.stdout, res.Stdout, res.StdoutBase64); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	if err := writeStream(a.stderr, res.Stderr, res.StderrBase64); err != nil {
		return fmt.Errorf("write stderr: %w", err)
	}
	if res.TimedOut {
		a.warn("the command timed out and was killed")
	}
	if res.OOMKilled {
		a.warn("the kernel's OOM killer ended a process of the command: the session hit its memory limit")
	}
	if res.Signal != "" && !res.TimedOut {
		a.warn("the command was killed by %s", res.Signal)
	}
	if res.Truncated {
		a.warn("output was truncated: it exceeded the output cap")
	}
	if res.ShellRestarted {
		a.warn("the session's shell ended and was restarted: cwd and exported variables were kept, other shell state was lost")
	}
	return exitStatus(res.ExitCode)
}

// exitStatus returns a remote command's exit code as the error that makes
// warren exit with it (nil for 0).
func exitStatus(code int) error {
	switch {
	case code == 0:
		return nil
	case code > 0 && code < 256:
		return exitError{code: code}
	default:
		return exitError{code: 1} // not a status a process can exit with
	}
}

// writeStream writes the exact bytes of a stream: the base64 form when the
// daemon sent one (the text was not valid UTF-8), else the text.
func writeStream(w io.Writer, text, b64 string) error {
	if b64 != "" {
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return fmt.Errorf("decode base64 output: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	_, err := io.WriteString(w, text)
	return err
}
