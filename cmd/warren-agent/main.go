// Command warren-agent is the small program that runs inside every sandbox
// as its init and then its agent. It holds only what those two need, so it
// starts in about 2 ms and an idle agent holds little memory; the daemon's
// binary (gRPC, SQLite, the registry client and the rest) costs about 10 ms
// of package initialisation at every start and megabytes of heap.
//
// It is not installed on its own: `make` builds it first and embeds it in
// warren (package agentbin), and the daemon writes it to its data directory.
package main

import (
	"fmt"
	"os"

	"github.com/warrenhq/warren/internal/reexec"
)

func main() {
	reexec.Dispatch(os.Args)
	fmt.Fprintln(os.Stderr, "warren-agent runs inside sandboxes only; the daemon starts it")
	os.Exit(2)
}
