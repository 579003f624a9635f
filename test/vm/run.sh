#!/usr/bin/env bash
# Boot Debian 12's own kernel (the one linux-image-cloud-amd64 depends on)
# under qemu with software emulation, on a pure cgroup v2 hierarchy, and run
# warren's production-like checks inside it (test/vm/check.sh): doctor, a
# real daemon in a delegated cgroup, create, exec with state, memory, pids,
# CPU and disk limits, a snapshot, delete, kill -9 and re-adoption, leaks.
# Exits non-zero when a check fails, the guest does not finish, or the
# isolation posture `warren doctor` prints in the guest differs from this
# host's (beyond test/vm/posture.allowed).
#
# Needs root, qemu-system-x86, cpio, busybox-static, e2fsprogs, attr (for
# setfattr), and apt's package lists (apt-get update). Nothing is installed
# into the host's boot: the kernel package is only downloaded and unpacked.
#
# Environment:
#   WARREN_BIN        the static warren binary to test (default bin/warren;
#                     `make vm-test` builds it)
#   WARREN_VM_CACHE   where the kernel package is kept between runs
#                     (default /var/cache/warren-vm; delete it to drop it)
#   WARREN_VM_TIMEOUT seconds before qemu is killed (default 900)
#   WARREN_VM_KEEP    1: keep the work directory (initramfs, logs) for a look
#   WARREN_VM_TESTS   Go packages whose tests also run in the guest, built
#                     static on this host (default: internal/quota
#                     internal/cgroup internal/doctor internal/sandbox; ""
#                     for none); PKG:REGEXP runs only the tests REGEXP
#                     matches
#   WARREN_VM_SCRIPT  a script to run in the guest instead of check.sh (to
#                     look into one thing; the verdict then is its VMCHECK
#                     lines)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${WARREN_BIN:-$repo/bin/warren}
cache=${WARREN_VM_CACHE:-/var/cache/warren-vm}
timeout_s=${WARREN_VM_TIMEOUT:-900}
start=$(date +%s)

say() { printf '== %s (%ds)\n' "$*" $(($(date +%s) - start)); }
die() { echo "vm-test: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (the host's doctor run starts a real sandbox)"
for tool in qemu-system-x86_64 cpio gzip dpkg apt-get apt-cache setfattr mke2fs bash ldd /usr/bin/unshare; do
	command -v "$tool" >/dev/null || die "$tool is missing: apt-get install qemu-system-x86 cpio e2fsprogs attr"
done
busybox=/bin/busybox
[ -x "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 || die "$busybox is not a static busybox: apt-get install busybox-static"
[ -x "$bin" ] || die "$bin is missing: make build"
ldd "$bin" >/dev/null 2>&1 && die "$bin is not static: build it with make build"

work=$(mktemp -d /tmp/warren-vm.XXXXXX)
hostparent="warren-vmtest-$$"
qemu_pid=
cleanup() {
	local rc=$?
	# timeout(1) passes the signal on to qemu.
	[ -n "$qemu_pid" ] && kill -TERM "$qemu_pid" 2>/dev/null && wait "$qemu_pid" 2>/dev/null
	# The host's doctor removes its parent cgroup itself; make sure.
	for d in /sys/fs/cgroup/*/"$hostparent" /sys/fs/cgroup/"$hostparent"; do
		[ -d "$d" ] && rmdir "$d" 2>/dev/null
	done
	if [ "${WARREN_VM_KEEP:-}" = 1 ]; then
		echo "kept $work"
	else
		rm -rf "$work"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The kernel: the package linux-image-cloud-amd64 depends on, downloaded
# once into the cache and unpacked into the work directory.
say "kernel"
pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
[ -n "$pkg" ] || die "apt knows no linux-image-cloud-amd64: run apt-get update"
mkdir -p "$cache"
deb=$(ls "$cache/${pkg}"_*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
	# A newer kernel replaces the cached one.
	rm -f "$cache"/linux-image-*.deb
	(cd "$cache" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >/dev/null) || die "apt-get download $pkg failed"
	deb=$(ls "$cache/${pkg}"_*.deb | head -1)
fi
echo "$(basename "$deb")"
dpkg -x "$deb" "$work/kernel"
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-*)
moddir=$(ls -d "$work"/kernel/lib/modules/*/kernel)

# The host's posture, for the comparison with the guest's.
say "doctor on this host"
hostdata="$work/hostdata"
chmod 711 "$work"
WARREN_DATA_DIR=$hostdata WARREN_CGROUP_PARENT=$hostparent "$bin" doctor >"$work/doctor.host" 2>&1 ||
	{ cat "$work/doctor.host"; die "warren doctor fails on this host"; }
rm -rf "$hostdata"

# The initramfs: a merged-/usr layout like Debian's, busybox for the tools,
# bash and mke2fs with their libraries, the four modules, and warren.
say "initramfs"
root="$work/root"
mkdir -p "$root"/usr/{bin,sbin,lib,lib64,local/bin} "$root"/{etc,root,proc,sys,dev,tmp,run,newroot,mods}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
cp "$busybox" "$root/usr/bin/busybox"
for applet in $("$busybox" --list); do
	[ -e "$root/usr/bin/$applet" ] || ln -s busybox "$root/usr/bin/$applet"
done
# copy_with_libs copies a program and the libraries ldd names for it, at the
# paths ldd names (under usr/: /lib and /lib64 are symlinks into it here).
copy_with_libs() {
	local src=$1 dst=$2 lib rel
	cp -L "$src" "$root$dst"
	for lib in $(ldd "$src" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }'); do
		rel=${lib#/usr}
		mkdir -p "$root/usr$(dirname "$rel")"
		cp -L "$lib" "$root/usr$rel"
	done
}
rm -f "$root/usr/bin/bash"
copy_with_libs "$(command -v bash)" /usr/bin/bash
copy_with_libs "$(command -v mke2fs)" /usr/sbin/mke2fs
ln -sf mke2fs "$root/usr/sbin/mkfs.ext4"
copy_with_libs "$(command -v setfattr)" /usr/bin/setfattr
# procps's pgrep and pkill, which busybox-static lacks (internal/sandbox's
# tests use them inside sandboxes).
for p in pgrep pkill; do
	[ -x /usr/bin/$p ] && copy_with_libs /usr/bin/$p /usr/bin/$p
done
# util-linux's unshare: busybox's cannot make a cgroup namespace.
rm -f "$root/usr/bin/unshare"
copy_with_libs /usr/bin/unshare /usr/bin/unshare
[ -e /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$root/etc/"
cp "$bin" "$root/usr/bin/warren"
# The Go tests that run in the guest as well: what this host cannot show
# (project quotas, real cgroup v2, doctor on v2), as static test binaries.
mkdir -p "$root/tests"
# An entry PKG:REGEXP runs only the tests REGEXP matches (go test -run).
for p in ${WARREN_VM_TESTS-internal/quota internal/cgroup internal/doctor internal/sandbox}; do
	pkg=${p%%:*} name=$(basename "${p%%:*}")
	(cd "$repo" && CGO_ENABLED=0 go test -c -o "$root/tests/$name.test" "./$pkg") || die "go test -c ./$pkg failed"
	[ "$p" = "$pkg" ] || printf '%s\n' "${p#*:}" >"$root/tests/$name.run"
done
for m in fs/overlayfs/overlay.ko drivers/block/loop.ko fs/quota/quota_tree.ko fs/quota/quota_v2.ko; do
	cp "$moddir/$m" "$root/mods/"
done
printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
install -m 755 "$here/init" "$root/init"
install -m 755 "${WARREN_VM_SCRIPT:-$here/check.sh}" "$root/check.sh"
mknod -m 600 "$root/dev/console" c 5 1
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"
echo "initrd $(du -h "$work/initrd.gz" | cut -f1)"

# Software emulation: nested KVM hangs on this machine kind before the
# kernel prints anything. The guest powers itself off when check.sh ends.
say "boot $(basename "$vmlinuz") under qemu (tcg)"
console="$work/console.log"
timeout -k 10 "$timeout_s" qemu-system-x86_64 -accel tcg -m 3072 -smp 2 -nographic -no-reboot \
	-kernel "$vmlinuz" -initrd "$work/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet" </dev/null >"$work/console.raw" 2>&1 &
qemu_pid=$!
# The guest's output as it comes, without the kernel's line for every layer
# filesystem internal/quota shuts down.
tail -n +1 -f --pid=$qemu_pid "$work/console.raw" | tr -d '\r' | grep --line-buffered -v 'shut down requested' || true
wait "$qemu_pid" || true
qemu_pid=
tr -d '\r' <"$work/console.raw" >"$console"
say "guest ended"

# The verdict.
failed=0
grep -q '^VMCHECK DONE' "$console" || { echo "FAIL: the guest did not finish its checks (timeout ${timeout_s}s or a crash)"; failed=1; }
if grep -q '^VMCHECK FAIL' "$console"; then
	failed=1
fi

# The isolation posture: doctor's "effective isolation" lines from both,
# with namespace inode numbers (different in every sandbox) blanked.
posture() {
	sed -n '/effective isolation:/,/^[^ ]/p' "$1" | grep '^         ' |
		sed -E 's/:\[[0-9]+\]/:[N]/g; s/[[:space:]]+/ /g; s/^ //' |
		# Which uid block a sandbox gets depends on what else holds blocks
		# on the host (daemons, kept sessions); a block of the range is the
		# posture, its number is not. A uid below the range stays as it is.
		sed -E 's/ is uid 1[0-9]{9} on the host/ is uid <a block from 1000000000> on the host/'
}
sed -n '/^VMDOCTOR BEGIN/,/^VMDOCTOR END/p' "$console" | sed '1d;$d' >"$work/doctor.guest"
posture "$work/doctor.host" >"$work/posture.host"
posture "$work/doctor.guest" >"$work/posture.guest"
echo "== isolation posture, this host vs the guest"
# One difference is by design: on cgroup v2 with user namespaces the filter
# allows clone3 (the agent places the workload with CLONE_INTO_CGROUP; see
# sandbox.Seccomp and seccomp.Options.AllowClone3), which v1 refuses. So the
# guest allows exactly one syscall more and refuses one fewer; anything else
# in that line is a finding.
counts() { grep '^seccomp policy' "$1" | grep -o '[0-9]*' | tr '\n' ' '; }
read -r ha hc hr <<<"$(counts "$work/posture.host")" || true
read -r ga gc gr <<<"$(counts "$work/posture.guest")" || true
if [ -n "${ha:-}" ] && [ -n "${ga:-}" ] && [ "$ga" = $((ha + 1)) ] && [ "$gc" = "$hc" ] && [ "$gr" = $((hr - 1)) ] &&
	grep -q 'cgroups: v1' "$work/doctor.host" && grep -q 'cgroups: v2' "$work/doctor.guest"; then
	echo "seccomp: the guest allows clone3 (cgroup v2), this host refuses it (v1): $ha/$hc/$hr here, $ga/$gc/$gr there, as designed"
	sed -i '/^seccomp policy/d' "$work/posture.host" "$work/posture.guest"
fi
if [ ! -s "$work/posture.guest" ]; then
	echo "FAIL: no isolation posture from the guest's doctor"
	failed=1
elif ! diff -u --label host --label guest "$work/posture.host" "$work/posture.guest" >"$work/posture.diff"; then
	# A difference is a finding; posture.allowed names the explained ones
	# (one line per line of the diff that may differ, with its reason).
	unexplained=$(grep -E '^[-+][^-+]' "$work/posture.diff" | sed 's/^[-+]//' |
		grep -v -x -F -f <(grep -v '^#' "$here/posture.allowed" | sed 's/[[:space:]]*#.*//' | grep .) || true)
	cat "$work/posture.diff"
	if [ -n "$unexplained" ]; then
		echo "FAIL: the guest's isolation posture differs from this host's (not in test/vm/posture.allowed):"
		echo "$unexplained"
		failed=1
	else
		echo "(every difference is explained in test/vm/posture.allowed)"
	fi
else
	echo "same"
fi

echo "== summary"
printf 'pass %d, known failures %d, failures %d\n' \
	"$(grep -c '^VMCHECK PASS' "$console" || true)" "$(grep -c '^VMCHECK KNOWN' "$console" || true)" "$(grep -c '^VMCHECK FAIL' "$console" || true)"
grep -E '^VMCHECK (FAIL|KNOWN)' "$console" || true
say "vm-test $([ $failed = 0 ] && echo passed || echo FAILED)"
exit $failed
