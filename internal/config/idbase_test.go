package config

import (
	"strings"
	"testing"
)

// TestIDBaseOnTheGrid: id_base must put blocks on the grid every daemon of
// the host shares, and leave room for one block below 2^32-1.
func TestIDBaseOnTheGrid(t *testing.T) {
	for base, ok := range map[int64]bool{
		DefaultIDBase:             true,
		DefaultIDBase + 65536*100: true,
		DefaultIDBase - 65536*100: true,
		DefaultIDBase + 1:         false,
		0:                         false,
		1 << 32:                   false,
		-65536:                    false,
	} {
		c := Default()
		c.IDBase = base
		err := c.Validate()
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "id base")) {
			t.Errorf("id_base %d: %v, want ok %v", base, err, ok)
		}
	}
}
