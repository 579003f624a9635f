package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// insnLen is the size of one encoded instruction, as struct sock_filter.
const insnLen = 8

// Encode serializes a program, 8 bytes per instruction laid out as struct
// sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; } in little-endian
// byte order (the in-memory layout on amd64 and arm64). The daemon compiles
// once and ships the result to the sandbox's init this way.
func Encode(prog []unix.SockFilter) []byte {
	b := make([]byte, 0, len(prog)*insnLen)
	for _, ins := range prog {
		b = binary.LittleEndian.AppendUint16(b, ins.Code)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.LittleEndian.AppendUint32(b, ins.K)
	}
	return b
}

// Decode parses what Encode produced and validates the program (see
// Validate): it must be a program Compile could have emitted, since init
// loads it without further checks.
func Decode(b []byte) ([]unix.SockFilter, error) {
	if len(b)%insnLen != 0 {
		return nil, fmt.Errorf("seccomp: decode program: %d bytes is not a whole number of %d-byte instructions", len(b), insnLen)
	}
	prog := make([]unix.SockFilter, len(b)/insnLen)
	for i := range prog {
		c := b[i*insnLen:]
		prog[i] = unix.SockFilter{
			Code: binary.LittleEndian.Uint16(c),
			Jt:   c[2],
			Jf:   c[3],
			K:    binary.LittleEndian.Uint32(c[4:]),
		}
	}
	if err := validate(prog); err != nil {
		return nil, fmt.Errorf("seccomp: decode program: %w", err)
	}
	return prog, nil
}

// Validate checks that prog is a well-formed seccomp program made of the
// instructions Compile emits: between 1 and MaxInstructions instructions,
// aligned 32-bit loads inside struct seccomp_data, jumps that stay inside
// the program, and a return as the last instruction. The kernel checks the
// same and more; this catches a corrupt blob with a clear error before the
// sandbox starts.
func Validate(prog []unix.SockFilter) error {
	if err := validate(prog); err != nil {
		return fmt.Errorf("seccomp: invalid program: %w", err)
	}
	return nil
}

func validate(prog []unix.SockFilter) error {
	if len(prog) == 0 {
		return errors.New("empty program")
	}
	if len(prog) > MaxInstructions {
		return fmt.Errorf("%d instructions, the kernel takes at most %d", len(prog), MaxInstructions)
	}
	for pc, ins := range prog {
		left := uint64(len(prog) - pc - 1) // instructions after this one
		switch ins.Code {
		case opLoadAbs:
			if ins.K >= seccompDataLen || ins.K%4 != 0 {
				return fmt.Errorf("instruction %d: load at offset %d, outside seccomp_data or unaligned", pc, ins.K)
			}
		case opAnd, opRet:
		case opJA:
			if uint64(ins.K) >= left {
				return fmt.Errorf("instruction %d: jump by %d past the end", pc, ins.K)
			}
		case opJEQ, opJGT, opJGE:
			if uint64(ins.Jt) >= left || uint64(ins.Jf) >= left {
				return fmt.Errorf("instruction %d: jump by %d/%d past the end", pc, ins.Jt, ins.Jf)
			}
		default:
			return fmt.Errorf("instruction %d: unexpected opcode %#04x", pc, ins.Code)
		}
		if ins.Code != opJEQ && ins.Code != opJGT && ins.Code != opJGE && (ins.Jt != 0 || ins.Jf != 0) {
			return fmt.Errorf("instruction %d: jump offsets on a non-jump instruction", pc)
		}
	}
	if last := prog[len(prog)-1]; last.Code != opRet {
		return fmt.Errorf("last instruction is %#04x, not a return", last.Code)
	}
	return nil
}
