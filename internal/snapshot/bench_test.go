package snapshot

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/testutil"
)

// BenchmarkCopy copies a layer of 1 MiB in one file and 100 small files.
func BenchmarkCopy(b *testing.B) {
	testutil.RequiresRoot(b)
	src := filepath.Join(b.TempDir(), "src")
	os.MkdirAll(filepath.Join(src, "root/data"), 0o755)
	blob := make([]byte, 1<<20)
	rand.Read(blob)
	os.WriteFile(filepath.Join(src, "root/data/blob"), blob, 0o644)
	for i := range 100 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("root/data/f%d", i)), []byte("x"), 0o644)
	}
	dst := b.TempDir()
	i := 0
	for b.Loop() {
		if _, err := Copy(context.Background(), filepath.Join(dst, fmt.Sprint(i)), src, 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
