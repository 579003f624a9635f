// Package reexec runs the sandbox's own programs when the binary is executed
// again as `warren init` or `warren agent`. The daemon's main and every test
// binary that starts sandboxes call Dispatch first thing, because the runtime
// re-executes /proc/self/exe: under `go test` that is the test binary.
package reexec

import (
	"os"

	"github.com/warrenhq/warren/internal/agent"
	"github.com/warrenhq/warren/internal/nsinit"
)

// Dispatch runs init or the agent when args (os.Args) ask for one, and never
// returns in that case. Otherwise it returns at once. Both programs are
// driven only by inherited descriptors, never by flags.
func Dispatch(args []string) {
	if len(args) != 2 {
		return
	}
	switch args[1] {
	case "init":
		nsinit.Main()
	case "agent":
		agent.Main()
		os.Exit(0)
	}
}
