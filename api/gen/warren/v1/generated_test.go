package warrenv1_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../../../.."

// TestGeneratedCodeFresh fails when the generated code is stale: the proto
// or the generator setup changed since make proto last ran, or a generated
// file was edited by hand. It needs no code generator: make proto records
// the checksums of its inputs and outputs in generated.sha256 (the format
// of sha256sum -c), and this test checks them.
func TestGeneratedCodeFresh(t *testing.T) {
	f, err := os.Open("generated.sha256")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("generated.sha256: malformed line %q", sc.Text())
		}
		listed[name] = true
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s changed since the code under api/gen was generated: run make proto and commit the result", name)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	protos, _ := filepath.Glob(filepath.Join(root, "api/proto/*/*/*.proto"))
	if len(protos) == 0 {
		t.Fatal("no .proto files found")
	}
	for _, p := range protos {
		rel, _ := filepath.Rel(root, p)
		if !listed[rel] {
			t.Errorf("%s is not among the inputs make proto records", rel)
		}
	}
}
