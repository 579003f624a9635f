// Package cli is warren's command line: thin cobra commands that parse flags,
// call the daemon through the client package, and print.
package cli

// Main runs the CLI and returns the exit code.
func Main(args []string) int { return 0 }
