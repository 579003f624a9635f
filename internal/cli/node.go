package cli

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/doctor"
	"github.com/warrenhq/warren/internal/errdefs"
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
					switch {
					case n.Moving:
						state = "draining (moving)"
					case n.Draining:
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
	var noWait, move bool
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
waiting after that long, leaving the node draining).

With --move the node itself moves its sessions to other nodes, one at a
time: a snapshot of a session's files, the session deleted there and
created on another node with the same id, settings and files. Running
processes do not survive a move (they are stopped, as at a delete), and
for the moment between the delete and the create the session answers
404. A session that mounts a workspace, or is paused, is not moved. The
move goes on if this command ends; undrain stops it (docs/FLEET.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			return withRegistry(cmd.Context(), a, cf, func(reg registry.Registry) error {
				mark := func() error { return reg.Drain(cmd.Context(), node, drain) }
				if move {
					mark = func() error { return reg.DrainMove(cmd.Context(), node) }
				}
				if err := mark(); err != nil {
					return err
				}
				if !drain {
					fmt.Fprintf(a.stdout, "%s takes new sessions again\n", node)
					return nil
				}
				if move {
					fmt.Fprintf(a.stdout, "%s is draining: it takes no new sessions and moves its sessions to other nodes\n", node)
					// The node moves them itself: one without an entry
					// (down, cut off) moves nothing until it is back.
					if nodes, err := reg.Nodes(cmd.Context()); err == nil && !slices.ContainsFunc(nodes, func(n registry.Node) bool { return n.Name == node }) {
						fmt.Fprintf(a.stdout, "%s is not a live node now: its sessions move once it is back\n", node)
					}
				} else {
					fmt.Fprintf(a.stdout, "%s is draining: it takes no new sessions\n", node)
				}
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
				var held map[registry.Session]bool // the node's live records at the last look
				for {
					ss, err := reg.NodeSessions(ctx, node)
					if err != nil && ctx.Err() == nil {
						return err
					}
					n := 0
					now := map[registry.Session]bool{}
					for _, s := range ss {
						if s.Held() {
							n++
							now[registry.Session{Tenant: s.Tenant, ID: s.ID}] = true
						}
					}
					if err == nil && move && held != nil {
						reportMoves(ctx, a, reg, node, held, now)
					}
					if err == nil {
						held = now
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
		cmd.Flags().BoolVar(&move, "move", false, "have the node move its sessions to other nodes (a snapshot of their files; processes stop)")
		cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the node is marked draining")
		cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0: wait until the node is empty)")
	}
	cf = addConfigFlags(cmd, fleetKeys...)
	return cmd
}

// reportMoves prints what became of the sessions node held at the last
// look and holds no more: moved to another node, or ended.
func reportMoves(ctx context.Context, a *app, reg registry.Registry, node string, held, now map[registry.Session]bool) {
	var gone []registry.Session
	for s := range held {
		if !now[s] {
			gone = append(gone, s)
		}
	}
	slices.SortFunc(gone, func(x, y registry.Session) int { return strings.Compare(x.Tenant+"/"+x.ID, y.Tenant+"/"+y.ID) })
	for _, s := range gone {
		// The record is re-made on the target a moment after it left
		// this node: give it that moment.
		var r registry.Session
		var err error
		for range 10 {
			if r, err = reg.GetSession(ctx, s.Tenant, s.ID); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err == nil && r.Node != node && r.State == registry.Live {
			fmt.Fprintf(a.stdout, "moved %s/%s to %s\n", s.Tenant, s.ID, r.Node)
		} else if errdefs.Is(err, errdefs.ErrNotFound) {
			fmt.Fprintf(a.stdout, "%s/%s ended\n", s.Tenant, s.ID)
		}
	}
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
