package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/bench"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
)

func newBenchCommand(a *app) *cobra.Command {
	var (
		o        bench.Options
		asJSON   bool
		embedded bool
		dataDir  string
		noQuota  bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a daemon (or an embedded one) against the host's own floor",
		Long: `bench measures session create and delete, exec of a builtin and of /bin/true
(shell and argv), 1 MiB file write and read, time to first byte of a streamed
exec, exec throughput with concurrent clients, and optionally the memory of N
idle sessions. In the same run it measures the host's floor (fork+exec of
/bin/true, a bash spawn, namespaces+overlay+cgroup made by hand) and prints
each result next to it.

With --embedded it starts a daemon of its own in this process (a fresh data
directory, no authentication, no rate limit, deleted at the end). Against a
running daemon, mind its rate limit (--rate-limit 0 on that daemon).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c := a.client()
			if embedded {
				d, stop, err := embeddedDaemon(ctx, dataDir, o.Density, noQuota)
				if err != nil {
					return err
				}
				defer stop()
				c = client.New("http://"+d.Addr().String(), client.WithUserAgent("warren-bench"))
				o.DaemonPid = os.Getpid()
			}
			o.Log = a.stderr
			rep, err := bench.Run(ctx, c, o)
			if err != nil {
				return err
			}
			if asJSON {
				return rep.WriteJSON(a.stdout)
			}
			return rep.WriteTable(a.stdout)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.N, "n", 200, "timed repetitions per latency")
	f.IntVar(&o.Warmup, "warmup", 20, "untimed repetitions first")
	f.IntVar(&o.Clients, "clients", 8, "concurrent clients for the throughput runs")
	f.DurationVar(&o.Duration, "duration", 3*time.Second, "length of each throughput run")
	f.IntVar(&o.Density, "density", 0, "idle sessions to hold at once for the density run (0: skip)")
	f.IntVar(&o.DaemonPid, "daemon-pid", 0, "pid of the daemon, to report its memory in the density run")
	f.StringVar(&o.Prefix, "prefix", "bench", "prefix of the session ids the harness makes")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&embedded, "embedded", false, "start a daemon in this process for the run")
	f.StringVar(&dataDir, "data-dir", "/var/lib/warren-bench", "data directory of the embedded daemon (emptied first)")
	f.BoolVar(&noQuota, "no-disk-quota", false, "run the embedded daemon without disk limits (no layer store), to see what they cost")
	return cmd
}

// embeddedDaemon starts a daemon for a benchmark run in a fresh data
// directory.
func embeddedDaemon(ctx context.Context, dataDir string, density int, noQuota bool) (*daemon.Daemon, func(), error) {
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, nil, err
	}
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dataDir
	cfg.CgroupParent = fmt.Sprintf("warren-bench-%d", os.Getpid())
	cfg.Shutdown = config.ShutdownDestroy
	cfg.Auth.Disabled = true
	cfg.Auth.RateLimit = 0
	if noQuota {
		cfg.NoDiskQuota = true
		cfg.Session.DefaultLimits.DiskMB = 0
	}
	cfg.Session.MaxSessions = max(cfg.Session.MaxSessions, density+32)
	// The density run holds hundreds of idle sessions that write nothing:
	// with every 1 GiB limit reserved, the disk and not memory would be
	// what it measures. The guard still keeps any write that does come
	// safe (docs/SECURITY.md, "Disk space").
	cfg.Disk.Overcommit = true
	ctx, cancel := context.WithCancel(ctx)
	d, err := daemon.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	return d, func() {
		cancel()
		//lint:ignore S1005 errcheck wants the daemon's error seen as dropped on purpose: the benchmark's own results are what it reports.
		_ = <-done
		os.RemoveAll(dataDir)
	}, nil
}
