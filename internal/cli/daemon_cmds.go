package cli

import "github.com/spf13/cobra"

// addDaemonCommands adds the commands that run on the daemon's side of the
// client package: serve, doctor, version and the hidden init and agent.
func addDaemonCommands(root *cobra.Command) {}
