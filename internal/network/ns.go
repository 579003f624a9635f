package network

import "github.com/warrenhq/warren/internal/network/nsexec"

// inNS runs fn in the network namespace ns (nsexec.Do).
var inNS = nsexec.Do
