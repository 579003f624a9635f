// Command warren is the sandbox runtime: the daemon, its CLI, and (hidden)
// the init and agent that run inside every sandbox.
package main

import (
	"os"

	"github.com/warrenhq/warren/internal/agent"
	"github.com/warrenhq/warren/internal/cli"
	"github.com/warrenhq/warren/internal/nsinit"
)

func main() {
	// The sandbox's own programs are dispatched before anything else runs:
	// they are driven by inherited descriptors, not by flags.
	if len(os.Args) == 2 {
		switch os.Args[1] {
		case "init":
			nsinit.Main()
		case "agent":
			agent.Main()
			return
		}
	}
	os.Exit(cli.Main(os.Args[1:]))
}
