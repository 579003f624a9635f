package agentbin

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestEmbeddedIsCurrent rebuilds cmd/warren-agent the way `make agent` does
// and compares it with the embedded copy, so a binary never ships (and the
// tests never run) an agent older than its sources.
func TestEmbeddedIsCurrent(t *testing.T) {
	b, err := Embedded()
	if errors.Is(err, ErrNotEmbedded) {
		t.Skip("no embedded agent: run `make agent` (make test does)")
	}
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to rebuild the agent with")
	}
	out := filepath.Join(t.TempDir(), Name)
	cmd := exec.Command(goBin, "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", out, "github.com/warrenhq/warren/cmd/"+Name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the agent: %v\n%s", err, msg)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, b) {
		t.Fatal("the embedded agent is stale: its sources changed since `make agent`; run it again")
	}
}

func TestInstall(t *testing.T) {
	if _, err := Embedded(); err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A copy of an older version goes; the new one is executable by all.
	old := filepath.Join(dir, Name+"-0123456789abcdef")
	if err := os.WriteFile(old, []byte("old"), 0o555); err != nil {
		t.Fatal(err)
	}
	p, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("older copy kept: %v", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("mode %04o, want 0555", fi.Mode().Perm())
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o711 {
		t.Errorf("directory mode %04o, want 0711", di.Mode().Perm())
	}
	// It is the program: run without its descriptors it says so and exits 2.
	err = exec.Command(p).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("running the installed agent: %v, want exit status 2", err)
	}
	// A second install reuses it.
	p2, err := Install(dir)
	if err != nil || p2 != p {
		t.Fatalf("second install: %q, %v", p2, err)
	}
	// A damaged copy is replaced.
	os.Chmod(p, 0o755)
	os.WriteFile(p, []byte("damaged"), 0o755)
	if _, err := Install(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); bytes.Equal(got, []byte("damaged")) {
		t.Error("damaged copy kept")
	}
}
