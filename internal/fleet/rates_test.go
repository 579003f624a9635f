package fleet

import (
	"math"
	"testing"
)

func TestShares(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mine   map[string]int64
		others []map[string]int64
		want   map[string]float64
	}{
		{"only here: the whole limit", map[string]int64{"k": 10}, nil, map[string]float64{}},
		{"spread evenly over three", map[string]int64{"k": 10}, []map[string]int64{{"k": 10}, {"k": 10}}, map[string]float64{"k": 1.0 / 3}},
		{"most of it here", map[string]int64{"k": 90}, []map[string]int64{{"k": 10}}, map[string]float64{"k": 0.9}},
		{"a small part here keeps half an even split", map[string]int64{"k": 1}, []map[string]int64{{"k": 99}}, map[string]float64{"k": 0.25}},
		{"not seen here: an even split with the others", nil, []map[string]int64{{"k": 50}, {"k": 50}}, map[string]float64{"k": 1.0 / 3}},
		{"other callers untouched", map[string]int64{"a": 5}, []map[string]int64{{"b": 5}}, map[string]float64{"b": 0.5}},
	} {
		got := shares(tc.mine, tc.others)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
		for k, w := range tc.want {
			if math.Abs(got[k]-w) > 1e-9 {
				t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
	if b := busiest(map[string]int64{"a": 1, "b": 3, "c": 2}, 2); len(b) != 2 || b["b"] != 3 || b["c"] != 2 {
		t.Fatalf("busiest = %v", b)
	}
}
