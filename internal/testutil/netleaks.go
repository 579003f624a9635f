package testutil

import (
	"os"
	"strings"

	"github.com/google/nftables"
)

// sessionLinks lists the host-side links of sessions' networks in this
// process's network namespace (package network names them wrn*).
func sessionLinks() []string {
	es, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "wrn") {
			out = append(out, e.Name())
		}
	}
	return out
}

// nftObjects lists the chains and sets of warren's nftables table (inet
// warren) in this process's network namespace; nothing when it is absent
// or nf_tables is not loaded.
func nftObjects() []string {
	c, err := nftables.New()
	if err != nil {
		return nil
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range tables {
		if t.Name != "warren" {
			continue
		}
		out = append(out, "table inet warren")
		if chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet); err == nil {
			for _, ch := range chains {
				if ch.Table.Name == t.Name {
					out = append(out, "chain "+ch.Name)
				}
			}
		}
		if sets, err := c.GetSets(t); err == nil {
			for _, s := range sets {
				out = append(out, "set "+s.Name)
			}
		}
	}
	return out
}
