package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/doctor"
)

// addDaemonCommands adds the commands that run on the daemon's side of the
// client package: serve, doctor, version and the hidden init and agent.
func addDaemonCommands(root *cobra.Command) {
	root.AddCommand(serveCmd(), versionCmd(), doctorCmd(), internalCmd("init"), internalCmd("agent"))
}

// internalCmd documents the sandbox's own programs. main dispatches them
// before cobra runs; reaching this means someone typed them by hand.
func internalCmd(name string) *cobra.Command {
	return &cobra.Command{
		Use:    name,
		Short:  "internal: the sandbox's " + name + "; not for direct use",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%s runs inside a sandbox started by the daemon; it is not for direct use", name)
		},
	}
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print warren's version",
		Run: func(cmd *cobra.Command, _ []string) {
			v := daemon.Version
			if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && len(s.Value) >= 12 {
						v = "dev-" + s.Value[:12]
					}
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "warren", v)
		},
	}
}

func serveCmd() *cobra.Command {
	cfg := config.Default()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the warren daemon",
		Long: `Run the warren daemon on embedded defaults: the API on 127.0.0.1:7433, state
in /var/lib/warren. Flags override WARREN_* environment variables, which
override the defaults. On SIGTERM or SIGINT the daemon stops accepting
requests, lets running ones finish for a short grace period, then deletes every
session; nothing is left on the host.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Flags the user set win over the environment.
			fromEnv := config.Default()
			if err := fromEnv.ApplyEnv(os.Getenv); err != nil {
				return err
			}
			flags := cmd.Flags()
			if !flags.Changed("listen") {
				cfg.Listen = fromEnv.Listen
			}
			if !flags.Changed("data-dir") {
				cfg.DataDir = fromEnv.DataDir
			}
			if !flags.Changed("cgroup-parent") {
				cfg.CgroupParent = fromEnv.CgroupParent
			}
			if !flags.Changed("log-format") {
				cfg.LogFormat = fromEnv.LogFormat
			}
			if !flags.Changed("log-level") {
				cfg.LogLevel = fromEnv.LogLevel
			}
			if !flags.Changed("max-sessions") {
				cfg.Session.MaxSessions = fromEnv.Session.MaxSessions
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			log := newLogger(cfg.LogFormat, cfg.LogLevel)
			ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
			defer stop()
			d, err := daemon.New(ctx, cfg, log)
			if err != nil {
				return err
			}
			if k := d.AdminKey(); k != "" {
				// Once, on the terminal that started the daemon, never in
				// the log stream.
				fmt.Fprintf(cmd.OutOrStdout(), "warren: first start, created an admin key (also in %s, mode 0600):\n\n    %s\n\nSend it as \"Authorization: Bearer <key>\"; the warren CLI on this host reads the file itself.\n\n",
					filepath.Join(cfg.DataDir, daemon.AdminKeyFile), k)
			}
			return d.Serve(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "address to serve the API on (env WARREN_LISTEN)")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for the database, images and sandboxes (env WARREN_DATA_DIR)")
	f.StringVar(&cfg.CgroupParent, "cgroup-parent", cfg.CgroupParent, "cgroup under which sessions are placed (env WARREN_CGROUP_PARENT)")
	f.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "json or text (env WARREN_LOG_FORMAT)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error (env WARREN_LOG_LEVEL)")
	f.IntVar(&cfg.Session.MaxSessions, "max-sessions", cfg.Session.MaxSessions, "most sessions at once (env WARREN_MAX_SESSIONS)")
	f.Int64Var(&cfg.Session.DefaultLimits.MemoryMB, "default-memory-mb", cfg.Session.DefaultLimits.MemoryMB, "memory limit of a session that asks for none")
	f.Float64Var(&cfg.Session.DefaultLimits.CPUs, "default-cpus", cfg.Session.DefaultLimits.CPUs, "CPU limit of a session that asks for none")
	f.Int64Var(&cfg.Session.DefaultLimits.Pids, "default-pids", cfg.Session.DefaultLimits.Pids, "process limit of a session that asks for none")
	f.DurationVar(&cfg.Session.DefaultIdleTTL, "idle-ttl", cfg.Session.DefaultIdleTTL, "idle time after which a session is deleted, unless it asks otherwise")
	f.DurationVar(&cfg.Session.DefaultTimeout, "exec-timeout", cfg.Session.DefaultTimeout, "default timeout of a command")
	f.Int64Var(&cfg.Session.MaxFileBytes, "max-file-bytes", cfg.Session.MaxFileBytes, "largest file the file API moves")
	f.Int64Var(&cfg.Session.DefaultLimits.DiskMB, "default-disk-mb", cfg.Session.DefaultLimits.DiskMB, "writable-layer limit of a session that asks for none")
	f.BoolVar(&cfg.AllowNoUserNS, "allow-no-userns", false, "run where user namespaces are unavailable: sandboxed code then runs as an unprivileged host user, not as root in its own namespace")
	f.BoolVar(&cfg.NoDiskQuota, "no-disk-quota", false, "run without disk limits on sessions' writable layers")
	f.StringVar(&cfg.Shutdown, "shutdown", cfg.Shutdown, "what stopping does to running sessions: keep (the next start adopts them) or destroy")
	a := &cfg.Auth
	f.BoolVar(&a.Disabled, "no-auth", false, "serve every caller as admin of the tenant \"default\" (loopback only, unless --insecure)")
	f.BoolVar(&a.Insecure, "insecure", false, "allow --no-auth on a non-loopback address")
	f.StringVar(&a.JWTSecretFile, "jwt-secret-file", "", "accept HS256 JWTs signed with the secret in this file (env WARREN_JWT_SECRET_FILE)")
	f.StringVar(&a.JWKSURL, "jwks-url", "", "accept RS256/ES256 JWTs signed by the keys this JWKS URL serves (env WARREN_JWKS_URL)")
	f.StringVar(&a.JWKSFile, "jwks-file", "", "accept RS256/ES256 JWTs signed by the keys of this JWKS file")
	f.StringVar(&a.JWTTenantClaim, "jwt-tenant-claim", "tenant", "JWT claim that names the caller's tenant")
	f.StringVar(&a.JWTAdminClaim, "jwt-admin-claim", "", "boolean JWT claim that makes the caller an admin (none if empty)")
	f.StringVar(&a.JWTAudience, "jwt-audience", "", "audience a JWT must carry in aud (none checked if empty)")
	f.StringVar(&a.JWTIssuer, "jwt-issuer", "", "issuer a JWT must carry in iss (none checked if empty)")
	f.Float64Var(&a.RateLimit, "rate-limit", a.RateLimit, "requests per second one API key may make (0: unlimited)")
	f.IntVar(&a.RateBurst, "rate-burst", a.RateBurst, "burst of requests one API key may make above --rate-limit")
	q := &a.TenantDefaults
	f.IntVar(&q.MaxSessions, "tenant-max-sessions", 0, "sessions one tenant may hold at once, unless its settings say otherwise (0: only --max-sessions)")
	f.Int64Var(&q.MaxMemoryMB, "tenant-max-memory-mb", 0, "memory limits one tenant's sessions may hold in total (0: no cap)")
	f.Float64Var(&q.MaxCPUs, "tenant-max-cpus", 0, "CPU limits one tenant's sessions may hold in total (0: no cap)")
	f.DurationVar(&q.MaxLifetime, "tenant-max-lifetime", 0, "longest a tenant's session may live (0: no cap)")
	f.DurationVar(&q.MaxExecTimeout, "tenant-max-exec-timeout", 0, "longest timeout a tenant's command may ask for (0: no cap)")
	return cmd
}

func newLogger(format, level string) *slog.Logger {
	var lv slog.Level
	lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

func doctorCmd() *cobra.Command {
	cfg := config.Default()
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this host can run warren, and say how to fix what is missing",
		Long: `Check the host: kernel, privileges, namespaces, overlayfs, seccomp, cgroups
(v1 or v2, and which controllers warren can use), the data directory, and
finally start a real sandbox on the data directory's filesystem. Exits 1 if the
daemon cannot run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := config.Default()
			if err := env.ApplyEnv(os.Getenv); err != nil {
				return err
			}
			if !cmd.Flags().Changed("data-dir") {
				cfg.DataDir = env.DataDir
			}
			if !cmd.Flags().Changed("cgroup-parent") {
				cfg.CgroupParent = env.CgroupParent
			}
			checks := doctor.Run(cmd.Context(), doctor.Options{DataDir: cfg.DataDir, CgroupParent: cfg.CgroupParent})
			doctor.Print(cmd.OutOrStdout(), checks)
			if doctor.Failed(checks) {
				return exitError{code: 1, msg: "this host cannot run warren yet; see the fixes above"}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "this host can run warren")
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "the daemon's data directory (env WARREN_DATA_DIR)")
	cmd.Flags().StringVar(&cfg.CgroupParent, "cgroup-parent", cfg.CgroupParent, "the daemon's cgroup parent (env WARREN_CGROUP_PARENT)")
	return cmd
}
