package quota

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCreateAmong is BenchmarkCreateRemove's per-layer create with 50
// live layers beside it: the admission reads every image, and the guard
// looks at every layer once per create.
func BenchmarkCreateAmong(b *testing.B) {
	dir := dataDir(b)
	l := open(b, dir, Options{Mode: ModeImagePerLayer})
	for i := range 50 {
		if _, err := l.Create(fmt.Sprintf("live%d", i), 64*MiB); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Remove(fmt.Sprintf("live%d", i)) })
	}
	var create time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := l.Create("x", 1<<30); err != nil {
			b.Fatal(err)
		}
		create += time.Since(t0)
		if err := l.Remove("x"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(create.Microseconds())/1000/float64(b.N), "create-ms")
}

// BenchmarkGuard measures one guard tick and one admission check with 50
// live layers: what a create adds, and what the guard costs every 200 ms.
func BenchmarkGuard(b *testing.B) {
	dir := dataDir(b)
	l := open(b, dir, Options{Mode: ModeImagePerLayer})
	for i := range 50 {
		if _, err := l.Create(fmt.Sprintf("live%d", i), 64*MiB); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Remove(fmt.Sprintf("live%d", i)) })
	}
	f := l.be.(*imageFS)
	b.Run("tick", func(b *testing.B) {
		for b.Loop() {
			guardTick()
		}
	})
	b.Run("admit", func(b *testing.B) {
		for b.Loop() {
			if err := f.admit(MiB); err != nil {
				b.Fatal(err)
			}
		}
	})
}
