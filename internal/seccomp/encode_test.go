package seccomp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestEncodeDecode(t *testing.T) {
	for _, goarch := range Arches() {
		_, prog := compileDefault(t, Options{Arch: goarch, Caps: keptCaps, Kernel: "6.1"})
		b := Encode(prog)
		if len(b) != 8*len(prog) {
			t.Errorf("%s: len(Encode(prog)) = %d, want %d", goarch, len(b), 8*len(prog))
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: Decode(Encode(prog)): %v", goarch, err)
		}
		if diff := cmp.Diff(prog, got); diff != "" {
			t.Errorf("%s: Decode(Encode(prog)) (-want +got):\n%s", goarch, diff)
		}
	}
}

func TestEncodeLayout(t *testing.T) {
	// struct sock_filter, little-endian.
	got := Encode([]unix.SockFilter{{Code: 0x0015, Jt: 1, Jf: 2, K: 0xc000003e}, {Code: 0x0006, K: 0x7fff0000}})
	want := []byte{0x15, 0x00, 1, 2, 0x3e, 0x00, 0x00, 0xc0, 0x06, 0x00, 0, 0, 0x00, 0x00, 0xff, 0x7f}
	if !bytes.Equal(got, want) {
		t.Errorf("Encode = % x, want % x", got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	ret := unix.SockFilter{Code: opRet, K: uint32(ActAllow)}
	long := make([]unix.SockFilter, MaxInstructions+1)
	for i := range long {
		long[i] = ret
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty program"},
		{"partial instruction", append(Encode([]unix.SockFilter{ret}), 1, 2, 3), "whole number"},
		{"too long", Encode(long), "at most 4096"},
		{"no return at the end", Encode([]unix.SockFilter{ret, {Code: opLoadAbs, K: 0}}), "not a return"},
		{"unknown opcode", Encode([]unix.SockFilter{{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_IND}, ret}), "unexpected opcode"},
		{"load beyond seccomp_data", Encode([]unix.SockFilter{{Code: opLoadAbs, K: 64}, ret}), "outside seccomp_data"},
		{"unaligned load", Encode([]unix.SockFilter{{Code: opLoadAbs, K: 2}, ret}), "unaligned"},
		{"jump past the end", Encode([]unix.SockFilter{{Code: opJEQ, Jt: 1}, ret}), "past the end"},
		{"false jump past the end", Encode([]unix.SockFilter{{Code: opJGT, Jf: 5}, ret, ret}), "past the end"},
		{"ja past the end", Encode([]unix.SockFilter{{Code: opJA, K: 1}, ret}), "past the end"},
		{"ja far past the end", Encode([]unix.SockFilter{{Code: opJA, K: 0xffffffff}, ret}), "past the end"},
		{"offsets on a load", Encode([]unix.SockFilter{{Code: opLoadAbs, Jt: 1}, ret}), "non-jump"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzDecode checks that Decode never panics, that what it accepts encodes
// back to the same bytes, and that an accepted program runs to a verdict.
func FuzzDecode(f *testing.F) {
	for _, goarch := range Arches() {
		_, prog := compileDefault(f, Options{Arch: goarch, Caps: keptCaps, Kernel: "6.1"})
		f.Add(Encode(prog))
	}
	f.Add(Encode([]unix.SockFilter{{Code: opRet}}))
	f.Add([]byte{0x15, 0, 1, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		prog, err := Decode(b)
		if err != nil {
			return
		}
		if got := Encode(prog); !bytes.Equal(got, b) {
			t.Fatalf("Encode(Decode(b)) = % x, want % x", got, b)
		}
		vm := newVM(t, prog)
		for _, c := range []call{{}, {arch: unix.AUDIT_ARCH_X86_64, nr: 39}, {arch: unix.AUDIT_ARCH_AARCH64, nr: 172, args: [6]uint64{^uint64(0)}}} {
			run(t, vm, c)
		}
	})
}
