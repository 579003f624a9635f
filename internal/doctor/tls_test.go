package doctor

import (
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/testutil"
)

func TestCheckTLS(t *testing.T) {
	if cs := CheckTLS("", "", "", time.Now()); cs != nil {
		t.Fatalf("without a certificate: %+v", cs)
	}
	ca := testutil.NewTestCA(t, t.TempDir(), "node1.test", "10.0.0.1")
	now := time.Now()
	verdict := func(cs []Check) string {
		s := ""
		for _, c := range cs {
			if c.OK {
				s += "ok "
			} else {
				s += "no "
			}
		}
		return s
	}
	for _, tc := range []struct {
		name, advertise string
		at              time.Time
		want            string
	}{
		{"valid, single node", "", now, "ok "},
		{"names the advertised host", "https://node1.test:7433", now, "ok ok "},
		{"names the advertised IP", "https://10.0.0.1:7433", now, "ok ok "},
		{"another host", "https://node2.test:7433", now, "ok no "},
		{"close to its end", "", now.Add(360 * 24 * time.Hour), "ok no "}, // the test CA's certificates last a year
		{"expired", "", now.Add(400 * 24 * time.Hour), "no "},
		{"not yet valid", "", now.Add(-48 * time.Hour), "no "},
	} {
		if got := verdict(CheckTLS(ca.CertFile, ca.KeyFile, tc.advertise, tc.at)); got != tc.want {
			t.Errorf("%s: %q, want %q (%+v)", tc.name, got, tc.want, CheckTLS(ca.CertFile, ca.KeyFile, tc.advertise, tc.at))
		}
	}
	if cs := CheckTLS(ca.CertFile, ca.CAFile, "", now); len(cs) != 1 || cs[0].OK || !cs[0].Required {
		t.Fatalf("a mismatched key: %+v", cs)
	}
}
