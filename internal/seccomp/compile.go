package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// MaxInstructions is the kernel's limit on the length of one classic BPF
// program (BPF_MAXINSNS).
const MaxInstructions = unix.BPF_MAXINSNS

// The classic BPF instructions the compiler emits. Decode accepts these
// only.
const (
	opLoadAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS  // A = seccomp_data[k:k+4]
	opAnd     = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K // A &= k
	opJA      = unix.BPF_JMP | unix.BPF_JA               // pc += k
	opJEQ     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K // pc += A == k ? jt : jf
	opJGT     = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K // pc += A > k ? jt : jf
	opJGE     = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K // pc += A >= k ? jt : jf
	opRet     = unix.BPF_RET | unix.BPF_K                // return k
)

// Offsets in struct seccomp_data { int nr; __u32 arch; __u64
// instruction_pointer; __u64 args[6]; }, in native byte order. Both
// supported architectures are little-endian, so the low half of args[i] is
// at offArgs+8*i and the high half 4 bytes above.
const (
	offNr          = 0
	offArch        = 4
	offArgs        = 16
	seccompDataLen = offArgs + 6*8
)

// leafSize is the number of syscalls below which the dispatch compares
// numbers one by one instead of halving the range again.
const leafSize = 6

// Compile translates a policy into a classic BPF program for
// seccomp(SECCOMP_SET_MODE_FILTER).
//
// The program checks seccomp_data.arch against the policy's architecture,
// then (on x86_64) refuses x32 numbers, then finds the syscall number by
// binary search over the policy's sorted numbers and runs that syscall's
// rules. Every refusal outside the rules is the policy's default action.
// 64-bit argument conditions compare the two 32-bit halves.
func Compile(p *Policy) ([]unix.SockFilter, error) {
	arch, err := lookupArch(p.Arch)
	if err != nil {
		return nil, err
	}
	if err := p.validate(arch); err != nil {
		return nil, err
	}

	g := &gen{def: p.Default}
	bad := g.newLabel()
	ok := g.newLabel()
	tree := g.newLabel()
	g.load(offArch)
	g.jump(opJEQ, arch.audit, ok, bad)
	if arch.foreignNrBit != 0 {
		g.bind(ok)
		g.load(offNr)
		g.jump(opJGE, arch.foreignNrBit, bad, tree)
		g.bind(bad)
		g.ret(p.Default)
	} else {
		g.bind(bad)
		g.ret(p.Default)
		g.bind(ok)
		g.load(offNr)
	}
	g.bind(tree)

	var entries []Syscall
	for _, sc := range p.Syscalls {
		if len(sc.Rules) == 0 || (len(sc.Rules[0].Args) == 0 && sc.Rules[0].Action == p.Default) {
			continue // the dispatch's default does the same
		}
		entries = append(entries, sc)
	}
	if len(entries) == 0 {
		g.ret(p.Default)
	} else {
		g.dispatch(entries)
	}

	prog, err := g.assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: compile %s policy: %w", p.Arch, err)
	}
	if len(prog) > MaxInstructions {
		return nil, fmt.Errorf("seccomp: compile %s policy: %d instructions, the kernel takes at most %d", p.Arch, len(prog), MaxInstructions)
	}
	return prog, nil
}

// validate checks what Compile relies on.
func (p *Policy) validate(arch *archInfo) error {
	for i, sc := range p.Syscalls {
		if i > 0 && sc.Nr <= p.Syscalls[i-1].Nr {
			return fmt.Errorf("seccomp: policy: syscalls not sorted by number, or duplicated: %s (%d) after %s (%d)",
				sc.Name, sc.Nr, p.Syscalls[i-1].Name, p.Syscalls[i-1].Nr)
		}
		if arch.foreignNrBit != 0 && sc.Nr >= arch.foreignNrBit {
			return fmt.Errorf("seccomp: policy: syscall %s: number %#x is in another ABI's range", sc.Name, sc.Nr)
		}
		for _, r := range sc.Rules {
			for _, c := range r.Args {
				if c.Index > 5 {
					return fmt.Errorf("seccomp: policy: syscall %s: argument index %d out of range", sc.Name, c.Index)
				}
				if _, ok := opNames[c.Op]; !ok {
					return fmt.Errorf("seccomp: policy: syscall %s: %v", sc.Name, c.Op)
				}
				if c.Low32 && (c.Value>>32 != 0 || c.Mask>>32 != 0) {
					return fmt.Errorf("seccomp: policy: syscall %s: 32-bit condition %v with a 64-bit operand", sc.Name, c)
				}
			}
		}
	}
	return nil
}

// gen generates a program through a small assembler with forward labels.
type gen struct {
	asm
	def Action
	// pool holds the return instructions the current dispatch leaf jumps
	// to; flushPool emits them after the leaf so its jumps stay short.
	pool      map[Action]label
	poolOrder []Action
}

// retLabel returns the label of a pooled "return a".
func (g *gen) retLabel(a Action) label {
	if l, ok := g.pool[a]; ok {
		return l
	}
	if g.pool == nil {
		g.pool = map[Action]label{}
	}
	l := g.newLabel()
	g.pool[a] = l
	g.poolOrder = append(g.poolOrder, a)
	return l
}

func (g *gen) flushPool() {
	for _, a := range g.poolOrder {
		g.bind(g.pool[a])
		g.ret(a)
	}
	g.pool, g.poolOrder = nil, nil
}

// dispatch emits a binary search on the syscall number (in A) over entries,
// sorted by number.
func (g *gen) dispatch(entries []Syscall) {
	if len(entries) <= leafSize {
		g.leaf(entries)
		return
	}
	mid := len(entries) / 2
	left, right := g.newLabel(), g.newLabel()
	g.jump(opJGE, entries[mid].Nr, right, left)
	g.bind(left)
	g.dispatch(entries[:mid])
	g.bind(right)
	g.dispatch(entries[mid:])
}

// leaf compares the number with each entry's, then emits the entries'
// rules and the returns they use.
func (g *gen) leaf(entries []Syscall) {
	blocks := make([]label, len(entries))
	for i, sc := range entries {
		if len(sc.Rules[0].Args) == 0 {
			blocks[i] = g.retLabel(sc.Rules[0].Action)
		} else {
			blocks[i] = g.newLabel()
		}
		next := g.newLabel()
		if i == len(entries)-1 {
			next = g.retLabel(g.def)
		}
		g.jump(opJEQ, sc.Nr, blocks[i], next)
		if i < len(entries)-1 {
			g.bind(next)
		}
	}
	for i, sc := range entries {
		if len(sc.Rules[0].Args) == 0 {
			continue
		}
		g.bind(blocks[i])
		g.rules(sc.Rules)
	}
	g.flushPool()
}

// rules emits a syscall's rules: the first whose conditions all hold returns
// its action; if none does, the default action.
func (g *gen) rules(rules []Rule) {
	for i, r := range rules {
		if len(r.Args) == 0 {
			g.ja(g.retLabel(r.Action))
			return // later rules are unreachable
		}
		fail := g.retLabel(g.def)
		if i < len(rules)-1 {
			fail = g.newLabel()
		}
		for j, c := range r.Args {
			pass := g.retLabel(r.Action)
			if j < len(r.Args)-1 {
				pass = g.newLabel()
			}
			g.cond(c, pass, fail)
			if j < len(r.Args)-1 {
				g.bind(pass)
			}
		}
		if i < len(rules)-1 {
			g.bind(fail)
		}
	}
}

// cond emits a jump to pass if the condition holds and to fail if not.
func (g *gen) cond(c Cond, pass, fail label) {
	lo := offArgs + 8*uint32(c.Index)
	hi := lo + 4
	vl, vh := uint32(c.Value), uint32(c.Value>>32)

	if c.Op == OpMaskedEqual {
		ml, mh := uint32(c.Mask), uint32(c.Mask>>32)
		if vl&^ml != 0 || (!c.Low32 && vh&^mh != 0) {
			g.ja(fail) // Value has bits outside Mask: never equal
			return
		}
		if !c.Low32 && mh != 0 {
			next := g.newLabel()
			g.load(hi)
			g.emit(opAnd, mh)
			g.jump(opJEQ, vh, next, fail)
			g.bind(next)
		}
		if ml == 0 {
			g.ja(pass) // 0 & arg == 0
			return
		}
		g.load(lo)
		if ml != 0xffffffff {
			g.emit(opAnd, ml)
		}
		g.jump(opJEQ, vl, pass, fail)
		return
	}

	if !c.Low32 {
		next := g.newLabel()
		g.load(hi)
		switch c.Op {
		case OpEqual:
			g.jump(opJEQ, vh, next, fail)
		case OpNotEqual:
			g.jump(opJEQ, vh, next, pass)
		case OpGreater, OpGreaterEqual, OpLess, OpLessEqual:
			// The high halves decide unless they are equal.
			above, below := pass, fail
			if c.Op == OpLess || c.Op == OpLessEqual {
				above, below = fail, pass
			}
			notAbove := g.newLabel()
			g.jump(opJGT, vh, above, notAbove)
			g.bind(notAbove)
			g.jump(opJEQ, vh, next, below)
		}
		g.bind(next)
	}
	g.load(lo)
	switch c.Op {
	case OpEqual:
		g.jump(opJEQ, vl, pass, fail)
	case OpNotEqual:
		g.jump(opJEQ, vl, fail, pass)
	case OpGreater:
		g.jump(opJGT, vl, pass, fail)
	case OpGreaterEqual:
		g.jump(opJGE, vl, pass, fail)
	case OpLess:
		g.jump(opJGE, vl, fail, pass)
	case OpLessEqual:
		g.jump(opJGT, vl, fail, pass)
	}
}

func (g *gen) load(off uint32) { g.emit(opLoadAbs, off) }
func (g *gen) ret(a Action)    { g.emit(opRet, uint32(a)) }

// label names a position in the program; jumps to it are resolved by
// assemble. All jumps are forward, as classic BPF requires.
type label int

// item is an instruction, or the position of a label when isLabel is set.
type item struct {
	isLabel bool
	label   label // the label bound here (isLabel)
	code    uint16
	k       uint32
	jt, jf  label // targets of a conditional jump; jt is JA's target
}

// asm collects instructions and labels and resolves them.
type asm struct {
	items  []item
	labels int
}

func (a *asm) newLabel() label {
	a.labels++
	return label(a.labels - 1)
}

func (a *asm) bind(l label)               { a.items = append(a.items, item{isLabel: true, label: l}) }
func (a *asm) emit(code uint16, k uint32) { a.items = append(a.items, item{code: code, k: k}) }
func (a *asm) ja(l label)                 { a.items = append(a.items, item{code: opJA, jt: l}) }

func (a *asm) jump(code uint16, k uint32, jt, jf label) {
	a.items = append(a.items, item{code: code, k: k, jt: jt, jf: jf})
}

func isCondJump(code uint16) bool {
	return code&0x07 == unix.BPF_JMP && code&0xf0 != unix.BPF_JA
}

// assemble resolves the labels. A conditional jump reaches at most 255
// instructions ahead; a farther target gets a trampoline right after the
// jump (a copy of the target if that is a return, else a JA, whose reach is
// 32 bits), repeated until every jump fits.
func (a *asm) assemble() ([]unix.SockFilter, error) {
	for {
		pos, at, err := a.layout()
		if err != nil {
			return nil, err
		}
		changed := false
		out := make([]item, 0, len(a.items))
		pc := 0
		for _, it := range a.items {
			out = append(out, it)
			if it.isLabel {
				continue
			}
			if isCondJump(it.code) {
				cur := &out[len(out)-1]
				var tramps []item
				for _, t := range []*label{&cur.jt, &cur.jf} {
					if pos[*t]-pc-1 <= 255 {
						continue
					}
					l := a.newLabel()
					tramp := item{code: opJA, jt: *t}
					if target := at[pos[*t]]; target.code == opRet {
						tramp = target
					}
					tramps = append(tramps, item{isLabel: true, label: l}, tramp)
					*t = l
					changed = true
				}
				out = append(out, tramps...)
			}
			pc++
		}
		a.items = out
		if !changed {
			break
		}
	}

	pos, _, err := a.layout()
	if err != nil {
		return nil, err
	}
	prog := make([]unix.SockFilter, 0, len(a.items))
	for _, it := range a.items {
		if it.isLabel {
			continue
		}
		pc := len(prog)
		ins := unix.SockFilter{Code: it.code, K: it.k}
		switch {
		case it.code == opJA:
			off := pos[it.jt] - pc - 1
			if off < 0 {
				return nil, fmt.Errorf("internal error: backward jump at %d", pc)
			}
			ins.K = uint32(off)
		case isCondJump(it.code):
			jt, jf := pos[it.jt]-pc-1, pos[it.jf]-pc-1
			if jt < 0 || jf < 0 || jt > 255 || jf > 255 {
				return nil, fmt.Errorf("internal error: jump out of range at %d", pc)
			}
			ins.Jt, ins.Jf = uint8(jt), uint8(jf)
		}
		prog = append(prog, ins)
	}
	return prog, nil
}

// layout returns each label's instruction index and the instructions by
// index.
func (a *asm) layout() (pos []int, at []item, err error) {
	pos = make([]int, a.labels)
	for i := range pos {
		pos[i] = -1
	}
	for _, it := range a.items {
		if it.isLabel {
			if pos[it.label] >= 0 {
				return nil, nil, fmt.Errorf("internal error: label %d bound twice", it.label)
			}
			pos[it.label] = len(at)
			continue
		}
		at = append(at, it)
	}
	for _, it := range at {
		var targets []label
		switch {
		case it.code == opJA:
			targets = []label{it.jt}
		case isCondJump(it.code):
			targets = []label{it.jt, it.jf}
		}
		for _, t := range targets {
			if pos[t] < 0 || pos[t] >= len(at) {
				return nil, nil, fmt.Errorf("internal error: jump to unbound or final label %d", t)
			}
		}
	}
	return pos, at, nil
}
