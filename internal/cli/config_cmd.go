package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/config"
)

// newConfigCommand builds "warren config": the daemon's configuration.
func newConfigCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the daemon's configuration",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newConfigPrintCommand(a))
	return cmd
}

// newConfigPrintCommand builds "warren config print": the configuration
// warren serve would run with, given the same file, environment and flags.
func newConfigPrintCommand(a *app) *cobra.Command {
	var cf *configFlags
	cmd := &cobra.Command{
		Use:   "print",
		Short: "Print the configuration warren serve would run with, and where each value came from",
		Long: `Print, as TOML, the configuration that warren serve would run with given the
same --config file (or WARREN_CONFIG), WARREN_* environment and flags; it takes
every flag of serve. The comment after each value says where it came from:
default, file, env (with the variable) or flag. The output is itself a valid
config file. An invalid configuration is an error, as it would be for serve.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, src, err := cf.load(a.getenv)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, "# The configuration of warren serve; after each value, where it came from.")
			if f := cf.configFile(a.getenv); f != "" {
				fmt.Fprintf(w, "# Config file: %s\n", f)
			} else {
				fmt.Fprintln(w, "# No config file (--config or WARREN_CONFIG).")
			}
			fmt.Fprintln(w)
			return config.WriteTOML(w, &c, src)
		},
	}
	cf = addConfigFlags(cmd)
	return cmd
}
