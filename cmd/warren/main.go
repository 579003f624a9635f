// Command warren is the sandbox runtime: the daemon, its CLI, and (hidden)
// the init and agent that run inside every sandbox.
package main

import (
	"os"

	"github.com/warrenhq/warren/internal/cli"
	"github.com/warrenhq/warren/internal/reexec"
)

func main() {
	reexec.Dispatch(os.Args)
	os.Exit(cli.Main(os.Args[1:]))
}
