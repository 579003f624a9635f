package daemon

import (
	"os"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/testutil"
)

// TestCertFilesReload: a renewed certificate is served without a restart,
// and a renewal that does not load keeps the last good one.
func TestCertFilesReload(t *testing.T) {
	ca := testutil.NewTestCA(t, t.TempDir(), "first.test")
	var warned []string
	cf, err := newCertFiles(ca.CertFile, ca.KeyFile, func(msg string, _ ...any) { warned = append(warned, msg) })
	if err != nil {
		t.Fatal(err)
	}
	name := func() string {
		t.Helper()
		c, err := cf.get(nil)
		if err != nil || c.Leaf == nil {
			t.Fatalf("get = %v, %v", c, err)
		}
		return c.Leaf.DNSNames[0]
	}
	if got := name(); got != "first.test" {
		t.Fatalf("serving %s, want first.test", got)
	}
	// Renewed in place (as certbot or cert-manager do).
	newCert, newKey := ca.Issue(t, "second", "second.test")
	for _, p := range [][2]string{{newCert, ca.CertFile}, {newKey, ca.KeyFile}} {
		if err := os.Rename(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := name(); got != "first.test" {
		t.Fatalf("the files were read again at once (%s): a handshake must not stat them every time", got)
	}
	cf.checked = time.Now().Add(-certReloadEvery)
	if got := name(); got != "second.test" {
		t.Fatalf("after a renewal serving %s, want second.test", got)
	}
	// A broken renewal: the last good pair stays, with a warning.
	if err := os.WriteFile(ca.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cf.checked = time.Now().Add(-certReloadEvery)
	if got := name(); got != "second.test" || len(warned) != 1 {
		t.Fatalf("after a broken renewal serving %s with warnings %v, want second.test and one warning", got, warned)
	}
	if _, err := newCertFiles(ca.CertFile, ca.KeyFile, nil); err == nil {
		t.Fatal("a start with a broken key pair succeeded")
	}
}
