package sandbox

import (
	"math"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// cpuPlacer picks the host CPUs a sandbox with a CPU limit runs on: as many
// as the limit rounded up (0.5 CPU shows as one, 1.5 as two), so that nproc,
// os.cpu_count() and the JVM count what the sandbox can use (see
// spec.View). Each sandbox gets the CPUs the fewest live sandboxes are pinned
// to. The pin is a view, not the limit: the CPU quota still caps the
// workload, and a pinned process may widen its own affinity again.
type cpuPlacer struct {
	mu   sync.Mutex
	cpus []int            // the daemon's own CPUs
	load map[int]int      // live sandboxes pinned to each CPU
	held map[string][]int // each pinned sandbox's CPUs
}

func newCPUPlacer() *cpuPlacer {
	p := &cpuPlacer{load: map[int]int{}, held: map[string][]int{}}
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		for c := 0; c < len(set)*64; c++ {
			if set.IsSet(c) {
				p.cpus = append(p.cpus, c)
			}
		}
	}
	return p
}

// place returns the CPUs for sandbox name with a limit of cpus, or nil to
// leave it every CPU (no limit, or a limit of at least all of them).
func (p *cpuPlacer) place(name string, cpus float64) []int {
	n := int(math.Ceil(cpus))
	if cpus <= 0 || n >= len(p.cpus) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	order := slices.Clone(p.cpus)
	// Stable: among equally loaded CPUs the lower number first.
	slices.SortStableFunc(order, func(a, b int) int { return p.load[a] - p.load[b] })
	got := order[:n]
	slices.Sort(got)
	p.holdLocked(name, got)
	return got
}

func (p *cpuPlacer) holdLocked(name string, cpus []int) {
	p.releaseLocked(name)
	for _, c := range cpus {
		p.load[c]++
	}
	p.held[name] = cpus
}

// adopt counts the CPUs an adopted sandbox's PID 1 is pinned to.
func (p *cpuPlacer) adopt(name string, pid int) {
	var set unix.CPUSet
	if unix.SchedGetaffinity(pid, &set) != nil {
		return
	}
	var cpus []int
	for _, c := range p.cpus {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 || len(cpus) == len(p.cpus) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdLocked(name, cpus)
}

// of returns the CPUs sandbox name is pinned to, nil for all.
func (p *cpuPlacer) of(name string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[name]
}

// release forgets sandbox name's CPUs.
func (p *cpuPlacer) release(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(name)
}

func (p *cpuPlacer) releaseLocked(name string) {
	for _, c := range p.held[name] {
		p.load[c]--
	}
	delete(p.held, name)
}
