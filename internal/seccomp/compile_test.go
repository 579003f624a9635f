package seccomp

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProgramSize keeps the programs within the kernel's limit on both
// architectures and for every option that changes them.
func TestProgramSize(t *testing.T) {
	for _, goarch := range Arches() {
		for _, opts := range []Options{
			{Caps: keptCaps, Kernel: "6.1"},
			{Kernel: "6.1"},
			{Caps: allCaps(), Kernel: "6.1", AllowClone3: true},
			{Caps: keptCaps, Kernel: "4.4"},
		} {
			opts.Arch = goarch
			p, prog := compileDefault(t, opts)
			if len(prog) >= MaxInstructions {
				t.Errorf("%s %+v: %d instructions, want fewer than %d", goarch, opts, len(prog), MaxInstructions)
			}
			if err := Validate(prog); err != nil {
				t.Errorf("%s: Validate(Compile()) = %v", goarch, err)
			}
			if opts.Caps != nil && len(opts.Caps) == len(keptCaps) && opts.Kernel == "6.1" {
				t.Logf("%s: %d instructions, %+v", goarch, len(prog), p.Stats())
			}
		}
	}
}

// interesting returns values at the edges of the conditions in p, and
// around the 32-bit boundaries.
func interesting(p *Policy) []uint64 {
	vals := []uint64{0, 1, 2, 0x7fffffff, 0x80000000, 0xffffffff, 1 << 32, 1<<32 | 1, 0xffffffff00000000, ^uint64(0)}
	for _, sc := range p.Syscalls {
		for _, r := range sc.Rules {
			for _, c := range r.Args {
				for _, v := range []uint64{c.Value, c.Mask, c.Value | c.Mask} {
					vals = append(vals, v-1, v, v+1, v|1<<32, v|0xffffffff00000000, v|1<<63)
				}
			}
		}
	}
	return vals
}

// differential runs the compiled program and the policy's reference
// semantics on many calls and reports every disagreement.
func differential(t *testing.T, p *Policy, prog []unix.SockFilter, rng *rand.Rand, extraNrs ...uint32) {
	t.Helper()
	arch, err := lookupArch(p.Arch)
	if err != nil {
		t.Fatal(err)
	}
	vm := newVM(t, prog)
	vals := interesting(p)
	nrs := extraNrs
	for n := uint32(0); n < 600; n++ {
		nrs = append(nrs, n, n|0x40000000)
	}
	nrs = append(nrs, 0x3fffffff, 0x80000000, 0xffffffff, 1<<31-1)
	archs := []uint32{arch.audit, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_AARCH64, 0x40000003, unix.AUDIT_ARCH_ARM, 0, 0xffffffff}
	failures := 0
	check := func(c call) {
		if got, want := run(t, vm, c), verdict(p, c); got != want && failures < 20 {
			failures++
			t.Errorf("%s: call %+v: program says %v, policy says %v", p.Arch, c, got, want)
		}
	}
	for _, a := range archs {
		for i, n := range nrs {
			if a == arch.audit || i%16 == 0 { // other archs only need a sample
				check(call{arch: a, nr: n})
			}
		}
	}
	for _, sc := range p.Syscalls {
		n := 5 // enough for a syscall whose rules have no conditions
		if slices.ContainsFunc(sc.Rules, func(r Rule) bool { return len(r.Args) > 0 }) {
			n = 300
		}
		for range n {
			c := call{arch: arch.audit, nr: sc.Nr, ip: rng.Uint64()}
			for j := range c.args {
				if rng.IntN(4) == 0 {
					c.args[j] = rng.Uint64()
				} else {
					c.args[j] = vals[rng.IntN(len(vals))]
				}
			}
			check(c)
		}
	}
}

// TestCompileMatchesPolicy checks the default policies' programs against
// the reference semantics.
func TestCompileMatchesPolicy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, goarch := range Arches() {
		for _, opts := range []Options{
			{Caps: keptCaps, Kernel: "6.1"},
			{Caps: allCaps(), Kernel: "6.1", AllowClone3: true},
		} {
			opts.Arch = goarch
			p, prog := compileDefault(t, opts)
			differential(t, p, prog, rng)
		}
	}
}

// randomPolicy builds a policy with random rules on random syscalls, to
// exercise every operator on both halves and the assembler's long jumps.
func randomPolicy(rng *rand.Rand, goarch string, syscalls, maxRules int) *Policy {
	edges := []uint64{0, 1, 2, 0x41, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 1 << 32, 1<<32 | 0x41,
		0x1234567800000000, 0xffffffff00000000, 0x8000000000000000, ^uint64(0)}
	value := func(low32 bool) uint64 {
		v := edges[rng.IntN(len(edges))]
		if rng.IntN(3) == 0 {
			v = rng.Uint64()
		}
		if low32 {
			v &= 0xffffffff
		}
		return v
	}
	actions := []Action{ActAllow, ActErrno(unix.EACCES), ActErrno(unix.ENOSYS), ActKillProcess, ActLog}
	p := &Policy{Arch: goarch, Default: ActErrno(unix.EPERM)}
	used := map[uint32]bool{}
	for len(p.Syscalls) < syscalls {
		n := uint32(rng.IntN(500))
		if used[n] {
			continue
		}
		used[n] = true
		sc := Syscall{Name: "sys", Nr: n}
		for range 1 + rng.IntN(maxRules) {
			r := Rule{Action: actions[rng.IntN(len(actions))]}
			for range rng.IntN(4) {
				c := Cond{Index: uint8(rng.IntN(6)), Op: Op(1 + rng.IntN(7)), Low32: rng.IntN(3) == 0}
				c.Value = value(c.Low32)
				if c.Op == OpMaskedEqual {
					c.Mask = value(c.Low32)
					if rng.IntN(2) == 0 {
						c.Value &= c.Mask // usually satisfiable
					}
				}
				r.Args = append(r.Args, c)
			}
			sc.Rules = append(sc.Rules, r)
		}
		p.Syscalls = append(p.Syscalls, sc)
	}
	sortSyscalls(p.Syscalls)
	return p
}

func TestCompileRandomPolicies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 40 {
		goarch := Arches()[i%2]
		p := randomPolicy(rng, goarch, 1+rng.IntN(60), 1+rng.IntN(8))
		prog, err := Compile(p)
		if err != nil {
			t.Fatalf("Compile(random policy %d): %v", i, err)
		}
		if err := Validate(prog); err != nil {
			t.Fatalf("Validate(random policy %d): %v", i, err)
		}
		differential(t, p, prog, rng)
	}
}

// TestCompileLongJumps forces conditional jumps beyond 255 instructions,
// which the assembler must route through trampolines.
func TestCompileLongJumps(t *testing.T) {
	p := &Policy{Arch: "amd64", Default: ActErrno(unix.EPERM)}
	var rules []Rule
	for v := range uint64(70) {
		rules = append(rules, Rule{Action: ActErrno(unix.Errno(1 + v%100)), Args: []Cond{{Index: 2, Op: OpEqual, Value: v<<32 | v}}})
	}
	rules = append(rules, Rule{Action: ActAllow})
	for n := range uint32(8) {
		p.Syscalls = append(p.Syscalls, Syscall{Name: "many", Nr: n * 3, Rules: rules})
	}
	prog, err := Compile(p)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	far := 0
	for _, ins := range prog {
		if ins.Code == opJA && ins.K > 255 {
			far++
		}
	}
	if far == 0 {
		t.Errorf("no jump beyond 255 instructions in a %d-instruction program; the test does not test trampolines", len(prog))
	}
	vm := newVM(t, prog)
	for _, sc := range p.Syscalls {
		for v := range uint64(72) {
			c := call{arch: unix.AUDIT_ARCH_X86_64, nr: sc.Nr, args: [6]uint64{2: v<<32 | v}}
			if got, want := run(t, vm, c), verdict(p, c); got != want {
				t.Fatalf("nr %d arg2 %#x: program says %v, policy says %v", sc.Nr, c.args[2], got, want)
			}
		}
	}
	differential(t, p, prog, rand.New(rand.NewPCG(5, 6)))
}

func TestCompileTooLong(t *testing.T) {
	p := &Policy{Arch: "arm64", Default: ActErrno(unix.EPERM)}
	var rules []Rule
	for v := range uint64(2100) {
		rules = append(rules, Rule{Action: ActAllow, Args: []Cond{{Index: 0, Op: OpEqual, Value: v}}})
	}
	p.Syscalls = []Syscall{{Name: "read", Nr: 63, Rules: rules}}
	if _, err := Compile(p); err == nil || !strings.Contains(err.Error(), "at most 4096") {
		t.Errorf("Compile(4200-instruction policy): error %v, want one about the limit", err)
	}
}

func TestCompileEmptyPolicy(t *testing.T) {
	for _, goarch := range Arches() {
		p := &Policy{Arch: goarch, Default: ActErrno(unix.EPERM)}
		prog, err := Compile(p)
		if err != nil {
			t.Fatalf("Compile(empty %s policy): %v", goarch, err)
		}
		differential(t, p, prog, rand.New(rand.NewPCG(7, 8)))
	}
}

func TestCompileInvalidPolicies(t *testing.T) {
	allow := []Rule{{Action: ActAllow}}
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"arch", Policy{Arch: "mips"}, "unsupported architecture"},
		{"unsorted", Policy{Arch: "amd64", Syscalls: []Syscall{{Name: "b", Nr: 2, Rules: allow}, {Name: "a", Nr: 1, Rules: allow}}}, "not sorted"},
		{"duplicate", Policy{Arch: "amd64", Syscalls: []Syscall{{Name: "a", Nr: 1, Rules: allow}, {Name: "b", Nr: 1, Rules: allow}}}, "duplicated"},
		{"x32 number", Policy{Arch: "amd64", Syscalls: []Syscall{{Name: "x", Nr: 0x40000001, Rules: allow}}}, "another ABI"},
		{"index", Policy{Arch: "amd64", Syscalls: []Syscall{{Name: "a", Nr: 1, Rules: []Rule{{Action: ActAllow, Args: []Cond{{Index: 6, Op: OpEqual}}}}}}}, "index 6"},
		{"op", Policy{Arch: "amd64", Syscalls: []Syscall{{Name: "a", Nr: 1, Rules: []Rule{{Action: ActAllow, Args: []Cond{{Index: 0}}}}}}}, "op(0)"},
		{"low32", Policy{Arch: "amd64", Syscalls: []Syscall{{Name: "a", Nr: 1, Rules: []Rule{{Action: ActAllow, Args: []Cond{{Index: 0, Op: OpEqual, Value: 1 << 32, Low32: true}}}}}}}, "64-bit operand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Compile(&tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
