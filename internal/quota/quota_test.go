package quota

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

const (
	MiB = 1 << 20
	// slack is how far the bytes written before the limit hit may be from
	// the limit: the layer's own directories and extent blocks count too.
	slack = 256 << 10
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "overlay" {
		os.Exit(overlayChild())
	}
	os.Exit(m.Run())
}

// requireLoop skips the test unless it runs as root on a host with loop
// devices.
func requireLoop(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts and loop devices")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices: %v", err)
	}
}

// dataDir returns a fresh data directory and registers a cleanup, run after
// every cleanup registered later (Close among them), that fails the test if
// a mount or a loop device bound to a file below it is left, and then
// removes them so that one failure does not leak into the host.
func dataDir(t testing.TB) string {
	t.Helper()
	requireLoop(t)
	dir := t.TempDir()
	t.Cleanup(func() {
		mounts, loops := leftovers(t, dir)
		for _, m := range mounts {
			t.Errorf("leaked mount %s", m)
		}
		for _, l := range loops {
			t.Errorf("leaked loop device %s", l)
		}
		for _, m := range slices.Backward(mounts) { // deepest first
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				t.Errorf("clean up mount %s: %v", m, err)
			}
		}
		for _, l := range loops {
			if f, err := os.Open(l); err == nil {
				unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
				f.Close()
			}
		}
	})
	return dir
}

// leftovers returns the mount points at or below dir and the loop devices
// bound to files below it. The kernel tears a loop device down in umount(2)
// itself, but a device probed by udev can stay a moment longer, so it waits
// up to a few seconds for the state to settle.
func leftovers(t testing.TB, dir string) (mounts, loops []string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		mounts, loops = mountsUnder(t, dir), loopsUnder(dir)
		if len(mounts)+len(loops) == 0 || time.Now().After(deadline) {
			return mounts, loops
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// loopsUnder returns the loop devices whose backing file is below dir, what
// `losetup -a` would list for it.
func loopsUnder(dir string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
			out = append(out, "/dev/"+strings.Split(f, "/")[3])
		}
	}
	return out
}

// open opens layers in mode for the test and closes them at its end. It
// skips the test if the mode cannot work on this host.
func open(t testing.TB, dir string, o Options) *Layers {
	t.Helper()
	l, err := Open(dir, o)
	if errors.Is(err, errUnusable) {
		t.Skipf("mode %v cannot work here: %v", o.Mode, err)
	}
	if err != nil {
		t.Fatalf("Open(%s, %v) = %v", dir, o.Mode, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

var modes = []Mode{ModeProjectQuota, ModeSharedImage, ModeImagePerLayer}

// Small shared images keep the tests fast; the size does not change the
// mechanism.
func testOptions(m Mode) Options { return Options{Mode: m, ImageBytes: 256 * MiB} }

// writeFile writes n bytes to path, creating it and its parent, and returns
// how many it wrote before the first error. It drops CAP_SYS_RESOURCE for
// the writes, as a sandbox has: the capability exempts from quota limits.
func writeFile(path string, n int64) (written int64, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread with the reduced capabilities exits
		// with this goroutine instead of going back to the scheduler.
		runtime.LockOSThread()
		if err = dropSysResource(); err != nil {
			return
		}
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return
		}
		var f *os.File
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		buf := make([]byte, 64<<10)
		for i := range buf {
			buf[i] = byte(i) | 1 // not zeros: nothing may be sparse
		}
		for written < n && err == nil {
			var k int
			k, err = f.Write(buf[:min(int64(len(buf)), n-written)])
			written += int64(k)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	<-done
	return written, err
}

// dropSysResource removes CAP_SYS_RESOURCE from the calling thread's
// effective set.
func dropSysResource() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[unix.CAP_SYS_RESOURCE/32].Effective &^= 1 << (unix.CAP_SYS_RESOURCE % 32)
	return unix.Capset(&hdr, &data[0])
}

func isFull(err error) bool { return errors.Is(err, unix.EDQUOT) || errors.Is(err, unix.ENOSPC) }

// TestLayers runs the behaviour every mode must have.
func TestLayers(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			dir := dataDir(t)
			l := open(t, dir, testOptions(m))
			if l.Mode() != m {
				t.Fatalf("Mode() = %v, want %v", l.Mode(), m)
			}
			testLayers(t, l)
		})
	}
}

func testLayers(t *testing.T, l *Layers) {
	a, err := l.Create("a", 4*MiB)
	if err != nil {
		t.Fatalf("Create(a, 4 MiB) = %v", err)
	}
	if a != filepath.Join(l.Dir(), "a") {
		t.Errorf("Create(a) = %s, want %s", a, filepath.Join(l.Dir(), "a"))
	}
	if st, err := os.Stat(a); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("layer a: %v, mode %v, want 0700", err, st.Mode())
	}
	b, err := l.Create("b", 8*MiB)
	if err != nil {
		t.Fatalf("Create(b, 8 MiB) = %v", err)
	}

	if n, err := writeFile(filepath.Join(a, "f1"), 3*MiB); err != nil {
		t.Fatalf("write 3 MiB into a 4 MiB layer: %v after %d bytes", err, n)
	}
	// A directory created later: what is written below it counts too.
	n, err := writeFile(filepath.Join(a, "later", "deeper", "f2"), 4*MiB)
	if !isFull(err) {
		t.Fatalf("write 3+4 MiB into a 4 MiB layer: err = %v after %d bytes, want EDQUOT or ENOSPC", err, n)
	}
	total := 3*MiB + n
	if total < 4*MiB-slack || total > 4*MiB+slack {
		t.Errorf("wrote %d bytes into a 4 MiB layer before %v, want 4 MiB ± %d", total, err, slack)
	}
	t.Logf("a 4 MiB layer took %d bytes, then: %v", total, err)

	// The other layer has its own limit and is not affected.
	if n, err := writeFile(filepath.Join(b, "f"), 5*MiB); err != nil {
		t.Errorf("write 5 MiB into the 8 MiB layer next to a full one: %v after %d bytes", err, n)
	}
	for name, want := range map[string]int64{"a": total, "b": 5 * MiB} {
		got, err := l.Usage(name)
		if err != nil || got < want || got > want+slack {
			t.Errorf("Usage(%s) = %d, %v; want %d to %d", name, got, err, want, want+slack)
		}
	}

	if names, err := l.Names(); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("Names() = %q, %v; want [a b]", names, err)
	}
	if err := l.Remove("a"); err != nil {
		t.Fatalf("Remove(a) = %v", err)
	}
	if _, err := os.Lstat(a); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove(a): stat = %v, want not exist", err)
	}
	if names, err := l.Names(); err != nil || !slices.Equal(names, []string{"b"}) {
		t.Errorf("Names() = %q, %v; want [b]", names, err)
	}
	// The name and the space are free again.
	a, err = l.Create("a", 2*MiB)
	if err != nil {
		t.Fatalf("Create(a, 2 MiB) again = %v", err)
	}
	if got, err := l.Usage("a"); err != nil || got > slack {
		t.Errorf("Usage(a) of a new layer = %d, %v; want at most %d", got, err, slack)
	}
	if n, err := writeFile(filepath.Join(a, "f"), 3*MiB); !isFull(err) || n < 2*MiB-slack || n > 2*MiB+slack {
		t.Errorf("write 3 MiB into the new 2 MiB layer: %d bytes, %v; want 2 MiB then EDQUOT or ENOSPC", n, err)
	}

	// No limit.
	c, err := l.Create("c", 0)
	if err != nil {
		t.Fatalf("Create(c, 0) = %v", err)
	}
	if n, err := writeFile(filepath.Join(c, "f"), 10*MiB); err != nil {
		t.Errorf("write 10 MiB into an unlimited layer: %v after %d bytes", err, n)
	}
	if got, err := l.Usage("c"); err != nil || got < 10*MiB || got > 10*MiB+slack {
		t.Errorf("Usage(c) = %d, %v; want about 10 MiB", got, err)
	}

	for _, tc := range []struct {
		name  string
		call  func() error
		class *errdefs.Class
	}{
		{"Create(a) again", func() error { _, err := l.Create("a", MiB); return err }, errdefs.ErrConflict},
		{"Create(../x)", func() error { _, err := l.Create("../x", MiB); return err }, errdefs.ErrInvalidArgument},
		{"Create(..)", func() error { _, err := l.Create("..", MiB); return err }, errdefs.ErrInvalidArgument},
		{"Create(.probe)", func() error { _, err := l.Create(".probe", MiB); return err }, errdefs.ErrInvalidArgument},
		{"Create(lost+found)", func() error { _, err := l.Create("lost+found", MiB); return err }, errdefs.ErrInvalidArgument},
		{"Create(empty)", func() error { _, err := l.Create("", MiB); return err }, errdefs.ErrInvalidArgument},
		{"Create(x, -1)", func() error { _, err := l.Create("x", -1); return err }, errdefs.ErrInvalidArgument},
		{"Remove(nope)", func() error { return l.Remove("nope") }, errdefs.ErrNotFound},
		{"Usage(nope)", func() error { _, err := l.Usage("nope"); return err }, errdefs.ErrNotFound},
	} {
		if err := tc.call(); !errors.Is(err, tc.class) {
			t.Errorf("%s = %v, want class %v", tc.name, err, tc.class)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := l.Remove(name); err != nil {
			t.Errorf("Remove(%s) = %v", name, err)
		}
	}
	if names, err := l.Names(); err != nil || len(names) != 0 {
		t.Errorf("Names() = %q, %v; want none", names, err)
	}
}

// TestMaxInodes checks the inode limit: a layer of at most 200 inodes takes
// about that many files.
func TestMaxInodes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			dir := dataDir(t)
			o := testOptions(m)
			o.MaxInodes = 200
			l := open(t, dir, o)
			p, err := l.Create("x", 64*MiB)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for ; n < 1000; n++ {
				if _, err = writeFile(filepath.Join(p, strconv.Itoa(n)), 0); err != nil {
					break
				}
			}
			if !isFull(err) || n < 190 || n > 220 {
				t.Errorf("created %d files in a layer of 200 inodes, then %v; want about 200, then EDQUOT or ENOSPC", n, err)
			}
		})
	}
}

// TestConcurrent runs layers' lives side by side, for the race detector.
func TestConcurrent(t *testing.T) {
	dir := dataDir(t)
	l := open(t, dir, Options{ImageBytes: 256 * MiB})
	errs := make(chan error, 8)
	for i := range cap(errs) {
		go func() {
			errs <- func() error {
				name := "c" + strconv.Itoa(i)
				for range 3 {
					p, err := l.Create(name, 2*MiB)
					if err != nil {
						return err
					}
					if n, err := writeFile(filepath.Join(p, "f"), 3*MiB); !isFull(err) {
						return fmt.Errorf("%s: %d bytes, %v", name, n, err)
					}
					if _, err := l.Usage(name); err != nil {
						return err
					}
					if err := l.Remove(name); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if names, err := l.Names(); err != nil || len(names) != 0 {
		t.Errorf("Names() = %q, %v; want none", names, err)
	}
}

// TestAuto checks that ModeAuto finds a working mode and that a mode it
// tried and gave up on left nothing behind.
func TestAuto(t *testing.T) {
	dir := dataDir(t)
	start := time.Now()
	l := open(t, dir, Options{ImageBytes: 256 * MiB})
	t.Logf("ModeAuto chose %v in %v (mounted a shared image: %v)", l.Mode(), time.Since(start), l.Mounted())
	if l.Mode() == ModeAuto {
		t.Fatal("Mode() = auto")
	}
	if _, err := os.Stat(filepath.Join(dir, "layers.img")); (err == nil) != (l.Mode() == ModeSharedImage) {
		t.Errorf("mode %v, layers.img: %v", l.Mode(), err)
	}
	if l.Mode() != ModeSharedImage {
		if loops := loopsUnder(dir); len(loops) > 0 {
			t.Errorf("loop devices left by the shared image that did not work: %q", loops)
		}
	}
	p, err := l.Create("x", 2*MiB)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := writeFile(filepath.Join(p, "f"), 3*MiB); !isFull(err) {
		t.Errorf("write 3 MiB into a 2 MiB layer: %d bytes, %v", n, err)
	}
	if err := l.Remove("x"); err != nil {
		t.Error(err)
	}
}

// TestReopen checks the lifecycle on disk: a second Open of a data directory
// that is in use reuses what is mounted and leaves it mounted on Close, Close
// of the first unmounts and frees every loop device, and a later Open finds
// the layers again (the images stay).
func TestReopen(t *testing.T) {
	for _, m := range []Mode{ModeSharedImage, ModeImagePerLayer} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			dir := dataDir(t)
			first, err := Open(dir, testOptions(m))
			if errors.Is(err, errUnusable) {
				t.Skipf("mode %v cannot work here: %v", m, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			if got, want := first.Mounted(), m == ModeSharedImage; got != want {
				t.Errorf("first Open: Mounted() = %v, want %v", got, want)
			}
			x, err := first.Create("x", 4*MiB)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := writeFile(filepath.Join(x, "f"), MiB); err != nil {
				t.Fatal(err)
			}
			mounts := mountsUnder(t, dir)
			if len(mounts) != 1 {
				t.Errorf("mounts under the data directory: %q, want one", mounts)
			}

			second, err := Open(dir, Options{Mode: ModeAuto})
			if err != nil {
				t.Fatal(err)
			}
			if second.Mode() != m || second.Mounted() {
				t.Errorf("second Open: mode %v, Mounted() %v; want %v, false (reused)", second.Mode(), second.Mounted(), m)
			}
			if got, err := second.Usage("x"); err != nil || got < MiB {
				t.Errorf("second Open: Usage(x) = %d, %v; want at least 1 MiB", got, err)
			}
			if err := second.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if got := mountsUnder(t, dir); !slices.Equal(got, mounts) {
				t.Errorf("after closing the second Layers: mounts %q, want %q", got, mounts)
			}

			// A busy filesystem is not unmounted, and Close can be retried.
			busy, err := os.Open(filepath.Join(x, "f"))
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Close(); !errors.Is(err, unix.EBUSY) {
				t.Errorf("Close with a file open in a layer = %v, want EBUSY", err)
			}
			busy.Close()
			if err := first.Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
			if m, l := leftovers(t, dir); len(m)+len(l) > 0 {
				t.Fatalf("after Close: mounts %q, loop devices %q", m, l)
			}
			img := filepath.Join(dir, "layers.img")
			if m == ModeImagePerLayer {
				img = filepath.Join(dir, "layer-images", "x.img")
			}
			if _, err := os.Stat(img); err != nil {
				t.Errorf("the image is gone after Close: %v", err)
			}

			third := open(t, dir, Options{Mode: ModeAuto})
			if third.Mode() != m {
				t.Errorf("third Open: mode %v, want %v", third.Mode(), m)
			}
			if got, err := third.Usage("x"); err != nil || got < MiB {
				t.Errorf("third Open: Usage(x) = %d, %v; want at least 1 MiB", got, err)
			}
			if n, err := writeFile(filepath.Join(x, "g"), 4*MiB); !isFull(err) || n < 3*MiB-slack || n > 3*MiB+slack {
				t.Errorf("after reopening: wrote %d bytes into a 4 MiB layer holding 1 MiB: %v", n, err)
			}
			if err := third.Remove("x"); err != nil {
				t.Error(err)
			}
		})
	}
}

const childEnv = "WARREN_QUOTA_TEST_CHILD"

// TestOverlay checks the limit where it matters: a sandbox's root overlay
// with its upper and work directories in a limited layer. The overlay is
// mounted in a child process in its own mount namespace (the test binary,
// re-executed with CLONE_NEWNS), as warren init does, with full
// capabilities: overlayfs writes to the upper directory with the mounter's
// credentials minus CAP_SYS_RESOURCE.
func TestOverlay(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			dir := dataDir(t)
			l := open(t, dir, testOptions(m))
			layer, err := l.Create("s", 4*MiB)
			if err != nil {
				t.Fatal(err)
			}
			lower := filepath.Join(dir, "lower")
			merged := filepath.Join(dir, "merged")
			for _, d := range []string{lower, merged, filepath.Join(layer, "upper"), filepath.Join(layer, "work")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// A lower file that a write copies up into the layer.
			if err := os.WriteFile(filepath.Join(lower, "seed"), make([]byte, MiB), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=overlay",
				"QUOTA_LOWER="+lower, "QUOTA_LAYER="+layer, "QUOTA_MERGED="+merged)
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("overlay child: %v\n%s", err, out)
			}
			var copied, written int64
			var werr string
			if _, err := fmt.Sscanf(string(out), "copied %d written %d err %q", &copied, &written, &werr); err != nil {
				t.Fatalf("overlay child said %q: %v", out, err)
			}
			t.Logf("through the overlay: copied up %d bytes, then wrote %d bytes: %s", copied, written, werr)
			if werr != unix.EDQUOT.Error() && werr != unix.ENOSPC.Error() {
				t.Errorf("writing 8 MiB through the overlay ended with %q, want EDQUOT or ENOSPC", werr)
			}
			if total := copied + written; total < 4*MiB-slack || total > 4*MiB+slack {
				t.Errorf("the overlay took %d bytes into a 4 MiB layer, want 4 MiB ± %d", total, slack)
			}
			if got, err := l.Usage("s"); err != nil || got < 4*MiB-slack || got > 4*MiB+slack {
				t.Errorf("Usage(s) = %d, %v; want about 4 MiB", got, err)
			}
			if err := l.Remove("s"); err != nil {
				t.Error(err)
			}
		})
	}
}

// overlayChild runs in a fresh mount namespace: it mounts the overlay like
// warren init does, appends to a lower file (a copy-up) and then writes until
// the layer is full, and reports on stdout.
func overlayChild() int {
	fail := func(step string, err error) int {
		fmt.Printf("%s: %v\n", step, err)
		return 1
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("make mounts private", err)
	}
	layer, merged := os.Getenv("QUOTA_LAYER"), os.Getenv("QUOTA_MERGED")
	opts := "lowerdir=" + os.Getenv("QUOTA_LOWER") + ",upperdir=" + layer + "/upper,workdir=" + layer + "/work,volatile"
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NODEV, opts); err != nil {
		return fail("mount overlay", err)
	}
	f, err := os.OpenFile(filepath.Join(merged, "seed"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fail("open seed", err)
	}
	if _, err := f.Write([]byte{1}); err != nil {
		return fail("append to seed", err)
	}
	f.Close()
	written, err := writeFile(filepath.Join(merged, "big"), 8*MiB)
	msg := "none"
	var errno unix.Errno
	if errors.As(err, &errno) {
		msg = errno.Error()
	} else if err != nil {
		msg = err.Error()
	}
	fmt.Printf("copied %d written %d err %q\n", MiB+1, written, msg)
	return 0
}

// TestImageCapacity checks that a per-layer image holds exactly its limit,
// over sizes where the ext4 layout changes (block groups, reserved space).
func TestImageCapacity(t *testing.T) {
	dir := dataDir(t)
	// Overcommit: the sizes are about the image's layout, not whether the
	// host can back them.
	l := open(t, dir, Options{Mode: ModeImagePerLayer, Overcommit: true})
	for i, size := range []int64{1 * MiB, 4*MiB + 3, 100 * MiB, 1 << 30, 10 << 30, 50 << 30} {
		name := "l" + strconv.Itoa(i)
		// The guard (guard.go) shrinks a layer the host's free space
		// cannot back; such a size says nothing about the fit here.
		var host unix.Statfs_t
		if err := unix.Statfs(dir, &host); err != nil {
			t.Fatal(err)
		}
		if free := int64(host.Bavail) * host.Bsize; size > free-int64(watermark(0, host.Blocks*uint64(host.Bsize))) {
			t.Logf("limit %d: skipped, the host has %d bytes free", size, free)
			continue
		}
		p, err := l.Create(name, size)
		if err != nil {
			t.Fatalf("Create(%d) = %v", size, err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			t.Fatal(err)
		}
		if got, want := int64(st.Bavail)*st.Bsize, (size+blockSize-1)/blockSize*blockSize; got != want {
			t.Errorf("layer of %d bytes: %d bytes available, want %d", size, got, want)
		}
		var img unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, "layer-images", name+".img"), &img); err != nil {
			t.Fatal(err)
		}
		t.Logf("limit %d: image %d bytes, %d on disk, %d inodes", size, img.Size, img.Blocks*512, st.Files)
		if err := l.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestImageBlocks(t *testing.T) {
	for _, tc := range []struct{ groups, want int64 }{
		{1, 1}, {2, 2}, {3, 2}, {4, 3}, {10, 6}, {26, 7}, {28, 8}, {50, 9},
	} {
		if got := backups(tc.groups); got != tc.want {
			t.Errorf("backups(%d) = %d, want %d", tc.groups, got, tc.want)
		}
	}
}

// BenchmarkCreateRemove measures a layer's life: Create with a 1 GiB limit,
// a 1 MiB file written into it, Remove; it reports the Create and the Remove
// alone as create-ms and remove-ms.
func BenchmarkCreateRemove(b *testing.B) {
	for _, m := range modes {
		b.Run(m.String(), func(b *testing.B) {
			dir := dataDir(b)
			l := open(b, dir, testOptions(m))
			var create, remove time.Duration
			for b.Loop() {
				t0 := time.Now()
				p, err := l.Create("x", 1<<30)
				if err != nil {
					b.Fatal(err)
				}
				create += time.Since(t0)
				if err := os.WriteFile(filepath.Join(p, "f"), make([]byte, MiB), 0o644); err != nil {
					b.Fatal(err)
				}
				t0 = time.Now()
				if err := l.Remove("x"); err != nil {
					b.Fatal(err)
				}
				remove += time.Since(t0)
			}
			b.ReportMetric(float64(create.Microseconds())/1000/float64(b.N), "create-ms")
			b.ReportMetric(float64(remove.Microseconds())/1000/float64(b.N), "remove-ms")
		})
	}
}

// BenchmarkOpen measures Open with the default 64 GiB shared image: the
// first time (create, format and mount), again (the image exists) and while
// it is mounted (adopted).
func BenchmarkOpen(b *testing.B) {
	requireLoop(b)
	for _, m := range []Mode{ModeAuto, ModeSharedImage, ModeImagePerLayer} {
		b.Run(m.String()+"/first", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dir := filepath.Join(dataDir(b), "d")
				b.StartTimer()
				l := openB(b, dir, m)
				b.StopTimer()
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		b.Run(m.String()+"/again", func(b *testing.B) {
			dir := dataDir(b)
			openB(b, dir, m).Close()
			for b.Loop() {
				if err := openB(b, dir, m).Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(m.String()+"/mounted", func(b *testing.B) {
			if m != ModeSharedImage {
				b.Skip("only the shared image is mounted by Open")
			}
			dir := dataDir(b)
			first := openB(b, dir, m)
			defer first.Close()
			for b.Loop() {
				if err := openB(b, dir, m).Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func openB(b *testing.B, dir string, m Mode) *Layers {
	l, err := Open(dir, Options{Mode: m})
	if errors.Is(err, errUnusable) {
		b.Skipf("mode %v cannot work here: %v", m, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// TestImageTemplates: mkfs runs once per layer size; later layers of that
// size are copies, independent of each other and of the template, and as
// big as their limit. Templates are bounded and an older version's go.
func TestImageTemplates(t *testing.T) {
	dir := dataDir(t)
	real, err := findMkfs("")
	if err != nil {
		t.Skip(err)
	}
	count := filepath.Join(t.TempDir(), "count")
	wrapper := filepath.Join(t.TempDir(), "mkfs")
	script := "#!/bin/sh\necho x >> " + count + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "x")
	}
	tdir := filepath.Join(dir, "layer-images", "templates")
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tdir, "v0-1-1.img")
	if err := os.WriteFile(stale, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := open(t, dir, Options{Mode: ModeImagePerLayer, Mkfs: wrapper})
	var paths []string
	for i := range 3 {
		p, err := l.Create("same"+strconv.Itoa(i), 8*MiB)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if got := runs(); got != 1 {
		t.Errorf("mkfs ran %d times for three layers of one size, want 1", got)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a template of an older version was kept: %v", err)
	}
	// Each copy is a filesystem of its own, with the whole limit.
	if n, err := writeFile(filepath.Join(paths[0], "f"), 6*MiB); err != nil {
		t.Fatalf("write to the first layer: %d, %v", n, err)
	}
	for _, p := range paths[1:] {
		if _, err := os.Stat(filepath.Join(p, "f")); !os.IsNotExist(err) {
			t.Errorf("%s sees another layer's file: %v", p, err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			t.Fatal(err)
		}
		if got := int64(st.Bavail) * st.Bsize; got != 8*MiB {
			t.Errorf("%s: %d bytes available, want %d", p, got, 8*MiB)
		}
	}
	if n, err := writeFile(filepath.Join(paths[1], "big"), 9*MiB); !isFull(err) || n > 8*MiB {
		t.Errorf("a copy's limit: wrote %d, %v; want a full filesystem by 8 MiB", n, err)
	}
	for i := range 3 {
		if err := l.Remove("same" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	// One template per size, at most maxTemplates of them.
	for i := range maxTemplates + 3 {
		name := "size" + strconv.Itoa(i)
		if _, err := l.Create(name, int64(i+1)*MiB); err != nil {
			t.Fatal(err)
		}
		if err := l.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(tdir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > maxTemplates {
		t.Errorf("%d templates kept, want at most %d", len(ents), maxTemplates)
	}
}

// TestCreateBurst: many layers made at once all get a loop device (every
// concurrent LOOP_CTL_GET_FREE names the same free device; losers retry).
func TestCreateBurst(t *testing.T) {
	dir := dataDir(t)
	l := open(t, dir, Options{Mode: ModeImagePerLayer})
	const n = 48
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := l.Create("b"+strconv.Itoa(i), 4*MiB)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		if err := l.Remove("b" + strconv.Itoa(i)); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			t.Error(err)
		}
	}
}
