// Package testutil holds helpers shared by warren's tests: the re-exec hook
// that lets a test binary act as `warren init` and `warren agent`, root
// checks, leak checks and test images.
package testutil

import (
	"os"

	"github.com/warrenhq/warren/internal/agent"
	"github.com/warrenhq/warren/internal/nsinit"
)

// SandboxMain must be the first call of TestMain in every package whose tests
// start sandboxes: the runtime re-executes the running binary (the test
// binary, under go test) as the sandbox's init and agent.
func SandboxMain() {
	if len(os.Args) == 2 {
		switch os.Args[1] {
		case "init":
			nsinit.Main()
		case "agent":
			agent.Main()
			os.Exit(0)
		}
	}
	sweepStale()
}
