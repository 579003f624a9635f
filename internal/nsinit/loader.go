package nsinit

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A warren built without cgo is static and runs in any sandbox. A build with
// cgo (every -race test binary, or a plain `go build` on a machine with a C
// compiler) needs the ELF interpreter and libc it was linked against, which
// an image such as busybox or alpine does not have. For such a binary init
// binds the host's interpreter and the binary's libraries read-only into the
// sandbox's private /run and starts the agent through that interpreter. The
// files are public system libraries; they give sandboxed code nothing it
// could not bring itself.

// hostLibDir holds the bound files inside the sandbox.
const hostLibDir = "/run/warren/host-lib"

// loader is what a dynamically linked agent needs from the host.
type loader struct {
	interp string   // host path of the ELF interpreter
	libs   []string // host paths of the needed libraries
}

// dynamicLoader reads the ELF headers of the executable open as exe. It
// returns nil for a static binary.
func dynamicLoader(exe int) (*loader, error) {
	f, err := elf.Open("/proc/self/fd/" + strconv.Itoa(exe))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var l loader
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, err
			}
			l.interp = string(b[:max(0, len(b)-1)]) // NUL-terminated
		}
	}
	if l.interp == "" {
		return nil, nil
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	dirs := []string{filepath.Dir(l.interp), "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
		"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	for _, name := range needed {
		found := ""
		for _, d := range dirs {
			if p := filepath.Join(d, name); fileExists(p) {
				found = p
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("library %s of the warren binary not found on the host", name)
		}
		l.libs = append(l.libs, found)
	}
	return &l, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// bind places the interpreter and libraries under root's hostLibDir.
func (l *loader) bind(root string) error {
	dir := inRoot(root, hostLibDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return step("create "+hostLibDir, err)
	}
	for _, src := range append([]string{l.interp}, l.libs...) {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return step("resolve "+src, err)
		}
		dst := filepath.Join(dir, filepath.Base(src))
		if err := os.WriteFile(dst, nil, 0o755); err != nil {
			return step("create "+dst, err)
		}
		if err := bind(real, dst, true, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return step("bind "+src, err)
		}
	}
	return nil
}

// argv returns the program and arguments that start the agent through the
// bound interpreter.
func (l *loader) argv(exe string, args []string) (string, []string) {
	interp := filepath.Join(hostLibDir, filepath.Base(l.interp))
	return interp, append([]string{interp, "--library-path", hostLibDir, exe}, args[1:]...)
}
