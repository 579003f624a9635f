package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/mcpapi"
)

// newMCPCommand builds "warren mcp": warren's tools for an AI agent, over
// MCP on stdin and stdout.
func newMCPCommand(a *app) *cobra.Command {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	var embedded bool
	var logLevel string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve warren's tools to an AI agent over MCP (stdio)",
		Long: `Serve warren's MCP tools (create_session, exec, read_file, edit_file, ...) on
stdin and stdout, for an MCP host such as Claude Code, Cursor or Claude Desktop
that starts warren as a local server. Stdout carries MCP messages only; logs go
to stderr.

By default the tools call the running daemon that --addr names (WARREN_ADDR,
else ` + DefaultAddr + `), with --token, WARREN_TOKEN or, for a local daemon, its
admin key file. With --embedded, warren starts a daemon of its own inside this
process instead (root needed, as for warren serve), serves the tools against it
and deletes its sessions when the host disconnects. The daemon also serves MCP
itself, over HTTP at /mcp.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: use debug, info, warn or error", logLevel)
			}
			log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lv}))
			ctx, stop := signal.NotifyContext(cmd.Context(), unix.SIGTERM, unix.SIGINT)
			defer stop()
			if !embedded {
				c := a.client()
				if err := c.Health(ctx); err != nil {
					// The daemon may come up later; every tool call says
					// what is wrong until then.
					log.Warn("the warren daemon does not answer; tools fail until it does (start it with warren serve, or use warren mcp --embedded)", "error", err)
				}
				return serveMCP(ctx, c, a.stdin, a.stdout, log)
			}
			return a.mcpEmbedded(ctx, cmd, cfg, log)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&embedded, "embedded", false, "start a daemon in this process instead of calling a running one")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "--embedded: directory for the database, images and sandboxes (env WARREN_DATA_DIR)")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "--embedded: address the daemon also serves its API on (default: a free loopback port)")
	f.StringVar(&cfg.CgroupParent, "cgroup-parent", cfg.CgroupParent, "--embedded: cgroup under which sessions are placed (env WARREN_CGROUP_PARENT)")
	f.IntVar(&cfg.Session.MaxSessions, "max-sessions", cfg.Session.MaxSessions, "--embedded: most sessions at once")
	f.BoolVar(&cfg.AllowNoUserNS, "allow-no-userns", false, "--embedded: run where user namespaces are unavailable (sandboxed code then runs as an unprivileged host user)")
	f.BoolVar(&cfg.NoDiskQuota, "no-disk-quota", false, "--embedded: run without disk limits on sessions' writable layers")
	return cmd
}

// mcpEmbedded runs a daemon in this process and serves the tools against
// it until the MCP host disconnects or ctx ends; then the daemon stops and
// deletes its sessions.
func (a *app) mcpEmbedded(ctx context.Context, cmd *cobra.Command, cfg config.Config, log *slog.Logger) error {
	env := config.Default()
	if err := env.ApplyEnv(a.getenv); err != nil {
		return err
	}
	flags := cmd.Flags()
	if !flags.Changed("data-dir") {
		cfg.DataDir = env.DataDir
	}
	if !flags.Changed("cgroup-parent") {
		cfg.CgroupParent = env.CgroupParent
	}
	cfg.CgroupFavorDynMods = env.CgroupFavorDynMods
	// The daemon lives as long as the host's connection: its sessions go
	// with it.
	cfg.Shutdown = config.ShutdownDestroy
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	d, err := daemon.New(dctx, cfg, log)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(dctx) }()
	key := d.AdminKey()
	if key == "" {
		b, err := os.ReadFile(filepath.Join(cfg.DataDir, daemon.AdminKeyFile))
		if err != nil {
			cancel()
			//lint:ignore S1005 errcheck wants the daemon's error seen as dropped on purpose: the read error below is the one to report.
			_ = <-served
			return fmt.Errorf("the embedded daemon has keys but its admin key file cannot be read: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	addr := "http://" + d.Addr().String()
	log.Info("embedded daemon started", "addr", addr, "data_dir", cfg.DataDir)
	c := client.New(addr, client.WithToken(key), client.WithUserAgent("warren-mcp"))
	err = serveMCP(ctx, c, a.stdin, a.stdout, log)
	cancel()
	return errors.Join(err, <-served)
}

// serveMCP serves the tools over c on in and out until the client
// disconnects (in ends) or ctx ends.
func serveMCP(ctx context.Context, c *client.Client, in io.Reader, out io.Writer, log *slog.Logger) error {
	srv := mcpapi.NewServer(mcpapi.NewClientBackend(c), mcpapi.Options{Version: daemon.Version, Log: log})
	err := srv.Run(ctx, mcpapi.StdioTransport(in, out))
	if err != nil && (errors.Is(err, io.EOF) || ctx.Err() != nil) {
		return nil // the host hung up, or we were told to stop
	}
	return err
}
