package client

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestSDKTable checks the Go column of docs/SDK.md, the one design of the
// Go, Python and TypeScript clients: every method it names exists on
// *Client (the Python suite checks its own column the same way).
func TestSDKTable(t *testing.T) {
	b, err := os.ReadFile("../docs/SDK.md")
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(&Client{})
	method := regexp.MustCompile("`([A-Z][A-Za-z]+)`")
	col, checked := -1, 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			col = -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if col < 0 {
			col = len(cells) // a table without a Go column
			for i, c := range cells {
				if c == "Go" {
					col = i
				}
			}
			continue
		}
		if col >= len(cells) {
			continue
		}
		for _, m := range method.FindAllStringSubmatch(cells[col], -1) {
			name := m[1]
			if !strings.ContainsAny(name[1:], "abcdefghijklmnopqrstuvwxyz") {
				continue // not a method name
			}
			switch name {
			case "Error", "Code", "StatusCode", "Message", "RetryAfter", "RequestID", "ExpiresAt", "Write", "Read", "Resize",
				"ProcessID", "ExitCode", "Close":
				continue // fields and methods of Error, Session and ShellConn, not of Client
			}
			if _, ok := typ.MethodByName(name); !ok {
				t.Errorf("docs/SDK.md names the Go method %s, which *Client does not have", name)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Errorf("checked %d Go names in docs/SDK.md, want at least 40 (did the tables change shape?)", checked)
	}
}
