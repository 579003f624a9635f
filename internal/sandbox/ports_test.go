package sandbox

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestParseProcNetTCP(t *testing.T) {
	// Lines as a little-endian kernel writes them: 127.0.0.1:8000 and
	// 0.0.0.0:22 listening, one established connection; ::1:9000 and
	// :::80 listening in tcp6.
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
`
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 0
`
	got, err := parseProcNetTCP([]byte(tcp))
	if err != nil {
		t.Fatal(err)
	}
	g6, err := parseProcNetTCP([]byte(tcp6))
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, g6...)
	want := []string{"127.0.0.1:8000", "0.0.0.0:22", "[::1]:9000", "[::]:80"}
	if len(got) != len(want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	for i, w := range want {
		if got[i].Addr != netip.MustParseAddrPort(w) {
			t.Errorf("listener %d = %v, want %v", i, got[i].Addr, w)
		}
	}
	if _, err := parseProcNetTCP([]byte("header\n 0: zz:1 0:0 0A\n")); err == nil {
		t.Error("a malformed address parsed")
	}
}

// TestDialPort reaches servers inside a sandbox that has no network but
// its loopback, on IPv4 and IPv6 loopback, and lists them; a port with
// nothing listening is unavailable; the daemon's own namespace is not
// disturbed.
func TestDialPort(t *testing.T) {
	sb := newEnv(t).start()
	ctx := context.Background()
	if res := sh(t, sb, "command -v python3"); res.ExitCode != 0 {
		// The servers are python3's; the VM stage's guest (busybox, bash)
		// has none, and the host's run of this test covers the dial.
		t.Skip("no python3 in the sandbox's image to serve the ports")
	}
	sh(t, sb, "cd /tmp && (python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &) && (python3 -m http.server 8001 --bind ::1 >/dev/null 2>&1 &)")
	waitListening(t, sb, 8000, 8001)

	ls, err := sb.Listeners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range ls {
		seen[l.Addr.String()] = true
	}
	for _, w := range []string{"127.0.0.1:8000", "[::1]:8001"} {
		if !seen[w] {
			t.Errorf("Listeners() = %v, lacks %s", ls, w)
		}
	}

	for _, port := range []int{8000, 8001} {
		c, err := sb.DialPort(ctx, port)
		if err != nil {
			t.Fatalf("DialPort(%d): %v", port, err)
		}
		io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.HasPrefix(line, "HTTP/1.0 200") {
			t.Errorf("port %d answered %q, %v", port, line, err)
		}
	}
	if _, err := sb.DialPort(ctx, 8002); errdefs.ClassOf(err) != errdefs.ErrUnavailable || !strings.Contains(err.Error(), "port 8002") {
		t.Errorf("DialPort(8002) with nothing listening = %v, want unavailable naming the port", err)
	}

	// The daemon's threads are all still in its own namespace: a listener
	// of the test is reachable, and is not one of the sandbox's.
	self, _ := os.Readlink("/proc/self/ns/net")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for range 20 { // many threads: the goroutines run wherever
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatalf("the daemon's own loopback after DialPort: %v", err)
		}
		c.Close()
		if ns, _ := os.Readlink("/proc/thread-self/ns/net"); ns != self {
			t.Fatalf("a thread of the daemon is in %s, not %s", ns, self)
		}
	}

	sb.Destroy(ctx)
	if _, err := sb.DialPort(ctx, 8000); errdefs.ClassOf(err) != errdefs.ErrUnavailable {
		t.Errorf("DialPort after destroy = %v, want unavailable", err)
	}
}

// waitListening waits until the sandbox listens on every port.
func waitListening(t *testing.T, sb *Sandbox, ports ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, err := sb.Listeners(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, p := range ports {
			found := false
			for _, l := range ls {
				found = found || int(l.Addr.Port()) == p
			}
			if !found {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ports %v do not all listen after 10s: %v", ports, ls)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkDialPort measures a trip into a sandbox's namespace and back:
// a thread joins it, creates a socket and connects to a port where nothing
// listens (refused at once, on 127.0.0.1 and on ::1), and comes back. A
// server that accepts adds only its own accept; the daemon's
// BenchmarkPortProxy measures whole requests.
func BenchmarkDialPort(b *testing.B) {
	sb := newEnv(b).start()
	ctx := context.Background()
	for b.Loop() {
		if _, err := sb.DialPort(ctx, 8000); errdefs.ClassOf(err) != errdefs.ErrUnavailable {
			b.Fatal(err)
		}
	}
}
