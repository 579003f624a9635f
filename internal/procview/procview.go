// Package procview renders what a sandbox's /proc/meminfo, /proc/cpuinfo
// and /sys/devices/system/cpu/online say: the sandbox's own memory limit and
// CPUs rather than the host's, in the manner of LXCFS. Sandbox init writes
// the files and binds them read-only over the kernel's; the daemon keeps
// /proc/meminfo current from the workload's memory cgroup (see Memory).
//
// It is shared by init and the daemon and must stay small.
package procview

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Memory reads a workload's memory use from its memory cgroup directory,
// keeping the two files it reads open (a cgroup file read again at offset 0
// is generated anew).
type Memory struct {
	v2           bool
	usage, stats int
	buf          []byte
}

// OpenMemory opens the usage and statistics files of the memory cgroup
// directory dirfd (cgroup version 1 or 2).
func OpenMemory(dirfd, version int) (*Memory, error) {
	m := &Memory{v2: version == 2, buf: make([]byte, 8192)}
	usage, stats := "memory.usage_in_bytes", "memory.stat"
	if m.v2 {
		usage = "memory.current"
	}
	var err error
	if m.usage, err = unix.Openat(dirfd, usage, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open %s: %w", usage, err)
	}
	if m.stats, err = unix.Openat(dirfd, stats, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		unix.Close(m.usage)
		return nil, fmt.Errorf("open %s: %w", stats, err)
	}
	return m, nil
}

// Close closes the files.
func (m *Memory) Close() {
	unix.Close(m.usage)
	unix.Close(m.stats)
}

func (m *Memory) read(fd int) ([]byte, error) {
	n, err := unix.Pread(fd, m.buf, 0)
	if err != nil {
		return nil, err
	}
	if n == len(m.buf) {
		return nil, errors.New("cgroup file larger than expected")
	}
	return m.buf[:n], nil
}

// Meminfo renders /proc/meminfo for a workload limited to limit bytes from
// its current use.
func (m *Memory) Meminfo(limit uint64) ([]byte, error) {
	b, err := m.read(m.usage)
	if err != nil {
		return nil, err
	}
	usage, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("memory usage %q: %w", b, err)
	}
	b, err = m.read(m.stats)
	if err != nil {
		return nil, err
	}
	st := parseStat(b)
	// The two versions name the same counters differently.
	key := func(v1, v2 string) uint64 {
		if m.v2 {
			return st[v2]
		}
		return st[v1]
	}
	return Meminfo(limit, usage, MemStat{
		File:          key("cache", "file"),
		Anon:          key("rss", "anon"),
		Shmem:         key("shmem", "shmem"),
		Mapped:        key("mapped_file", "file_mapped"),
		Dirty:         key("dirty", "file_dirty"),
		Writeback:     key("writeback", "file_writeback"),
		ActiveAnon:    key("active_anon", "active_anon"),
		InactiveAnon:  key("inactive_anon", "inactive_anon"),
		ActiveFile:    key("active_file", "active_file"),
		InactiveFile:  key("inactive_file", "inactive_file"),
		Unevictable:   key("unevictable", "unevictable"),
		SlabReclaim:   st["slab_reclaimable"], // v2 only
		SlabUnreclaim: st["slab_unreclaimable"],
		KernelStack:   st["kernel_stack"],
		PageTables:    st["pagetables"],
	}), nil
}

func parseStat(b []byte) map[string]uint64 {
	st := make(map[string]uint64, 64)
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			st[string(k)] = n
		}
	}
	return st
}

// MemStat are the counters of a memory cgroup that /proc/meminfo shows, in
// bytes.
type MemStat struct {
	File, Anon, Shmem, Mapped, Dirty, Writeback uint64
	ActiveAnon, InactiveAnon                    uint64
	ActiveFile, InactiveFile, Unevictable       uint64
	SlabReclaim, SlabUnreclaim, KernelStack     uint64
	PageTables                                  uint64
}

// Meminfo renders /proc/meminfo for a cgroup limited to limit bytes that
// uses usage bytes. MemFree is what the limit leaves; MemAvailable adds the
// page cache and slab the kernel could reclaim, as LXCFS does. There is no
// swap: warren's sessions get none. Every value has the kernel's width (8
// digits of kB), so successive renderings of a session up to 95 GiB have
// the same length and a rewrite in place never leaves a stale tail.
func Meminfo(limit, usage uint64, s MemStat) []byte {
	free := limit - min(usage, limit)
	avail := min(limit, free+s.ActiveFile+s.InactiveFile+s.SlabReclaim)
	var b bytes.Buffer
	line := func(name string, bytes uint64) {
		fmt.Fprintf(&b, "%-16s%8d kB\n", name+":", bytes>>10)
	}
	line("MemTotal", limit)
	line("MemFree", free)
	line("MemAvailable", avail)
	line("Buffers", 0)
	line("Cached", s.File)
	line("SwapCached", 0)
	line("Active", s.ActiveAnon+s.ActiveFile)
	line("Inactive", s.InactiveAnon+s.InactiveFile)
	line("Active(anon)", s.ActiveAnon)
	line("Inactive(anon)", s.InactiveAnon)
	line("Active(file)", s.ActiveFile)
	line("Inactive(file)", s.InactiveFile)
	line("Unevictable", s.Unevictable)
	line("Mlocked", 0)
	line("SwapTotal", 0)
	line("SwapFree", 0)
	line("Dirty", s.Dirty)
	line("Writeback", s.Writeback)
	line("AnonPages", s.Anon)
	line("Mapped", s.Mapped)
	line("Shmem", s.Shmem)
	line("KReclaimable", s.SlabReclaim)
	line("Slab", s.SlabReclaim+s.SlabUnreclaim)
	line("SReclaimable", s.SlabReclaim)
	line("SUnreclaim", s.SlabUnreclaim)
	line("KernelStack", s.KernelStack)
	line("PageTables", s.PageTables)
	line("CommitLimit", limit)
	line("Committed_AS", usage)
	return b.Bytes()
}

// CPUInfo keeps, of the host's /proc/cpuinfo, the blocks of the CPUs in
// cpus (blocks are separated by blank lines and begin with "processor : N").
func CPUInfo(host []byte, cpus []int) []byte {
	var out bytes.Buffer
	for _, block := range bytes.SplitAfter(host, []byte("\n\n")) {
		first, _, _ := bytes.Cut(block, []byte{'\n'})
		k, v, ok := bytes.Cut(first, []byte{':'})
		if !ok || string(bytes.TrimSpace(k)) != "processor" {
			// Not a per-CPU block (some architectures add a global one).
			out.Write(block)
			continue
		}
		n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		if err == nil && slices.Contains(cpus, n) {
			out.Write(block)
		}
	}
	return out.Bytes()
}

// CPUList formats cpus as the kernel's lists do ("0-2,5\n"), the format of
// /sys/devices/system/cpu/online.
func CPUList(cpus []int) string {
	c := slices.Clone(cpus)
	slices.Sort(c)
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(c[i]))
		} else {
			parts = append(parts, strconv.Itoa(c[i])+"-"+strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",") + "\n"
}

// Rewrite replaces the content of the file fd with b in place: one pwrite
// from offset 0, then a truncation only if b is shorter than what was there.
// The file stays the inode a bind mount shows; a reader sees the old or the
// new content at every offset.
func Rewrite(fd int, b []byte) error {
	n, err := unix.Pwrite(fd, b, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return io.ErrShortWrite
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size > int64(len(b)) {
		return unix.Ftruncate(fd, int64(len(b)))
	}
	return nil
}

// Stat keeps, of the host's /proc/stat, the per-CPU lines of the CPUs in
// cpus and makes the "cpu" line their sum; every other line (interrupts,
// context switches, boot time, process counts) stays the host's. So tools
// that count /proc/stat's CPU lines (Node's os.cpus()) see the sandbox's
// CPUs, and top shows what those CPUs do (for every process on them, not
// only the sandbox's).
func Stat(host []byte, cpus []int) []byte {
	var out, rest bytes.Buffer
	var sum []uint64
	for len(host) > 0 {
		line := host
		if i := bytes.IndexByte(host, '\n'); i >= 0 {
			line, host = host[:i+1], host[i+1:]
		} else {
			host = nil
		}
		name, fields, _ := bytes.Cut(line, []byte{' '})
		switch {
		case string(name) == "cpu":
			// Replaced by the sum, written first.
		case bytes.HasPrefix(name, []byte("cpu")):
			n, err := strconv.Atoi(string(name[3:]))
			if err != nil || !slices.Contains(cpus, n) {
				continue
			}
			for i, f := range bytes.Fields(fields) {
				v, _ := strconv.ParseUint(string(f), 10, 64)
				if i == len(sum) {
					sum = append(sum, 0)
				}
				sum[i] += v
			}
			rest.Write(line)
		default:
			rest.Write(line)
		}
	}
	out.WriteString("cpu ")
	for _, v := range sum {
		out.WriteString(" " + strconv.FormatUint(v, 10))
	}
	out.WriteByte('\n')
	out.Write(rest.Bytes())
	return out.Bytes()
}
