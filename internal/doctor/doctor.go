// Package doctor checks whether a host can run warren and says how to fix
// what is missing. Its checks do the real thing where they can (clone with
// the namespaces, create a cgroup, start a sandbox on the data directory's
// filesystem) rather than reading configuration.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentbin"
	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/seccomp"
)

// isolationProbe prints, from inside a fresh sandbox, what the sandbox
// actually got: namespaces, id map, privileges, seccomp, masked paths. The
// processes are counted by a glob in the probe's own shell: a pipeline's
// processes would come and go while /proc is read, so the count would vary
// from run to run and between shells.
const isolationProbe = `echo "ns $(for n in pid mnt uts ipc net cgroup user; do readlink /proc/self/ns/$n; done | tr '\n' ' ')"
echo "hostns $(cat /proc/1/cgroup >/dev/null 2>&1; echo)"
echo "uidmap $(tr -s ' ' </proc/self/uid_map)"
grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status
set -- /proc/[0-9]*; echo "procs $#"
echo "netdevs $(ls /sys/class/net | tr '\n' ' ')"
for p in /proc/kcore /proc/keys /proc/timer_list /sys/firmware; do if [ -d $p ]; then n=$(ls -A $p | wc -l); echo "mask $p entries=$n"; else echo "mask $p bytes=$(head -c 64 $p 2>/dev/null | wc -c)"; fi; done
echo "roproc $(touch /proc/sys/kernel/hostname 2>&1 | grep -q -i 'read-only\|permission' && echo yes || echo no)"
echo "nested-userns $(cat /proc/sys/user/max_user_namespaces)"`

// Check is one finding.
type Check struct {
	Name     string
	OK       bool
	Detail   string
	Fix      string // what to do when not OK
	Required bool   // the daemon cannot run without it
}

// Options say what to check.
type Options struct {
	DataDir      string
	CgroupParent string
}

// Run runs every check in order. Later checks that depend on a failed
// earlier one are skipped.
func Run(ctx context.Context, o Options) []Check {
	// The checks make warren's parent cgroup; remove it at the end unless
	// it was there before (a daemon's), so a doctor run leaves nothing.
	if h, err := cgroup.Detect(o.CgroupParent); err == nil {
		fresh := true
		for _, d := range h.Dirs() {
			if _, err := os.Stat(d); err == nil {
				fresh = false
			}
		}
		if fresh {
			defer h.Teardown()
		}
	}
	var out []Check
	add := func(c Check) bool { out = append(out, c); return c.OK }
	add(checkKernel())
	root := add(checkRoot())
	add(checkNamespaces(unix.CLONE_NEWNS|unix.CLONE_NEWPID|unix.CLONE_NEWUTS|unix.CLONE_NEWIPC|unix.CLONE_NEWNET|unix.CLONE_NEWCGROUP,
		"namespaces: mount, pid, uts, ipc, net, cgroup", true))
	add(checkUserNS(o.DataDir))
	add(checkFilesystem("overlay", "overlayfs", "load the module: modprobe overlay", true))
	add(checkSeccomp())
	cg, cgOK := checkCgroups(o.CgroupParent)
	add(cg)
	add(checkDataDir(o.DataDir))
	add(checkProgram())
	add(checkDynMods())
	if root {
		for _, c := range checkNetwork() {
			add(c)
		}
	}
	if root && cgOK {
		add(checkSandbox(ctx, o))
	}
	return out
}

// Failed reports whether a required check failed.
func Failed(cs []Check) bool {
	for _, c := range cs {
		if c.Required && !c.OK {
			return true
		}
	}
	return false
}

// Print writes the findings for people.
func Print(w io.Writer, cs []Check) {
	for _, c := range cs {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
			if !c.Required {
				mark = "warn"
			}
		}
		fmt.Fprintf(w, "[%s] %s: %s\n", mark, c.Name, c.Detail)
		if !c.OK && c.Fix != "" {
			fmt.Fprintf(w, "       fix: %s\n", c.Fix)
		}
	}
}

// The oldest kernel CI runs warren on (Debian 12's 6.1, booted by test/vm).
const minTestedMajor, minTestedMinor = 6, 1

// kernelVersion returns the running kernel's major and minor version.
func kernelVersion() (major, minor int) {
	var u unix.Utsname
	_ = unix.Uname(&u) // never fails; 0.0 if it did, which fails the check
	_, _ = fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major, minor
}

func checkKernel() Check {
	var u unix.Utsname
	_ = unix.Uname(&u) // never fails; an empty release fails the check
	rel := unix.ByteSliceToString(u.Release[:])
	c := Check{Name: "kernel", Required: true, Detail: rel}
	major, minor := kernelVersion()
	c.OK = major > 5 || (major == 5 && minor >= 10)
	if !c.OK {
		c.Fix = "warren needs Linux 5.10 or newer (pidfds, clone3 into cgroups, volatile overlays)"
	}
	if c.OK && (major < minTestedMajor || (major == minTestedMajor && minor < minTestedMinor)) {
		// Runs, but nothing in CI proves it: the checks below still try
		// every feature for real.
		c.Detail += fmt.Sprintf(" (older than %d.%d, the oldest kernel CI tests warren on: Debian 12's, in test/vm)", minTestedMajor, minTestedMinor)
	}
	return c
}

func checkRoot() Check {
	c := Check{Name: "privileges", Required: true}
	if os.Geteuid() != 0 {
		c.Detail = fmt.Sprintf("running as uid %d", os.Geteuid())
		c.Fix = "run the daemon as root (for example from the systemd unit)"
		return c
	}
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		c.Detail = fmt.Sprintf("read capabilities: %v", err)
		return c
	}
	c.OK = data[0].Effective&(1<<unix.CAP_SYS_ADMIN) != 0
	c.Detail = fmt.Sprintf("root, CapEff %08x%08x", data[1].Effective, data[0].Effective)
	if !c.OK {
		c.Fix = "the daemon needs CAP_SYS_ADMIN to create namespaces and mounts"
	}
	return c
}

// checkNamespaces clones /bin/true (or our own binary) with the flags.
func checkNamespaces(flags uintptr, name string, required bool) Check {
	c := Check{Name: name, Required: required}
	// A program that does nothing, started with the flags: /bin/true, or
	// this binary's hidden no-op when the host has no /bin/true.
	prog, args := "/bin/true", []string{}
	if _, err := os.Stat(prog); err != nil {
		prog, args = "/proc/self/exe", []string{"version"}
	}
	cmd := exec.Command(prog, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Run(); err != nil {
		c.Detail = err.Error()
		c.Fix = "the kernel or a security policy refuses new namespaces; check CONFIG_*_NS and any seccomp/AppArmor policy around the daemon"
		return c
	}
	c.OK, c.Detail = true, "created"
	return c
}

// checkUserNS checks what sandboxes' user namespaces need: a namespace with
// a mapped block of ids, and idmapped mounts on the filesystem of the images.
func checkUserNS(dataDir string) Check {
	c := Check{Name: "user namespaces", Required: true}
	probe := dataDir
	for {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		probe = filepath.Dir(probe)
	}
	if err := sandbox.ProbeUserNS(probe); err != nil {
		c.Detail = err.Error()
		c.Fix = "enable user namespaces (sysctl user.max_user_namespaces > 0) on Linux 5.12+ with the data dir on ext4, xfs or btrfs; or run the daemon with --allow-no-userns, which runs sandboxed code as an unprivileged host user instead of root in its own namespace"
		return c
	}
	c.OK, c.Detail = true, "sandboxes get their own namespace and id block; image layers can be idmapped"
	return c
}

func checkFilesystem(fs, name, fix string, required bool) Check {
	c := Check{Name: name, Required: required, Fix: fix}
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(strings.TrimPrefix(line, "nodev")) == fs {
			c.OK, c.Detail = true, "supported by the kernel"
			return c
		}
	}
	c.Detail = fs + " is not in /proc/filesystems"
	return c
}

func checkSeccomp() Check {
	c := Check{Name: "seccomp", Required: false}
	// PR_GET_SECCOMP answers 0 (not filtered) when the kernel has seccomp.
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		c.Detail = err.Error()
		c.Fix = "build the kernel with CONFIG_SECCOMP_FILTER"
		return c
	}
	c.OK, c.Detail = true, "filters supported"
	return c
}

// checkProgram says what sandboxes start from: the embedded small program
// (in a sealed memfd, or a file where the kernel forbids executable memfds)
// or, for a build without it, warren itself.
func checkProgram() Check {
	c := Check{Name: "sandbox program", Required: false}
	b, err := agentbin.Embedded()
	if err != nil {
		c.Detail = err.Error() + "; sandboxes run warren itself (about 15 ms slower to create, 3 MiB more each)"
		c.Fix = "build with make (make build embeds cmd/warren-agent)"
		return c
	}
	f, err := agentbin.Memfd()
	if err != nil {
		c.OK, c.Detail = true, fmt.Sprintf("embedded (%.1f MB); executable memfds are forbidden here (%v), so it is written to the data directory, which must not be noexec", float64(len(b))/1e6, err)
		return c
	}
	f.Close()
	c.OK, c.Detail = true, fmt.Sprintf("embedded (%.1f MB), run from a sealed memfd", float64(len(b))/1e6)
	return c
}

// checkDynMods reports the cgroup2 favordynmods option the daemon turns on
// at start (config cgroup_favor_dynmods).
func checkDynMods() Check {
	c := Check{Name: "cgroup favordynmods", Required: false}
	point, on, err := cgroup.FavorsDynMods()
	switch {
	case err != nil:
		c.Detail = err.Error()
	case on:
		c.OK, c.Detail = true, "on at "+point+": moving into a cgroup does not wait for an RCU grace period"
	default:
		c.OK = true
		c.Detail = "off at " + point + "; the daemon turns it on at start unless cgroup_favor_dynmods = false (else each sandbox start may wait 5 to 20 ms)"
	}
	return c
}

func checkCgroups(parent string) (Check, bool) {
	c := Check{Name: "cgroups", Required: true}
	h, err := cgroup.Detect(parent)
	if err != nil {
		c.Detail = err.Error()
		c.Fix = "mount cgroup v2 at /sys/fs/cgroup (or v1 with memory, pids and cpu)"
		return c, false
	}
	c.Detail = fmt.Sprintf("v%d, controllers %s; sessions under %s", h.Version(), strings.Join(h.Controllers(), ", "), strings.Join(h.Dirs(), ", "))
	base, leaf, stuck := h.Delegated()
	if base != "" {
		c.Detail += " (nested in the delegated cgroup " + base
		if leaf != "" {
			c.Detail += "; the daemon moves into " + filepath.Join(base, leaf) + ", as this check just did"
		}
		c.Detail += ")"
	}
	if stuck != "" {
		// Not a failure: sessions work there, only outside the unit.
		c.Detail += "; the daemon runs directly in the delegated cgroup " + stuck +
			", so sessions stay outside it: nested there, they would keep the next start of the unit out of it (cgroup v2 refuses processes in a cgroup that enables controllers for its children); " +
			"with systemd 254+ add DelegateSubgroup=daemon to the unit and they nest under it"
	}
	// Prove it: create and remove a session cgroup with limits.
	if err := h.Setup(); err != nil {
		c.Detail += "; cannot create the parent: " + err.Error()
		c.Fix = "on cgroup v2, run the daemon in a delegated subtree (systemd Delegate=yes)"
		return c, false
	}
	name := "doctor-" + strconv.Itoa(os.Getpid())
	s, err := h.NewSession(name, cgroup.Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	if err == nil {
		err = s.Activate()
		s.Destroy()
	}
	if err != nil {
		c.Detail += "; cannot create a limited cgroup: " + err.Error()
		c.Fix = "warren must be able to create cgroups with memory, pids and cpu limits under " + parent
		return c, false
	}
	c.OK = true
	return c, true
}

func checkDataDir(dir string) Check {
	c := Check{Name: "data dir", Required: true}
	if err := sandbox.CheckPath(dir); err != nil {
		c.Detail = err.Error()
		c.Fix = "choose a data dir without commas, colons or backslashes"
		return c
	}
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		probe = filepath.Dir(probe)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(probe, &st); err != nil {
		c.Detail = err.Error()
		return c
	}
	free := st.Bavail * uint64(st.Bsize)
	c.Detail = fmt.Sprintf("%s (%s, %.1f GiB free)", dir, fsName(st.Type), float64(free)/(1<<30))
	switch st.Type {
	case unix.OVERLAYFS_SUPER_MAGIC, unix.NFS_SUPER_MAGIC:
		c.Fix = "overlayfs cannot keep its writable layers on " + fsName(st.Type) + "; use a local ext4, xfs or btrfs"
		return c
	case unix.TMPFS_MAGIC:
		// Seen in test/vm: on 6.1 the base image's idmapped /usr fails.
		if major, minor := kernelVersion(); major < 6 || (major == 6 && minor < 3) {
			c.Fix = "tmpfs supports idmapped mounts from Linux 6.3, and sandboxes' user namespaces need them on the data dir; use ext4, xfs or btrfs"
			return c
		}
	}
	if free < 1<<30 {
		c.Fix = "less than 1 GiB is free"
		return c
	}
	c.OK = true
	return c
}

func fsName(t int64) string {
	switch t {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	}
	return fmt.Sprintf("fs 0x%x", t)
}

// checkSandbox starts a real sandbox on the data dir's filesystem (overlay,
// pivot_root, cgroup namespace, agent) and runs a command in it.
func checkSandbox(ctx context.Context, o Options) Check {
	c := Check{Name: "sandbox", Required: true}
	// As the daemon makes it: passable by sandboxes' unprivileged roots.
	if err := os.MkdirAll(o.DataDir, 0o711); err != nil {
		c.Detail = err.Error()
		return c
	}
	if err := os.Chmod(o.DataDir, 0o711); err != nil {
		c.Detail = err.Error()
		return c
	}
	tmp, err := os.MkdirTemp(o.DataDir, "doctor-")
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer os.RemoveAll(tmp)
	// As a data dir: a sandbox's root passes through it to its own layers.
	if err := os.Chmod(tmp, 0o711); err != nil {
		c.Detail = err.Error()
		return c
	}
	images, err := image.Open(filepath.Join(tmp, "images"))
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	base, err := images.EnsureBase()
	if err != nil {
		c.Detail = "build the base image: " + err.Error()
		return c
	}
	// A parent of its own beside the daemon's: a running daemon holds its
	// parent (and would take a sandbox there for a leftover).
	h, err := cgroup.Detect(o.CgroupParent + "-doctor")
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer h.Teardown()
	opts := sandbox.Options{UserNS: sandbox.ProbeUserNS(filepath.Join(tmp, "images")) == nil}
	var pol *seccomp.Policy
	if opts.Seccomp, pol, err = sandbox.Seccomp(opts.UserNS, h.Version()); err != nil {
		c.Detail = "compile the seccomp filter: " + err.Error()
		return c
	}
	// The program sandboxes start from, as the daemon chooses it.
	if opts.ProgramFile, err = agentbin.Memfd(); err != nil {
		if opts.Program, err = agentbin.Install(filepath.Join(tmp, "bin")); err != nil {
			opts.Program = ""
		}
	}
	rt, err := sandbox.NewRuntime(filepath.Join(tmp, "sessions"), h, opts)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer func() { _ = rt.Close() }() // the check's result is decided; the runtime holds nothing of its own
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	cfg := &sandbox.Config{Name: "doctor", Hostname: "doctor", Lower: []string{base.RootFS}, BaseDir: "/workspace", Env: base.Env,
		Limits: cgroup.Limits{MemoryBytes: 128 << 20, Pids: 32, CPUs: 1}}
	for _, d := range base.HostDirs {
		cfg.Overlays = append(cfg.Overlays, sandbox.Overlay{Source: d, Target: d})
	}
	sb, err := rt.Start(ctx, cfg)
	if err != nil {
		c.Detail = err.Error()
		c.Fix = "see the error: pivot_root needs the data dir on a normal local filesystem, not on a shared or rootfs mount"
		return c
	}
	took := time.Since(start)
	defer sb.Destroy(context.Background())
	res, err := sb.Exec(ctx, &agentproto.ExecRequest{Command: isolationProbe, Timeout: 10 * time.Second, MaxOutput: 1 << 16}, nil, nil)
	if err != nil {
		c.Detail = "started, but a command failed: " + err.Error()
		return c
	}
	if res.ExitCode != 0 {
		c.Detail = fmt.Sprintf("a command answered %d: %q %q", res.ExitCode, res.Stdout, res.Stderr)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("started in %v and ran a command; effective isolation:\n%s", took.Round(time.Millisecond), describeIsolation(res.Stdout, pol, cfg.Limits))
	if err := sb.Destroy(context.Background()); err != nil {
		c.OK, c.Detail = false, "teardown: "+err.Error()
	}
	return c
}

var _ = errors.New

// describeIsolation turns the probe's output into the report doctor prints.
func describeIsolation(out []byte, pol *seccomp.Policy, l cgroup.Limits) string {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "         %-16s %s\n", k, v) }
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		k, v := f[0], strings.Join(f[1:], " ")
		switch {
		case k == "ns":
			line("namespaces", v)
		case k == "uidmap":
			f := strings.Fields(v)
			if len(f) == 3 && f[1] != "0" {
				line("user namespace", fmt.Sprintf("uid 0 inside is uid %s on the host (%s ids)", f[1], f[2]))
			} else {
				line("user namespace", "none ("+v+")")
			}
		case strings.HasPrefix(k, "Cap") || k == "NoNewPrivs:" || k == "Seccomp:" || k == "Seccomp_filters:":
			line(strings.TrimSuffix(k, ":"), v)
		case k == "procs":
			line("processes seen", v)
		case k == "netdevs":
			line("network", v)
		case k == "mask":
			line("masked", v)
		case k == "roproc":
			line("/proc/sys ro", v)
		case k == "nested-userns":
			line("nested userns", "max_user_namespaces="+v)
		}
	}
	if pol != nil {
		st := pol.Stats()
		line("seccomp policy", fmt.Sprintf("%d syscalls allowed, %d allowed for some arguments, %d refused explicitly, everything else EPERM", st.Allowed, st.Conditional, st.Refused))
	}
	line("limits", fmt.Sprintf("memory %d MiB, pids %d, cpus %g", l.MemoryBytes>>20, l.Pids, l.CPUs))
	return strings.TrimRight(b.String(), "\n")
}

// checkNetwork checks what sessions with a network (mode open or
// allowlist) need; the daemon runs without it, and such sessions are then
// refused with a reason. The probe builds warren's table and a veth pair
// in a namespace of its own, which vanishes after.
func checkNetwork() []Check {
	veth := Check{Name: "network: veth"}
	nft := Check{Name: "network: nf_tables"}
	vethErr, nftErr := network.Probe()
	if vethErr != nil {
		veth.Detail = vethErr.Error()
		veth.Fix = "load the module: modprobe veth (sessions with a network need a veth pair each)"
	} else {
		veth.OK, veth.Detail = true, "veth pairs can be made"
	}
	if nftErr != nil {
		nft.Detail = nftErr.Error()
		nft.Fix = "load nf_tables and its NAT, reject, log and connlimit parts: modprobe -a nf_tables nft_chain_nat nft_redir nft_masq nft_reject_inet nft_log nft_connlimit nfnetlink_log (a kernel with CONFIG_NF_TABLES_INET)"
	} else {
		nft.OK, nft.Detail = true, "warren's table (inet warren) can be built: NAT, redirect, masquerade, reject, log, sets, connlimit"
	}
	fwd := Check{Name: "network: IPv4 forwarding"}
	switch on, err := network.Forwarding(); {
	case err != nil:
		fwd.Detail = err.Error()
	case on:
		fwd.OK, fwd.Detail = true, "net.ipv4.ip_forward is 1"
	default:
		fwd.Detail = "net.ipv4.ip_forward is 0: the daemon turns it on (and logs it) when the first session with a network starts"
		fwd.Fix = "to choose it yourself: sysctl -w net.ipv4.ip_forward=1, and net.ipv4.ip_forward = 1 in /etc/sysctl.d/90-warren.conf to keep it"
	}
	out := []Check{veth, nft, fwd}
	if drops, err := network.ForeignForwardDrops(); err == nil && nftErr == nil {
		fw := Check{Name: "network: other firewalls"}
		if len(drops) == 0 {
			fw.OK, fw.Detail = true, "no other table drops forwarded packets by default"
		} else {
			fw.Detail = "forward chains with policy drop: " + strings.Join(drops, "; ") + " (a packet must pass every table: sessions' egress is dropped there)"
			fw.Fix = `accept the sessions' links in that firewall, such as: nft insert rule <family> <table> <chain> iifname "wrn*" accept; nft insert rule <family> <table> <chain> oifname "wrn*" ct state established,related accept`
		}
		out = append(out, fw)
	}
	return out
}
