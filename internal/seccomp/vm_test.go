package seccomp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// call is the part of struct seccomp_data a filter sees.
type call struct {
	arch uint32
	nr   uint32
	ip   uint64
	args [6]uint64
}

// seccompData lays out c as the x/net/bpf VM must see it to behave like the
// kernel. The kernel's 32-bit loads read struct seccomp_data in native
// (little-endian) byte order; the VM's loads read big-endian. So each 32-bit
// word is written big-endian at the offset where the little-endian struct
// keeps it: the low half of a 64-bit field at its offset, the high half 4
// bytes above.
func seccompData(c call) []byte {
	b := make([]byte, seccompDataLen)
	put64 := func(off int, v uint64) {
		binary.BigEndian.PutUint32(b[off:], uint32(v))
		binary.BigEndian.PutUint32(b[off+4:], uint32(v>>32))
	}
	binary.BigEndian.PutUint32(b[offNr:], c.nr)
	binary.BigEndian.PutUint32(b[offArch:], c.arch)
	put64(8, c.ip)
	for i, a := range c.args {
		put64(offArgs+8*i, a)
	}
	return b
}

// newVM loads prog into the x/net/bpf VM.
func newVM(t testing.TB, prog []unix.SockFilter) *bpf.VM {
	t.Helper()
	ins := make([]bpf.Instruction, len(prog))
	for i, f := range prog {
		ins[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}.Disassemble()
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatalf("bpf.NewVM: %v", err)
	}
	return vm
}

// run returns the program's verdict on c.
func run(t testing.TB, vm *bpf.VM, c call) Action {
	t.Helper()
	v, err := vm.Run(seccompData(c))
	if err != nil {
		t.Fatalf("vm.Run(%+v): %v", c, err)
	}
	return Action(uint32(v))
}

// verdict is an independent reading of a policy's semantics, the oracle the
// compiled program is checked against.
func verdict(p *Policy, c call) Action {
	arch, err := lookupArch(p.Arch)
	if err != nil {
		panic(err)
	}
	if c.arch != arch.audit || (arch.foreignNrBit != 0 && c.nr >= arch.foreignNrBit) {
		return p.Default
	}
	for _, sc := range p.Syscalls {
		if sc.Nr != c.nr {
			continue
		}
	rules:
		for _, r := range sc.Rules {
			for _, cond := range r.Args {
				if !holds(cond, c.args[cond.Index]) {
					continue rules
				}
			}
			return r.Action
		}
		return p.Default
	}
	return p.Default
}

func holds(c Cond, arg uint64) bool {
	v, m := c.Value, c.Mask
	if c.Low32 {
		arg &= 0xffffffff
	}
	switch c.Op {
	case OpEqual:
		return arg == v
	case OpNotEqual:
		return arg != v
	case OpLess:
		return arg < v
	case OpLessEqual:
		return arg <= v
	case OpGreater:
		return arg > v
	case OpGreaterEqual:
		return arg >= v
	case OpMaskedEqual:
		return arg&m == v
	}
	panic("bad op")
}
