// Package testutil holds helpers shared by warren's tests: the re-exec hook
// that lets a test binary act as `warren init` and `warren agent`, root
// checks, leak checks and test images.
package testutil

import (
	"os"

	"github.com/warrenhq/warren/internal/reexec"
)

// SandboxMain must be the first call of TestMain in every package whose tests
// start sandboxes: the runtime re-executes the running binary (the test
// binary, under go test) as the sandbox's init and agent. In the test process
// itself it then removes what crashed earlier test runs left behind.
func SandboxMain() {
	reexec.Dispatch(os.Args)
	sweepStale()
}
