package session

import "testing"

func TestMinFree(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		mb    int64
		total uint64
		want  uint64
	}{
		{0, 100 * gib, gib},            // 5% would be 5 GiB: 1 GiB is smaller
		{0, 10 * gib, gib / 2},         // 5% of 10 GiB
		{0, 64 << 20, (64 << 20) / 20}, // a small tmpfs
		{16, 100 * gib, 16 << 20},      // configured
		{4096, 10 * gib, 4 * gib},      // configured, above the default
		{-1, 100 * gib, 0},             // off
	}
	for _, tc := range tests {
		if got := minFree(tc.mb, tc.total); got != tc.want {
			t.Errorf("minFree(%d, %d) = %d, want %d", tc.mb, tc.total, got, tc.want)
		}
	}
}
