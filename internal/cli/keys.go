package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
)

// This file holds the commands that manage credentials, tenants and the
// audit log: keys, token, tenants and audit.

// newKeysCommand builds "warren keys" and its subcommands.
func newKeysCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "keys",
		Aliases: []string{"key"},
		Short:   "Create, list and revoke API keys",
	}
	cmd.AddCommand(newKeysCreateCommand(a), newKeysListCommand(a), newKeysRevokeCommand(a))
	return cmd
}

func newKeysCreateCommand(a *app) *cobra.Command {
	var (
		req     api.CreateKeyRequest
		expires time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "create --tenant NAME",
		Short: "Create an API key and print it",
		Long: `Create an API key that acts for a tenant and print it alone on the first
line of stdout; its id and expiry go to stderr. The daemon keeps only a hash
of the key: it is shown this once.`,
		Example: `  KEY=$(warren keys create --tenant team-a --name ci --expires 720h | head -1)
  warren keys create --tenant ops --admin --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if expires < 0 {
				return fmt.Errorf("--expires must not be negative")
			}
			req.ExpiresInSeconds = secondsUp(expires)
			k, err := a.client().CreateKey(cmd.Context(), &req)
			if err != nil {
				return fmt.Errorf("create key for tenant %s: %w", req.Tenant, err)
			}
			if asJSON {
				return printJSON(a.stdout, k)
			}
			fmt.Fprintln(a.stdout, k.Secret)
			kind := "key"
			if k.Admin {
				kind = "admin key"
			}
			exp := "never expires"
			if k.ExpiresAt != nil {
				exp = "expires " + k.ExpiresAt.Format(time.RFC3339) + " (" + until(a.now(), *k.ExpiresAt) + ")"
			}
			a.warn("created %s %s for tenant %s; it %s", kind, k.ID, k.Tenant, exp)
			a.warn("the key is shown once: store it now")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Tenant, "tenant", "", "the tenant the key acts for (required)")
	f.StringVar(&req.Name, "name", "", "a label for people, such as ci")
	f.BoolVar(&req.Admin, "admin", false, "make an administrator's key, which manages keys, tenants and every tenant's sessions")
	f.DurationVar(&expires, "expires", 0, "make the key stop working after this long, such as 720h (default: never)")
	f.BoolVar(&asJSON, "json", false, "print the key, with its secret, as JSON")
	_ = cmd.MarkFlagRequired("tenant") // fails only for a flag not defined just above
	return cmd
}

func newKeysListCommand(a *app) *cobra.Command {
	var (
		tenant string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List API keys, revoked and expired ones included",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := a.client().ListKeys(cmd.Context(), tenant)
			if err != nil {
				return fmt.Errorf("list keys: %w", err)
			}
			if asJSON {
				if keys == nil {
					keys = []api.Key{}
				}
				return printJSON(a.stdout, keys)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tNAME\tADMIN\tCREATED\tEXPIRES\tSTATE")
			for _, k := range keys {
				expires := "never"
				if k.ExpiresAt != nil {
					expires = until(now, *k.ExpiresAt)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
					k.ID, k.Tenant, orDash(k.Name), yesNo(k.Admin), age(now, k.CreatedAt), expires, keyState(now, &k))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "list only this tenant's keys")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the keys as a JSON array")
	return cmd
}

// keyState says whether k works at now: "active", "expired" or "revoked".
func keyState(now time.Time, k *api.Key) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !k.ExpiresAt.After(now):
		return "expired"
	}
	return "active"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newKeysRevokeCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke API keys",
		Long: `Revoke each API key, printing the ids revoked. A revoked key, and every
token issued for it, stops working at once. Failures are reported and make
warren exit 1 after trying every key.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			return a.each(args, func(id string) error {
				if err := c.RevokeKey(cmd.Context(), id); err != nil {
					return fmt.Errorf("revoke key %s: %w", id, err)
				}
				return nil
			})
		},
	}
}

// each calls do with each of names, printing the names it succeeds with
// and reporting its errors. It fails with exit code 1 after trying every
// name if any failed.
func (a *app) each(names []string, do func(string) error) error {
	failed := false
	for _, n := range names {
		if err := do(n); err != nil {
			a.warn("%v", err)
			failed = true
			continue
		}
		fmt.Fprintln(a.stdout, n)
	}
	if failed {
		return exitError{code: 1}
	}
	return nil
}

func newTokenCommand(a *app) *cobra.Command {
	var (
		ttl    time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Print a short-lived token that acts as the caller",
		Long: `Print a short-lived token that acts as the caller's key, for clients that
cannot send an Authorization header, such as a browser's WebSocket, which
passes it as ?token=. The daemon caps its lifetime.`,
		Example: `  warren token --ttl 10m`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < 0 {
				return fmt.Errorf("--ttl must not be negative")
			}
			tok, err := a.client().CreateToken(cmd.Context(), ttl)
			if err != nil {
				return fmt.Errorf("create token: %w", err)
			}
			if asJSON {
				return printJSON(a.stdout, tok)
			}
			fmt.Fprintln(a.stdout, tok.Token)
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the token works, such as 10m (default: the daemon's)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token and its expiry as JSON")
	return cmd
}

// newTenantsCommand builds "warren tenants" and its subcommands.
func newTenantsCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tenants",
		Aliases: []string{"tenant"},
		Short:   "Show and change tenants' quotas and command policy",
	}
	cmd.AddCommand(newTenantsListCommand(a), newTenantsGetCommand(a), newTenantsSetCommand(a), newTenantsRemoveCommand(a))
	return cmd
}

func newTenantsListCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the tenants that have settings",
		Long:    `List the tenants that have settings. A "-" is the daemon's default.`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenants, err := a.client().ListTenants(cmd.Context())
			if err != nil {
				return fmt.Errorf("list tenants: %w", err)
			}
			if asJSON {
				if tenants == nil {
					tenants = []api.Tenant{}
				}
				return printJSON(a.stdout, tenants)
			}
			now := a.now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tMAX-SESSIONS\tMAX-MEMORY\tMAX-CPUS\tMAX-LIFETIME\tMAX-EXEC-TIMEOUT\tALLOW\tDENY\tUPDATED")
			for _, t := range tenants {
				q := t.Quota
				updated := "-"
				if t.UpdatedAt != nil {
					updated = age(now, *t.UpdatedAt)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name,
					countOrDash(int64(q.MaxSessions)), mibOrDash(q.MaxMemoryMB), cpusOrDash(q.MaxCPUs),
					secondsOrDash(q.MaxLifetimeSeconds), secondsOrDash(q.MaxExecTimeoutSeconds),
					joinOrDash(t.Policy.Allow), joinOrDash(t.Policy.Deny), updated)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tenants as a JSON array")
	return cmd
}

// The ...OrDash helpers format a table cell, "-" when the value is zero (a
// tenant's quota left to the daemon's default, a missing status).

func countOrDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func mibOrDash(mb int64) string {
	if mb == 0 {
		return "-"
	}
	return humanBytes(mb << 20)
}

func cpusOrDash(n float64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatFloat(n, 'f', -1, 64)
}

// secondsOrDash formats a number of seconds as a duration without zero
// tails: 90 is "1m30s", 3600 is "1h".
func secondsOrDash(s int64) string {
	if s == 0 {
		return "-"
	}
	d := (time.Duration(s) * time.Second).String()
	if strings.HasSuffix(d, "m0s") {
		d = strings.TrimSuffix(d, "0s")
	}
	if strings.HasSuffix(d, "h0m") {
		d = strings.TrimSuffix(d, "0m")
	}
	return d
}

func joinOrDash(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}

func newTenantsGetCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"inspect"},
		Short:   "Print a tenant's settings as JSON",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := a.client().GetTenant(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get tenant %s: %w", args[0], err)
			}
			return printJSON(a.stdout, t)
		},
	}
}

// tenantFlags are the settings "tenants set" changes, each only when its
// flag is given.
var tenantFlags = []string{"max-sessions", "max-memory-mb", "max-cpus", "max-lifetime", "max-exec-timeout", "max-workspaces", "max-snapshots", "allow", "deny",
	"network-max-mode", "network-allow"}

func newTenantsSetCommand(a *app) *cobra.Command {
	var (
		maxSessions          int
		maxWorkspaces        int
		maxSnapshots         int
		maxMemoryMB          int64
		maxCPUs              float64
		maxLifetime, maxExec time.Duration
		allow, deny          []string
		netMode              string
		netAllow             []string
	)
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Change a tenant's quotas and command policy",
		Long: `Change the settings that the flags given name, keep the others, and print
the tenant's settings as JSON. A quota of 0 restores the daemon's default;
--allow "" and --deny "" empty their lists. The command policy is a
convenience, not a security boundary: the sandbox is the boundary.`,
		Example: `  warren tenants set team-a --max-sessions 20 --max-memory-mb 4096 --max-lifetime 8h
  warren tenants set team-a --deny curl,wget
  warren tenants set interns --network-max-mode none
  warren tenants set ci --network-allow pypi.org:443,*.pythonhosted.org:443`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, f := args[0], cmd.Flags()
			changed := false
			for _, n := range tenantFlags {
				changed = changed || f.Changed(n)
			}
			if !changed {
				return fmt.Errorf("nothing to set: give at least one of --%s", strings.Join(tenantFlags, ", --"))
			}
			if maxSessions < 0 || maxMemoryMB < 0 || maxCPUs < 0 || maxLifetime < 0 || maxExec < 0 || maxWorkspaces < 0 || maxSnapshots < 0 {
				return fmt.Errorf("quotas must not be negative")
			}
			c := a.client()
			t, err := c.GetTenant(cmd.Context(), name)
			switch {
			case client.IsNotFound(err):
				t = &api.Tenant{} // no settings yet: the daemon's defaults
			case err != nil:
				return fmt.Errorf("get tenant %s: %w", name, err)
			}
			t.Name, t.UpdatedAt = name, nil
			if f.Changed("max-sessions") {
				t.Quota.MaxSessions = maxSessions
			}
			if f.Changed("max-memory-mb") {
				t.Quota.MaxMemoryMB = maxMemoryMB
			}
			if f.Changed("max-cpus") {
				t.Quota.MaxCPUs = maxCPUs
			}
			if f.Changed("max-lifetime") {
				t.Quota.MaxLifetimeSeconds = secondsUp(maxLifetime)
			}
			if f.Changed("max-workspaces") {
				t.Quota.MaxWorkspaces = maxWorkspaces
			}
			if f.Changed("max-snapshots") {
				t.Quota.MaxSnapshots = maxSnapshots
			}
			if f.Changed("max-exec-timeout") {
				t.Quota.MaxExecTimeoutSeconds = secondsUp(maxExec)
			}
			if f.Changed("allow") {
				t.Policy.Allow = programs(allow)
			}
			if f.Changed("deny") {
				t.Policy.Deny = programs(deny)
			}
			if f.Changed("network-max-mode") || f.Changed("network-allow") {
				n := api.TenantNetwork{}
				if t.Policy.Network != nil {
					n = *t.Policy.Network
				}
				if f.Changed("network-max-mode") {
					n.MaxMode = netMode
				}
				if f.Changed("network-allow") {
					n.Allow = programs(netAllow)
				}
				t.Policy.Network = &n
				if n.MaxMode == "" && len(n.Allow) == 0 {
					t.Policy.Network = nil
				}
			}
			t, err = c.PutTenant(cmd.Context(), name, t)
			if err != nil {
				return fmt.Errorf("set tenant %s: %w", name, err)
			}
			return printJSON(a.stdout, t)
		},
	}
	f := cmd.Flags()
	f.IntVar(&maxSessions, "max-sessions", 0, "most sessions the tenant may hold at once")
	f.Int64Var(&maxMemoryMB, "max-memory-mb", 0, "memory limits, in MiB, the tenant's sessions may hold in total")
	f.Float64Var(&maxCPUs, "max-cpus", 0, "CPU limits, in cores, the tenant's sessions may hold in total")
	f.DurationVar(&maxLifetime, "max-lifetime", 0, "longest a session of the tenant may live, such as 8h")
	f.DurationVar(&maxExec, "max-exec-timeout", 0, "longest timeout a command of the tenant may ask for, such as 10m")
	f.IntVar(&maxWorkspaces, "max-workspaces", 0, "most workspaces the tenant may keep")
	f.IntVar(&maxSnapshots, "max-snapshots", 0, "most snapshots the tenant may keep")
	f.StringSliceVar(&allow, "allow", nil, "programs (base names) commands may start, comma-separated; when set, no others (replaces the list)")
	f.StringSliceVar(&deny, "deny", nil, "programs (base names) commands may not start, comma-separated; wins over --allow (replaces the list)")
	f.StringVar(&netMode, "network-max-mode", "", `widest network mode the tenant's sessions may ask for: none, allowlist or open ("": no ceiling)`)
	f.StringSliceVar(&netAllow, "network-allow", nil, `the tenant's maximum allow-list: each allow rule of a session must fall within one of these, comma-separated (replaces the list; "" empties it)`)
	return cmd
}

// programs cleans a list of programs from a flag: spaces around names and
// empty names go. It returns nil for an empty list.
func programs(l []string) []string {
	var out []string
	for _, p := range l {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func newTenantsRemoveCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Delete tenants' settings",
		Long: `Delete each tenant's settings, printing the names done: the tenant then runs
on the daemon's defaults. Failures are reported and make warren exit 1 after
trying every tenant.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			return a.each(args, func(name string) error {
				if err := c.DeleteTenant(cmd.Context(), name); err != nil {
					return fmt.Errorf("delete tenant %s: %w", name, err)
				}
				return nil
			})
		},
	}
}

func newAuditCommand(a *app) *cobra.Command {
	var (
		q      client.AuditQuery
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log",
		Long: `Show the audited calls the flags select: who made them, for which tenant
and session, what they did, the outcome and how long they took.`,
		Example: `  warren audit --since 1h
  warren audit --tenant team-a --op session.create --since 2026-11-01T00:00:00Z --limit 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Limit < 0 {
				return fmt.Errorf("--limit must not be negative")
			}
			records, err := a.client().QueryAudit(cmd.Context(), q)
			if err != nil {
				return fmt.Errorf("query audit log: %w", err)
			}
			if asJSON {
				if records == nil {
					records = []api.AuditRecord{}
				}
				return printJSON(a.stdout, records)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tTENANT\tKEY\tSESSION\tOP\tTARGET\tSTATUS\tOUTCOME\tDURATION")
			for _, r := range records {
				who := r.KeyID
				if who == "" {
					who = r.Subject // a JWT's caller
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
					r.Time.Format(time.RFC3339), orDash(r.Tenant), orDash(who), orDash(r.Session), r.Op,
					orDash(r.Target), countOrDash(int64(r.Status)), r.Outcome, millis(r.DurationMs))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Tenant, "tenant", "", "only this tenant's calls")
	f.StringVar(&q.Session, "session", "", "only calls on this session")
	f.StringVar(&q.Op, "op", "", "only this operation, such as session.create")
	f.StringVar(&q.Since, "since", "", "only calls from this time (RFC 3339) or this long ago (such as 1h) on")
	f.StringVar(&q.Until, "until", "", "only calls before this time (RFC 3339)")
	f.IntVar(&q.Limit, "limit", 0, "at most this many records (default: the daemon's)")
	f.BoolVar(&asJSON, "json", false, "print the records as a JSON array")
	return cmd
}

// millis formats a duration in milliseconds to about three significant
// digits: 350µs, 12.3ms, 1.23s.
func millis(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Millisecond:
		d = d.Round(time.Microsecond)
	case d < time.Second:
		d = d.Round(100 * time.Microsecond)
	default:
		d = d.Round(10 * time.Millisecond)
	}
	return d.String()
}
