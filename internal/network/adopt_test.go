package network

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestAdoptAfterRelease: a daemon stopping with keep leaves its sessions'
// rules in force (allowed addresses reachable, open connections going on,
// DNS and the 80/443 check failing at once while no daemon runs); the next
// daemon adopts them with their pins and denials (DNS and the name check
// work again, the policy still holds) and removes what it did not adopt.
func TestAdoptAfterRelease(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	cfg := Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}, StateDir: dir}
	first, err := New(cfg)
	must(t, err)
	s, gone := w.sandbox(t), w.sandbox(t)
	s.attach(t, first, "sbx1", policy(t, first, "allowlist", []string{"allowed.test"}, nil))
	gone.attach(t, first, "sbx2", policy(t, first, "open", nil, nil))
	wantOK(t, s, "allowed.test", 80)
	wantRefused(t, s, "198.51.100.20", 80, "an address no allowed name resolved to")
	echo, err := s.dial("198.51.100.10:7")
	must(t, err)
	defer echo.Close()
	roundTrip := func(c net.Conn, b string) error {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte(b)); err != nil {
			return err
		}
		got := make([]byte, len(b))
		_, err := c.Read(got)
		if err == nil && string(got) != b {
			err = errString("echo " + string(got))
		}
		return err
	}
	must(t, roundTrip(echo, "a"))
	wantDenial(t, first, "sbx1", Denial{Host: "198.51.100.20", Port: 80, Proto: "tcp", Reason: reasonNotAllow})
	released := time.Now()
	must(t, first.Release())

	// No daemon: the rules hold, open connections go on, DNS and 80/443
	// fail at once.
	must(t, roundTrip(echo, "b"))
	if c, err := s.dial("198.51.100.10:7"); err != nil {
		t.Errorf("a new connection to a pinned address while no daemon runs: %v", err)
	} else {
		c.Close()
	}
	wantRefused(t, s, "198.51.100.20", 80, "the policy while no daemon runs")
	start := time.Now()
	if _, err := s.resolve(s.info.Gateway.String(), "allowed.test", "udp"); err == nil || time.Since(start) > time.Second {
		t.Errorf("DNS while no daemon runs: %v after %v; want a failure at once", err, time.Since(start))
	}
	wantRefused(t, s, "198.51.100.10", 80, "the name check while no daemon runs")

	// The next daemon adopts sbx1, not sbx2 (its sandbox "died").
	next, err := New(cfg)
	must(t, err)
	t.Cleanup(func() { next.Close() })
	must(t, next.Reconcile())
	must(t, next.Adopt("sbx1", s.path))
	if err := next.Adopt("sbx2", s.path); err == nil {
		t.Errorf("adopting a session with another sandbox's namespace worked")
	}
	must(t, next.FinishAdoption())
	must(t, roundTrip(echo, "c"))
	// The pin survived: the address works before any new DNS.
	if body, err := s.get("198.51.100.10", 80); err != nil || !strings.HasPrefix(body, "hello") {
		t.Errorf("a pinned address after adoption: %q %v", body, err)
	}
	wantOK(t, s, "allowed.test", 80)
	if _, err := s.tlsGet(w, "198.51.100.10:443", "twin.test"); err == nil {
		t.Errorf("the name check after adoption let twin.test through")
	}
	wantRefused(t, s, "198.51.100.20", 80, "the policy after adoption")
	wantDenial(t, next, "sbx1", Denial{Host: "twin.test", Port: 443, Proto: "tls", Reason: reasonSNI + ": not on the allow-list"})
	if ds, _ := next.Denials("sbx1"); len(ds) == 0 || !ds[0].Time.Before(released) {
		t.Errorf("denials after adoption: %+v; want the earlier daemon's kept", ds)
	}
	if _, ok := next.Policy("sbx2"); ok {
		t.Errorf("a session not adopted has a policy")
	}
	if c, err := gone.dial("198.51.100.10:7"); err == nil {
		c.Close()
		t.Errorf("a session not adopted still reaches out")
	}
	// A live change works on the adopted session.
	must(t, next.Update("sbx1", policy(t, next, "allowlist", []string{"other.test"}, nil)))
	wantOK(t, s, "other.test", 80)
	echo.SetDeadline(time.Now().Add(2 * time.Second))
	echo.Write([]byte("d"))
	if _, err := echo.Read(make([]byte, 1)); err == nil {
		t.Errorf("a connection to a name taken off the list went on after adoption")
	}
	must(t, next.Detach("sbx1"))
	checkClean(t, w)
}

type errString string

func (e errString) Error() string { return string(e) }
