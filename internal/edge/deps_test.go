package edge

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTransportDeps: the edge imports no transport, and no transport
// imports another to reach the edge's work (gRPC once imported REST for
// it).
func TestNoTransportDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool")
	}
	const mod = "github.com/warrenhq/warren/internal/"
	tests := []struct {
		pkg    string
		banned []string
	}{
		{"edge", []string{"httpapi", "grpcapi", "mcpapi"}},
		{"grpcapi", []string{"httpapi", "mcpapi"}},
		{"mcpapi", []string{"httpapi", "grpcapi"}},
		{"httpapi", []string{"grpcapi", "mcpapi"}},
	}
	for _, tc := range tests {
		out, err := exec.Command("go", "list", "-deps", mod+tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range tc.banned {
				if dep == mod+b {
					t.Errorf("%s depends on %s", tc.pkg, b)
				}
			}
		}
	}
}
