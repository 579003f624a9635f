package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRender feeds render a go test -json stream with a pass, a failure,
// skips and a package without tests: the failure's messages and the skips
// with their reasons are shown, progress lines and passing output are not.
func TestRender(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"a"}`,
		`{"Action":"run","Package":"a","Test":"TestOK"}`,
		`{"Action":"output","Package":"a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"a","Test":"TestOK","Output":"    a_test.go:3: chatter\n"}`,
		`{"Action":"pass","Package":"a","Test":"TestOK"}`,
		`{"Action":"output","Package":"a","Test":"TestNode","Output":"=== RUN   TestNode\n"}`,
		`{"Action":"output","Package":"a","Test":"TestNode","Output":"    node_test.go:25: needs node\n"}`,
		`{"Action":"output","Package":"a","Test":"TestNode","Output":"--- SKIP: TestNode (0.00s)\n"}`,
		`{"Action":"skip","Package":"a","Test":"TestNode"}`,
		`{"Action":"output","Package":"a","Output":"PASS\n"}`,
		`{"Action":"output","Package":"a","Output":"ok  \ta\t0.1s\n"}`,
		`{"Action":"pass","Package":"a"}`,
		`{"Action":"output","Package":"b","Test":"TestBad","Output":"=== RUN   TestBad\n"}`,
		`{"Action":"output","Package":"b","Test":"TestBad","Output":"    b_test.go:9: got 1, want 2\n"}`,
		`{"Action":"output","Package":"b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}`,
		`{"Action":"fail","Package":"b","Test":"TestBad"}`,
		`{"Action":"output","Package":"b","Test":"TestQuiet","Output":"--- SKIP: TestQuiet (0.00s)\n"}`,
		`{"Action":"skip","Package":"b","Test":"TestQuiet"}`,
		`{"Action":"output","Package":"b","Output":"FAIL\tb\t0.2s\n"}`,
		`{"Action":"fail","Package":"b"}`,
		`{"Action":"output","Package":"c","Output":"?   \tc\t[no test files]\n"}`,
		`{"Action":"skip","Package":"c"}`,
		`go: downloading example.com/x v1.0.0`,
	}, "\n")
	var out strings.Builder
	failed := render(strings.NewReader(in), &out)
	want := "ok  \ta\t0.1s\n" +
		"    b_test.go:9: got 1, want 2\n--- FAIL: TestBad (0.00s)\n" +
		"FAIL\tb\t0.2s\n" +
		"?   \tc\t[no test files]\n" +
		"go: downloading example.com/x v1.0.0\n" +
		"skipped: 2 tests\n" +
		"  SKIP a TestNode: needs node\n" +
		"  SKIP b TestQuiet: (no reason given)\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("render mismatch (-want +got):\n%s", diff)
	}
	if !failed {
		t.Error("render did not report the failure")
	}
	out.Reset()
	if render(strings.NewReader(`{"Action":"pass","Package":"a"}`), &out) || out.String() != "skipped: none\n" {
		t.Errorf("render of a clean run = %q", out.String())
	}
}
