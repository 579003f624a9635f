package cli

import (
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
)

// networkFlags are the flags of a session's egress policy, shared by
// session create and run.
type networkFlags struct {
	mode        string
	allow, deny []string
}

func (n *networkFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&n.mode, "network", "", "egress: none (loopback only; the default), open (the internet minus always-blocked ranges) or allowlist")
	f.StringArrayVar(&n.allow, "allow", nil, "allow a name, *.wildcard, IPv4 address or CIDR, with an optional :port (repeatable; implies --network allowlist)")
	f.StringArrayVar(&n.deny, "deny", nil, "deny a name, *.wildcard, IPv4 address or CIDR, winning over --allow (repeatable; needs --network open or --allow)")
}

// policy returns the policy the flags ask for, or nil when they ask for
// none. The rules themselves are checked by the daemon, which names the
// rule it refuses.
func (n *networkFlags) policy() (*api.NetworkPolicy, error) {
	switch n.mode {
	case "", "none", "open", "allowlist":
	default:
		return nil, fmt.Errorf("--network %q: want none, open or allowlist", n.mode)
	}
	if n.mode == "" && len(n.allow) == 0 && len(n.deny) == 0 {
		return nil, nil
	}
	p := &api.NetworkPolicy{Mode: n.mode, Allow: n.allow, Deny: n.deny}
	if p.Mode == "" {
		if len(p.Allow) == 0 {
			return nil, fmt.Errorf("--deny needs --network open or allowlist, or --allow")
		}
		p.Mode = "allowlist"
	}
	if p.Mode == "none" && (len(p.Allow) > 0 || len(p.Deny) > 0) {
		return nil, fmt.Errorf("--allow and --deny need --network open or allowlist, not none")
	}
	return p, nil
}

// newNetworkCommand builds "warren network" and its subcommands.
func newNetworkCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Read and change a session's egress policy, and what it refused",
		Long: `Read and change the egress policy of a running session, and list the
connections and names it refused with their reasons. A session's network is
chosen at create (warren session create --network, --allow, --deny); a
session created with mode none has no link to change, and a running session
cannot change to none. See docs/NETWORKING.md.`,
	}
	cmd.AddCommand(
		newNetworkGetCommand(a),
		newNetworkSetCommand(a),
		newNetworkAddCommand(a, "allow"),
		newNetworkAddCommand(a, "deny"),
		newNetworkDenialsCommand(a),
	)
	return cmd
}

func newNetworkGetCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get SESSION",
		Short: "Print a session's egress policy as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.client().GetNetwork(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get network of %s: %w", args[0], err)
			}
			return printJSON(a.stdout, p)
		},
	}
}

func newNetworkSetCommand(a *app) *cobra.Command {
	var n networkFlags
	cmd := &cobra.Command{
		Use:   "set SESSION",
		Short: "Replace a session's egress rules whole",
		Long: `Replace a running session's allow and deny rules whole with those given (none
given: no rules), and its mode when --network is given (the current mode
otherwise), then print the policy in force as JSON. The change applies at
once and whole, or not at all: a rule the daemon refuses leaves the old
policy in force. Open connections the new policy refuses are ended.`,
		Example: `  warren network set dev --allow pypi.org:443 --allow files.pythonhosted.org:443
  warren network set dev --network open --deny '*.example.com'
  warren network set dev                      # allowlist with no rules: reaches nothing`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n.mode == "none" {
				return fmt.Errorf("--network none: a running session cannot change to none (delete it, or set no rules)")
			}
			if n.mode != "" && n.mode != "open" && n.mode != "allowlist" {
				return fmt.Errorf("--network %q: want open or allowlist", n.mode)
			}
			// PATCH replaces the lists whole: an absent list is no rules.
			p := &api.NetworkPolicy{Mode: n.mode, Allow: n.allow, Deny: n.deny}
			out, err := a.client().UpdateNetwork(cmd.Context(), args[0], p)
			if err != nil {
				return fmt.Errorf("set network of %s: %w", args[0], err)
			}
			return printJSON(a.stdout, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&n.mode, "network", "", "change the mode to open or allowlist (default: keep the current one)")
	f.StringArrayVar(&n.allow, "allow", nil, "allow rule: a name, *.wildcard, IPv4 address or CIDR, with an optional :port (repeatable)")
	f.StringArrayVar(&n.deny, "deny", nil, "deny rule: a name, *.wildcard, IPv4 address or CIDR, winning over allow rules (repeatable)")
	return cmd
}

// newNetworkAddCommand builds "network allow" or "network deny" (kind): add
// rules to a session's policy, keeping the rest.
func newNetworkAddCommand(a *app, kind string) *cobra.Command {
	short := "Add allow rules to a session's egress policy"
	rules := "a name, *.wildcard, IPv4 address or CIDR, with an optional :port"
	if kind == "deny" {
		short = "Add deny rules, which win over allow rules, to a session's egress policy"
		rules = "a name, *.wildcard, IPv4 address or CIDR (no port)"
	}
	return &cobra.Command{
		Use:   kind + " SESSION RULE...",
		Short: short,
		Long: fmt.Sprintf(`Add %s rules to a running session's egress policy, keeping its mode and
its other rules, and print the policy in force as JSON. A rule is one of
%s. Rules already there are not added twice. It reads the policy and writes
it back whole: two changes made at the same moment may lose one (use
"warren network set" to give the whole policy).`, kind, rules),
		Example: fmt.Sprintf("  warren network %s dev %s", kind, map[string]string{
			"allow": "example.com:443 '*.githubusercontent.com'", "deny": "gist.github.com"}[kind]),
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, add := args[0], args[1:]
			c := a.client()
			p, err := c.GetNetwork(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("get network of %s: %w", id, err)
			}
			list := &p.Allow
			if kind == "deny" {
				list = &p.Deny
			}
			for _, r := range add {
				if !slices.Contains(*list, r) {
					*list = append(*list, r)
				}
			}
			// The mode as read: PATCH would keep it anyway, and saying it
			// keeps a none session's refusal (409) the daemon's to give.
			out, err := c.UpdateNetwork(cmd.Context(), id, p)
			if err != nil {
				return fmt.Errorf("%s on network of %s: %w", kind, id, err)
			}
			return printJSON(a.stdout, out)
		},
	}
}

func newNetworkDenialsCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "denials SESSION",
		Short: "List the connections and names a session's policy refused, and why",
		Long: `List the latest connections and DNS names a session's egress policy refused,
oldest first, with the reason for each (the daemon keeps the last 256). PORT
is 0 for a DNS question; PROTO is dns, tcp, udp, icmp or ipv6.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := a.client().NetworkDenials(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("network denials of %s: %w", args[0], err)
			}
			if asJSON {
				if ds == nil {
					ds = []api.NetworkDenial{}
				}
				return printJSON(a.stdout, ds)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tHOST\tPORT\tPROTO\tREASON")
			for _, d := range ds {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", age(now, d.Time), d.Host, strconv.Itoa(d.Port), d.Proto, d.Reason)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the denials as a JSON array")
	return cmd
}
