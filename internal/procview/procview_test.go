package procview

import (
	"os"
	"strings"
	"testing"
)

func TestMeminfoFixedWidth(t *testing.T) {
	a := Meminfo(512<<20, 1<<20, MemStat{})
	b := Meminfo(512<<20, 300<<20, MemStat{File: 100 << 20, ActiveFile: 50 << 20, Shmem: 10 << 20})
	if len(a) != len(b) {
		t.Errorf("renderings differ in length: %d and %d bytes", len(a), len(b))
	}
	if !strings.HasPrefix(string(a), "MemTotal:         524288 kB\nMemFree:          523264 kB\nMemAvailable:     523264 kB\n") {
		t.Errorf("meminfo starts %q", a[:90])
	}
	// Available: free plus reclaimable page cache, never above the limit.
	if !strings.Contains(string(b), "MemAvailable:     268288 kB\n") {
		t.Errorf("MemAvailable with 300 MiB used and 50 MiB of active file pages:\n%s", b)
	}
	// Usage above the limit (the kernel lets it pass briefly) is no free
	// memory, not a wrapped huge number.
	if c := Meminfo(1<<20, 2<<20, MemStat{}); !strings.Contains(string(c), "MemFree:               0 kB\n") {
		t.Errorf("usage above the limit:\n%s", c)
	}
}

func TestParseStat(t *testing.T) {
	st := parseStat([]byte("anon 4096\nfile 8192\nbad\nshmem x\n"))
	if st["anon"] != 4096 || st["file"] != 8192 || len(st) != 2 {
		t.Errorf("parseStat = %v", st)
	}
}

func TestCPUList(t *testing.T) {
	for _, c := range []struct {
		cpus []int
		want string
	}{{[]int{0}, "0\n"}, {[]int{3, 1, 2}, "1-3\n"}, {[]int{0, 2, 3, 5}, "0,2-3,5\n"}} {
		if got := CPUList(c.cpus); got != c.want {
			t.Errorf("CPUList(%v) = %q, want %q", c.cpus, got, c.want)
		}
	}
}

func TestCPUInfo(t *testing.T) {
	host := "processor\t: 0\nmodel name\t: A\n\nprocessor\t: 1\nmodel name\t: B\n\nprocessor\t: 2\nmodel name\t: C\n\n"
	if got := string(CPUInfo([]byte(host), []int{1})); got != "processor\t: 1\nmodel name\t: B\n\n" {
		t.Errorf("CPUInfo for CPU 1 = %q", got)
	}
	if real, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if got := strings.Count(string(CPUInfo(real, []int{0})), "processor"); got != 1 {
			t.Errorf("this host's /proc/cpuinfo for CPU 0 has %d processor lines", got)
		}
	}
}

func TestRewrite(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, s := range []string{"a longer first content\n", "short\n", "same!!\n"} {
		if err := Rewrite(int(f.Fd()), []byte(s)); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(f.Name())
		if string(b) != s {
			t.Errorf("after Rewrite(%q) the file holds %q", s, b)
		}
	}
}

func TestStat(t *testing.T) {
	host := "cpu  10 20 30\ncpu0 1 2 3\ncpu1 4 5 6\ncpu2 5 13 21\nintr 99 1 2\nctxt 7\nbtime 5\n"
	want := "cpu  9 18 27\ncpu1 4 5 6\ncpu2 5 13 21\nintr 99 1 2\nctxt 7\nbtime 5\n"
	if got := string(Stat([]byte(host), []int{1, 2})); got != want {
		t.Errorf("Stat for CPUs 1-2 =\n%s\nwant\n%s", got, want)
	}
	if real, err := os.ReadFile("/proc/stat"); err == nil {
		got := string(Stat(real, []int{0}))
		if strings.Count(got, "\ncpu") != 1 || !strings.HasPrefix(got, "cpu  ") || !strings.Contains(got, "\nbtime ") {
			t.Errorf("this host's /proc/stat for CPU 0:\n%s", got)
		}
	}
}
