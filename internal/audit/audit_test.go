package audit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecordAndQuery(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Now().Add(-time.Hour)
	recs := []Record{
		{Time: t0, Tenant: "a", Session: "s1", Op: "POST /v1/sessions", Status: 201, Outcome: "ok"},
		{Time: t0.Add(30 * time.Minute), Tenant: "b", Session: "s2", Op: "DELETE /v1/sessions/{id}", Status: 404, Outcome: "not_found"},
		{Time: t0.Add(50 * time.Minute), Tenant: "a", Session: "s1", Op: "POST /v1/sessions/{id}/exec", Status: 200, Outcome: "ok"},
	}
	for _, r := range recs {
		if err := l.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		f    Filter
		want int
	}{
		{Filter{}, 3},
		{Filter{Tenant: "a"}, 2},
		{Filter{Tenant: "a", Since: t0.Add(40 * time.Minute)}, 1},
		{Filter{Until: t0.Add(40 * time.Minute)}, 2},
		{Filter{Session: "s2"}, 1},
		{Filter{Limit: 1}, 1},
	}
	for _, tc := range tests {
		got, err := l.Query(context.Background(), tc.f)
		if err != nil || len(got) != tc.want {
			t.Errorf("Query(%+v) = %d records, %v; want %d", tc.f, len(got), err, tc.want)
		}
	}
	last, _ := l.Query(context.Background(), Filter{Limit: 1})
	if len(last) != 1 || last[0].Op != "POST /v1/sessions/{id}/exec" {
		t.Errorf("Limit keeps the newest: %+v", last)
	}
	fi, _ := os.Stat(filepath.Join(dir, "audit.log"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.maxBytes = 2000
	for i := 0; i < 50; i++ {
		l.Record(Record{Tenant: "t", Op: strings.Repeat("x", 20), Status: 200, Outcome: "ok"})
	}
	if _, err := os.Stat(filepath.Join(dir, "audit.log.1")); err != nil {
		t.Errorf("no rotated file: %v", err)
	}
	got, _ := l.Query(context.Background(), Filter{Limit: 10000})
	if len(got) < 20 || len(got) > 50 {
		t.Errorf("after rotation %d records readable", len(got))
	}
}

// A rotation that cannot rename the full file keeps every record (on the
// end of the current file) and says so, rather than dropping records or
// failing silently.
func TestRotationFailureKeepsRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.maxBytes = 500
	// A non-empty directory where the rotated file goes: rename fails.
	if err := os.MkdirAll(filepath.Join(dir, "audit.log.1", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	var rotateErrs int
	for i := 0; i < 20; i++ {
		if err := l.Record(Record{Tenant: "t", Op: strings.Repeat("x", 20), Status: 200, Outcome: "ok"}); err != nil {
			if !strings.Contains(err.Error(), "rotate the audit log") {
				t.Fatalf("record %d: %v", i, err)
			}
			rotateErrs++
		}
	}
	if rotateErrs == 0 {
		t.Error("no record reported the failed rotation")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 20 {
		t.Errorf("%d of 20 records kept", n)
	}
}
