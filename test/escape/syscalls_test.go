package escape

import (
	"fmt"
	"strings"
	"testing"
)

// TestDangerousSyscalls calls the syscalls behind most container escapes
// and kernel exploits of recent years. Each must fail with the exact errno
// the seccomp filter (or the kernel, for a user namespace without
// CAP_SYS_ADMIN) gives.
func TestDangerousSyscalls(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "sys", nil)
	b.needPython(t)
	cases := []struct{ name, expr, want string }{
		{"io_uring_setup", `sc("io_uring_setup", 8, ctypes.create_string_buffer(120))`, "EPERM"},
		{"bpf(BPF_PROG_LOAD)", `sc("bpf", 5, ctypes.create_string_buffer(128), 128)`, "EPERM"},
		{"bpf(BPF_MAP_CREATE)", `sc("bpf", 0, ctypes.create_string_buffer(128), 128)`, "EPERM"},
		{"userfaultfd", `sc("userfaultfd", 0)`, "EPERM"},
		{"keyctl(KEYCTL_GET_KEYRING_ID)", `sc("keyctl", 0, -3, 0)`, "EPERM"},
		{"add_key", `sc("add_key", "user", "k", "v", 1, -3)`, "EPERM"},
		{"request_key", `sc("request_key", "user", "k", 0, 0)`, "EPERM"},
		{"perf_event_open", `sc("perf_event_open", ctypes.create_string_buffer(struct.pack("=IIQ", 1, 128, 0) + bytes(112)), 0, -1, -1, 0)`, "EPERM"},
		{"open_by_handle_at", `sc("open_by_handle_at", os.open("/", os.O_RDONLY), ctypes.create_string_buffer(struct.pack("=Ii", 8, 1) + bytes(8)), 0)`, "EPERM"},
		{"name_to_handle_at", `sc("name_to_handle_at", -100, "/", ctypes.create_string_buffer(struct.pack("=Ii", 128, 0) + bytes(128)), ctypes.create_string_buffer(4), 0)`, "EPERM"},
		{"kexec_load", `sc("kexec_load", 0, 0, 0, 0)`, "EPERM"},
		{"kexec_file_load", `sc("kexec_file_load", -1, -1, 0, 0, 4)`, "EPERM"},
		{"unshare(CLONE_NEWUSER)", `sc("unshare", 0x10000000)`, "EPERM"},
		{"clone(CLONE_NEWUSER)", `clone_ns(0x10000000)`, "EPERM"},
		{"clone(CLONE_NEWNS|CLONE_NEWPID)", `clone_ns(0x00020000 | 0x20000000)`, "EPERM"},
		{"clone3(CLONE_NEWUSER)", `clone3(0x10000000)`, "ENOSYS"},
		{"clone3 (plain)", `clone3(0)`, "ENOSYS"},
		{"personality(ADDR_NO_RANDOMIZE)", `sc("personality", 0x0040000)`, "EPERM"},
		{"personality(READ_IMPLIES_EXEC)", `sc("personality", 0x0400000)`, "EPERM"},
		// Controls: what programs need still works, so the EPERMs above
		// are the filter's rules, not a broken test.
		{"control: personality query", `sc("personality", 0xffffffff)`, "OK"},
		{"control: fork", `clone_ns(0)`, "OK"},
	}
	var prog strings.Builder
	prog.WriteString(`
def clone_ns(flags):
    r, e = call("clone", flags | 17, 0, 0, 0, 0)
    if r == 0: os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        return "OK"
    return ename(e)
def clone3(flags):
    args = ctypes.create_string_buffer(struct.pack("=11Q", flags, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0))
    r, e = call("clone3", args, 88)
    if r == 0: os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        return "OK"
    return ename(e)
`)
	for i, c := range cases {
		fmt.Fprintf(&prog, "try:\n    out(\"c%d\", %s)\nexcept Exception as x:\n    out(\"c%d\", \"raised\", repr(x))\n", i, c.expr, i)
	}
	got := b.pyKV(t, prog.String())
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if g := got[fmt.Sprintf("c%d", i)]; g != c.want {
				t.Errorf("%s: %q, want %s", c.name, g, c.want)
			}
		})
	}
	t.Run("no nested user namespaces", func(t *testing.T) {
		if got := b.out(t, "cat /proc/sys/user/max_user_namespaces"); got != "0\n" {
			t.Errorf("max_user_namespaces inside = %q, want 0", got)
		}
		if res := b.sh(t, "unshare -Ur id 2>&1"); res.ExitCode == 0 {
			t.Errorf("unshare -Ur id succeeded: %q", res.Stdout)
		}
	})
}
