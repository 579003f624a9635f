package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
		Short: "Print warren's version, commit and Go version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			b := readBuildInfo()
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, "warren", b.version)
			commit := b.commit
			if commit == "" {
				commit = "unknown (built outside a git checkout, or with -buildvcs=false)"
			} else if b.modified {
				commit += " (with uncommitted changes)"
			}
			fmt.Fprintln(w, "commit:     ", commit)
			if b.commitTime != "" {
				fmt.Fprintln(w, "commit time:", b.commitTime)
			}
			fmt.Fprintln(w, "go:         ", b.goVersion)
			fmt.Fprintln(w, "platform:   ", runtime.GOOS+"/"+runtime.GOARCH)
		},
	}
}

// buildInfo is what the binary knows of how it was built.
type buildInfo struct {
	// version is daemon.Version (set by make build and make release from
	// git describe), else the module version go install recorded, else
	// "dev".
	version string
	// commit, commitTime and modified are the VCS stamp go build records
	// in a git checkout (vcs.revision, vcs.time, vcs.modified). There is
	// no build time: Go records none, to keep builds reproducible.
	commit, commitTime string
	modified           bool
	goVersion          string
}

func readBuildInfo() buildInfo {
	b := buildInfo{version: daemon.Version, goVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := bi.Main.Version; b.version == "dev" && v != "" && v != "(devel)" {
		b.version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.time":
			b.commitTime = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

func serveCmd() *cobra.Command {
	var cf *configFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the warren daemon",
		Long: `Run the warren daemon. Without configuration it serves the API on
127.0.0.1:7433 with state in /var/lib/warren. Settings come from, lowest
precedence first: embedded defaults, the TOML file of --config (or
WARREN_CONFIG), WARREN_* environment variables, and the flags given here.
Every setting has all three forms; docs/CONFIG.md lists them, and
"warren config print" shows the result and where each value came from.

On SIGTERM or SIGINT the daemon stops accepting requests and lets running
ones finish for the shutdown grace. With --shutdown=keep (the default) it
leaves every sandbox running for the next start to adopt; with
--shutdown=destroy it deletes every session, and nothing is left on the
host.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before anything is read or written: as another user the
			// daemon would get as far as creating its data directory
			// and then fail on a chmod with a message that does not say
			// why.
			if err := needRoot("the daemon"); err != nil {
				return err
			}
			cfg, _, err := cf.load(os.Getenv)
			if err != nil {
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
	cf = addConfigFlags(cmd)
	return cmd
}

// configFlags are the flags of a command that builds the daemon's
// configuration (serve, config print, doctor): --config and a flag per
// setting.
type configFlags struct {
	file  string
	flags *pflag.FlagSet
}

// addConfigFlags adds --config to cmd, and the flags of the settings with
// the given keys, or of every setting if none are given.
func addConfigFlags(cmd *cobra.Command, keys ...string) *configFlags {
	cf := &configFlags{flags: cmd.Flags()}
	cf.flags.StringVar(&cf.file, "config", "", "TOML file of settings (env WARREN_CONFIG); docs/CONFIG.md lists them")
	def := config.Default()
	for _, s := range config.Settings() {
		if len(keys) > 0 && !slices.Contains(keys, s.Key) {
			continue
		}
		f := cf.flags.VarPF(&settingValue{s: s, v: s.Value(&def)}, s.Flag, "", s.Help+" (env "+s.Env+", file "+s.Key+")")
		if s.Type() == "bool" {
			f.NoOptDefVal = "true"
		}
	}
	return cf
}

// load builds the effective configuration from the embedded defaults, the
// file of --config (else of WARREN_CONFIG), the WARREN_* environment
// (getenv) and the flags the user set, and validates it. It also returns
// where each value came from.
func (cf *configFlags) load(getenv func(string) string) (config.Config, config.Sources, error) {
	set := map[string]string{}
	cf.flags.Visit(func(f *pflag.Flag) { // only the flags the user set
		if v, ok := f.Value.(*settingValue); ok {
			set[f.Name] = v.v
		}
	})
	c, src, err := config.Load(config.LoadOptions{File: cf.configFile(getenv), Getenv: getenv, Flags: set})
	if err != nil {
		return config.Config{}, nil, err
	}
	if err := c.Validate(); err != nil {
		return config.Config{}, nil, err
	}
	return c, src, nil
}

// configFile returns the file load reads: --config if given, even empty,
// else WARREN_CONFIG; "" for none.
func (cf *configFlags) configFile(getenv func(string) string) string {
	if cf.flags.Changed("config") {
		return cf.file
	}
	return getenv("WARREN_CONFIG")
}

// settingValue is the flag of a setting. It keeps what the user typed, so
// that config.Load applies it above the file and the environment, and
// checks it when the flags are parsed.
type settingValue struct {
	s config.Setting
	v string
}

func (f *settingValue) String() string { return f.v }
func (f *settingValue) Type() string   { return f.s.Type() }

func (f *settingValue) Set(v string) error {
	scratch := config.Default()
	if err := f.s.Set(&scratch, v); err != nil {
		return err
	}
	f.v = v
	return nil
}

func newLogger(format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // config.Validate accepted only known levels
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

func doctorCmd() *cobra.Command {
	var cf *configFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this host can run warren, and say how to fix what is missing",
		Long: `Check the host: kernel, privileges, namespaces, overlayfs, seccomp, cgroups
(v1 or v2, and which controllers warren can use), the data directory, what
sessions with a network need (veth, nf_tables, IPv4 forwarding, other
firewalls), the serving certificate (with tls_cert_file: it loads, is valid
and not about to end, and names fleet.advertise), and finally start a real
sandbox on the data directory's filesystem. Exits 1 if the
daemon cannot run. The data directory and cgroup parent are the daemon's: from
--config (or WARREN_CONFIG), the environment, or the flags here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := cf.load(os.Getenv)
			if err != nil {
				return err
			}
			checks := doctor.Run(cmd.Context(), doctor.Options{DataDir: cfg.DataDir, CgroupParent: cfg.CgroupParent})
			checks = append(checks, doctor.CheckTLS(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.Fleet.Advertise, time.Now())...)
			checks = append(checks, fleetChecks(cmd.Context(), cfg)...)
			doctor.Print(cmd.OutOrStdout(), checks)
			if doctor.Failed(checks) {
				return exitError{code: 1, msg: "this host cannot run warren yet; see the fixes above"}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "this host can run warren")
			return nil
		},
	}
	cf = addConfigFlags(cmd, append([]string{"data_dir", "cgroup_parent", "tls_cert_file", "tls_key_file", "fleet.advertise"}, fleetKeys...)...)
	return cmd
}

// needRoot refuses to run what (the daemon, or one embedded in another
// command) unless the process is root: sandboxes need namespaces, mounts
// and cgroups that only root may make.
func needRoot(what string) error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("%s must run as root (running as uid %d): sandboxes need namespaces, mounts and cgroups that only root may create; run it with sudo, and `warren doctor` checks what else this host needs", what, uid)
	}
	return nil
}
