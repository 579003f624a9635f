package envd_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeFresh fails when the code under gen/ is stale: a schema
// under proto/ or the generator setup changed since make e2b-proto last
// ran, or a generated file was edited by hand. It needs no generator: make
// e2b-proto records the checksums of its inputs and outputs in
// gen/generated.sha256 (sha256sum -c's format), and this test checks them.
func TestGeneratedCodeFresh(t *testing.T) {
	const root = "../../.."
	f, err := os.Open("gen/generated.sha256")
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
			t.Errorf("%s changed since the code under gen/ was generated: run make e2b-proto and commit the result", name)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"proto/*/*.proto", "gen/*/*.go", "gen/*/*/*.go"} {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			t.Fatalf("nothing matches %s", pattern)
		}
		for _, p := range files {
			if filepath.Base(p) == "doc.go" {
				continue // written by hand: the packages' comments
			}
			if rel := filepath.Join("internal/e2b/envd", p); !listed[rel] {
				t.Errorf("%s is not among the files make e2b-proto records", rel)
			}
		}
	}
}
