package wire

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
)

// TestChunkerNeverSplitsACharacter feeds text one byte at a time: every
// chunk is valid UTF-8 and together they are the input.
func TestChunkerNeverSplitsACharacter(t *testing.T) {
	in := []byte("héllo wörld ✓ 𝄞 end")
	var c Chunker
	var out bytes.Buffer
	for i := range in {
		text, raw := c.Next(in[i : i+1])
		if raw != nil {
			t.Fatalf("byte %d: valid text came back as raw bytes %q", i, raw)
		}
		out.WriteString(text)
	}
	if f := c.Flush(); f != nil {
		t.Errorf("Flush after complete text = %q", f)
	}
	if out.String() != string(in) {
		t.Errorf("chunks = %q, want %q", out.String(), in)
	}
}

func TestChunkerRaw(t *testing.T) {
	var c Chunker
	if text, raw := c.Next([]byte{'a', 0xff, 'b'}); text != "" || !bytes.Equal(raw, []byte{'a', 0xff, 'b'}) {
		t.Errorf("invalid UTF-8 = %q, %q; want the exact bytes", text, raw)
	}
	c.Next([]byte{0xe2, 0x9c}) // the start of ✓
	if f := c.Flush(); !bytes.Equal(f, []byte{0xe2, 0x9c}) {
		t.Errorf("Flush = %q, want the held-back bytes", f)
	}
}

func TestText(t *testing.T) {
	if text, raw := Text([]byte("ok")); text != "ok" || raw != nil {
		t.Errorf("Text(ok) = %q, %q", text, raw)
	}
	if text, raw := Text([]byte{'a', 0xff}); text != "a\uFFFD" || Base64(raw) != "Yf8=" {
		t.Errorf("Text(a\\xff) = %q, %q", text, Base64(raw))
	}
}

func TestSignals(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"KILL", 9}, {"sigterm", 15}, {"SIGINT", 2}, {"28", 28}, {"64", 64}} {
		if n, err := ParseSignal(c.in); err != nil || n != c.want {
			t.Errorf("ParseSignal(%q) = %d, %v; want %d", c.in, n, err, c.want)
		}
	}
	for _, bad := range []string{"", "0", "65", "-1", "NOPE", "SIG"} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("ParseSignal(%q): no error", bad)
		}
	}
	if SignalName(9) != "SIGKILL" || SignalName(40) != "signal 40" {
		t.Errorf("SignalName: %q %q", SignalName(9), SignalName(40))
	}
}

// TestSecondsSaturate: a count past what a time.Duration holds does not
// wrap around (18446744074 seconds used to become about 2 seconds, and a
// huge timeout_ms a 2 ms timeout): it saturates, so the manager's maximum
// refuses it by name.
func TestSecondsSaturate(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		unit func(int64) time.Duration
		want time.Duration
	}{
		{0, Seconds, 0},
		{90, Seconds, 90 * time.Second},
		{-5, Seconds, -5 * time.Second},
		{18446744074, Seconds, math.MaxInt64},
		{math.MaxInt64, Seconds, math.MaxInt64},
		{math.MinInt64, Seconds, math.MinInt64},
		{9223372036, Seconds, 9223372036 * time.Second},
		{9223372037, Seconds, math.MaxInt64},
		{18446744073710, Millis, math.MaxInt64},
		{3600000, Millis, time.Hour},
		{-9223372036855, Millis, math.MinInt64},
	} {
		if got := tc.unit(tc.n); got != tc.want {
			t.Errorf("%d: got %v, want %v", tc.n, got, tc.want)
		}
	}
	req, err := ExecRequest(&api.ExecRequest{Command: "x", TimeoutMs: 18446744073710})
	if err != nil || req.Timeout != math.MaxInt64 {
		t.Errorf("ExecRequest with timeout_ms 18446744073710: %v, %v", req, err)
	}
}

// TestSessionInfoRoundTrip: a session another fleet node listed reads back
// as the same API session (SessionInfo is Session's inverse).
func TestSessionInfoRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, s := range []api.Session{
		{ID: "s1", Image: "python", State: "running", CreatedAt: t0, LastUsedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(31 * time.Minute),
			Cwd: "/work", Limits: api.Limits{MemoryMB: 512, CPUs: 1.5, Pids: 256, DiskMB: 1024}, Network: "open",
			Labels: map[string]string{"k": "v"}, User: "root", Node: "n2",
			Usage: &api.Usage{MemoryBytes: 1, Pids: 2, CPUSeconds: 3, DiskBytes: 4, NetworkInBytes: 5, NetworkOutBytes: 6}},
		{ID: "s2", State: "failed", Reason: "boom", User: "agent", CreatedAt: t0, LastUsedAt: t0, ExpiresAt: t0, Node: "n1"},
	} {
		in := SessionInfo(&s, "acme", "ignored")
		if in.Tenant != "acme" {
			t.Fatalf("%s: tenant %q, want the caller's", s.ID, in.Tenant)
		}
		if got := Session(in); !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip of %s:\n got %+v\nwant %+v", s.ID, got, s)
		}
	}
	// A peer's session without a node field gets the peer's name.
	if in := SessionInfo(&api.Session{ID: "x"}, "t", "n3"); in.Node != "n3" {
		t.Fatalf("node = %q, want n3", in.Node)
	}
}
