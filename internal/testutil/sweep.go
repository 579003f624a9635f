package testutil

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TestCgroupPrefix starts the cgroup parent of every test that runs
// sandboxes: warren-test-<pid of the test process>-<n>.
const TestCgroupPrefix = "warren-test-"

// sweepStale removes what test processes that died without cleaning up (a
// timeout panic, a kill) left behind: their sandboxes outlive them, because
// sandboxes do not die with the process that started them. Only cgroup
// parents named by TestCgroupPrefix whose test process is gone are touched.
func sweepStale() {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, r := range roots {
		matches, _ := filepath.Glob(filepath.Join(r, TestCgroupPrefix+"*"))
		for _, m := range matches {
			rest := strings.TrimPrefix(filepath.Base(m), TestCgroupPrefix)
			pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
			if err != nil || processAlive(pid) {
				continue
			}
			dirs = append(dirs, m)
		}
	}
	if len(dirs) == 0 {
		return
	}
	var pids []int
	for _, d := range dirs {
		// The walk function never fails; unreadable parts are skipped.
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.Name() == "cgroup.procs" {
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if n, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, n) {
						pids = append(pids, n)
					}
				}
			}
			return nil
		})
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL) // gone already, or the removal below reports it
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for {
			var sub []string
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error { // never fails
				if err == nil && e.IsDir() {
					sub = append(sub, p)
				}
				return nil
			})
			slices.Reverse(sub)
			busy := false
			for _, s := range sub {
				if err := syscall.Rmdir(s); err != nil && err != syscall.ENOENT {
					busy = true
				}
			}
			if !busy || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
