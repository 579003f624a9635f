package fleet

import (
	"os"
	"testing"

	"github.com/warrenhq/warren/internal/cli"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestMain doubles as the warren binary: the tests start daemons as
// "<test binary> serve ...", and those start sandboxes as init and agent.
func TestMain(m *testing.M) {
	testutil.SandboxMain()
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}
