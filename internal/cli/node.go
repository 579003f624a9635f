package cli

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/doctor"
	"github.com/warrenhq/warren/internal/fleet/registry"
)

// fleetKeys are the settings warren node reads: how to reach the fleet's
// registry, as warren serve does.
var fleetKeys = []string{"fleet.etcd", "fleet.prefix", "fleet.etcd_ca_file", "fleet.etcd_cert_file", "fleet.etcd_key_file",
	"fleet.etcd_username", "fleet.etcd_password_file", "fleet.etcd_embedded", "fleet.etcd_client_url"}

// newNodeCommand builds "warren node": the fleet's nodes, read from and
// changed in its registry (etcd) directly, so that it works whichever
// nodes are up.
func newNodeCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "List and drain the nodes of a fleet (docs/FLEET.md)",
		Long: `List and drain the nodes of a fleet. These commands talk to the fleet's
registry (etcd) directly, with the fleet settings of warren serve: the same
--config file (or WARREN_CONFIG), WARREN_FLEET_* environment or flags.`,
	}
	cmd.AddCommand(newNodeLsCommand(a), newNodeDrainCommand(a, true), newNodeDrainCommand(a, false))
	return cmd
}

// withRegistry runs fn with the registry cf's settings name.
func withRegistry(ctx context.Context, a *app, cf *configFlags, fn func(registry.Registry) error) error {
	c, _, err := cf.load(a.getenv)
	if err != nil {
		return err
	}
	if !c.Fleet.Enabled() {
		return fmt.Errorf("no fleet configured: give --fleet-etcd (or the daemon's --config)")
	}
	reg, err := daemon.FleetRegistry(c)
	if err != nil {
		return err
	}
	defer reg.Close()
	return fn(reg)
}

func newNodeLsCommand(a *app) *cobra.Command {
	var cf *configFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the fleet's live nodes with their sessions and free room",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withRegistry(cmd.Context(), a, cf, func(reg registry.Registry) error {
				snap, err := reg.Snapshot(cmd.Context())
				if err != nil {
					return err
				}
				live, lost := map[string]int{}, map[string]int{}
				for _, s := range snap.Sessions {
					if s.State == registry.Lost {
						lost[s.Node]++
					} else {
						live[s.Node]++
					}
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tADDRESS\tSESSIONS\tFREE\tCAPACITY\tSTATE\tVERSION\tUP")
				seen := map[string]bool{}
				for _, n := range snap.Nodes {
					seen[n.Name] = true
					state := "ready"
					if n.Draining {
						state = "draining"
					}
					fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", n.Name, n.Addr, live[n.Name], n.Free, n.Capacity, state, n.Version,
						a.now().Sub(n.Started).Round(time.Second))
				}
				// Nodes that own sessions but have no entry: dead, cut
				// off, or stopped with their sessions kept.
				for _, name := range sortedKeys(live, lost) {
					if !seen[name] {
						fmt.Fprintf(w, "%s\t-\t%d\t-\t-\tunreachable (%d lost)\t-\t-\n", name, live[name], lost[name])
					}
				}
				return w.Flush()
			})
		},
	}
	cf = addConfigFlags(cmd, fleetKeys...)
	return cmd
}

func sortedKeys(ms ...map[string]int) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			set[k] = true
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func newNodeDrainCommand(a *app, drain bool) *cobra.Command {
	var cf *configFlags
	var noWait bool
	var timeout time.Duration
	use, short := "drain NODE", "Stop placing sessions on a node and wait until it holds none"
	if !drain {
		use, short = "undrain NODE", "Let placement use a drained node again"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `. A draining node refuses new sessions and placement skips it;
its sessions keep running until their clients delete them or they expire,
and drain waits for that (--no-wait: return at once; --timeout: give up
waiting after that long, leaving the node draining).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			return withRegistry(cmd.Context(), a, cf, func(reg registry.Registry) error {
				if err := reg.Drain(cmd.Context(), node, drain); err != nil {
					return err
				}
				if !drain {
					fmt.Fprintf(a.stdout, "%s takes new sessions again\n", node)
					return nil
				}
				fmt.Fprintf(a.stdout, "%s is draining: it takes no new sessions\n", node)
				if noWait {
					return nil
				}
				ctx := cmd.Context()
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				last := -1
				for {
					ss, err := reg.NodeSessions(ctx, node)
					if err != nil && ctx.Err() == nil {
						return err
					}
					n := 0
					for _, s := range ss {
						if s.State == registry.Live {
							n++
						}
					}
					if err == nil && n == 0 {
						fmt.Fprintf(a.stdout, "%s holds no sessions\n", node)
						return nil
					}
					if n != last && err == nil {
						fmt.Fprintf(a.stdout, "%s holds %d session%s; waiting\n", node, n, plural(n))
						last = n
					}
					select {
					case <-ctx.Done():
						return fmt.Errorf("%s still holds %d session%s after %v; it stays draining", node, last, plural(last), timeout)
					case <-time.After(time.Second):
					}
				}
			})
		},
	}
	if drain {
		cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the node is marked draining")
		cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0: wait until the node is empty)")
	}
	cf = addConfigFlags(cmd, fleetKeys...)
	return cmd
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fleetChecks are doctor's checks of the fleet's registry, none when cfg
// configures no fleet.
func fleetChecks(ctx context.Context, cfg config.Config) []doctor.Check {
	if !cfg.Fleet.Enabled() {
		return nil
	}
	reg, err := daemon.FleetRegistry(cfg)
	if err != nil {
		return []doctor.Check{{Name: "fleet: etcd client", Required: true, Detail: err.Error(), Fix: "fix the fleet settings; docs/FLEET.md"}}
	}
	defer reg.Close()
	hc := &http.Client{Timeout: 3 * time.Second}
	if tc := reg.TLSConfig(); tc != nil {
		hc.Transport = &http.Transport{TLSClientConfig: tc}
	}
	return doctor.CheckFleet(ctx, reg, reg.Client().Endpoints(), hc)
}
