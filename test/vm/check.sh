#!/bin/bash
# Stage 2 of the guest, PID 1 on the ext4 root: the checks. Each prints one
# line "VMCHECK PASS|FAIL|KNOWN name: detail"; test/vm/run.sh reads them.
# KNOWN marks a failure whose cause is known and outside this stage's reach,
# with the reason. The guest powers off at the end, whatever happened.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
chmod 711 /var/lib /var/lib/warren

CG=/sys/fs/cgroup
# The "service manager" of this guest: like systemd with Delegate=yes, it
# makes the unit's cgroup, enables the controllers down to it, marks it
# delegated (trusted.delegate, as systemd 251+ does) and starts the daemon
# inside it, or with DelegateSubgroup=daemon (systemd 254+) in its leaf
# "daemon". What is below the unit's cgroup is the daemon's.
SVC=$CG/system.slice/warren.service
PARENT=$SVC/warren
LOG=/tmp/serve.log

pass() { echo "VMCHECK PASS $1${2:+: $2}"; }
fail() { echo "VMCHECK FAIL $1: $2"; }
known() { echo "VMCHECK KNOWN $1: $2"; }
# w runs a warren CLI command with a time limit, output to stdout.
w() { timeout 120 warren "$@" 2>&1; }
section() { echo; echo "---- $*"; }

# start_daemon CGROUP: the service manager starts the daemon in CGROUP
# (writes its PID into cgroup.procs, then execs). Fails when the kernel
# refuses the placement or the daemon does not answer /healthz in 120 s.
start_daemon() {
	# Disk limits are backed by free space (disk.overcommit off): the 3 GiB
	# root holds the checks' sessions at 256 MiB each, not at the default 1 GiB.
	bash -c 'echo $$ > "$1/cgroup.procs" || exit 97; exec warren serve --log-format text --default-disk-mb 256' _ "$1" >>"$LOG" 2>&1 &
	daemon=$!
	for _ in $(seq 240); do
		wget -q -O /dev/null http://127.0.0.1:7433/healthz 2>/dev/null && return 0
		kill -0 "$daemon" 2>/dev/null || { wait "$daemon"; return $?; }
		sleep 0.5
	done
	return 1
}

# workload_with FILE VALUE: the session cgroup directory S whose workload
# has FILE = VALUE (each session here has distinct limits).
workload_with() {
	local f
	for f in "$PARENT"/*/workload/"$1"; do
		[ "$(cat "$f" 2>/dev/null)" = "$2" ] && { dirname "$(dirname "$f")"; return 0; }
	done
	return 1
}

# now_ms: milliseconds since boot (busybox date has no %N).
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# rmdir_wait DIR: a cgroup whose last process just exited is busy for a
# moment.
rmdir_wait() {
	local _
	for _ in $(seq 50); do rmdir "$1" 2>/dev/null && return 0; sleep 0.1; done
	rmdir "$1"
}

key() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }

section "guest"
echo "kernel $(uname -r); cgroup2 controllers: $(cat $CG/cgroup.controllers)"
if grep -q ' cgroup ' /proc/mounts || ! grep -q " $CG cgroup2 " /proc/mounts; then
	fail pure-cgroup-v2 "$(grep cgroup /proc/mounts)"
else
	pass pure-cgroup-v2 "$(uname -r)"
fi

section "warren doctor (in the root cgroup, as a run by hand)"
timeout 180 warren doctor >/tmp/doctor.out 2>&1
rc=$?
echo "VMDOCTOR BEGIN"
cat /tmp/doctor.out
echo "VMDOCTOR END"
if [ $rc = 0 ] && grep -q 'this host can run warren' /tmp/doctor.out; then pass doctor; else fail doctor "exit $rc"; fi
# Doctor makes warren's parent cgroup for its checks and must remove it.
if [ -e $CG/warren ]; then fail doctor-leaves-nothing "$CG/warren is left"; else pass doctor-leaves-nothing; fi

section "doctor directly in a delegated cgroup (Delegate=yes without DelegateSubgroup=)"
# Nesting there would keep the unit's next start out of its own cgroup, so
# the parent stays at the root and doctor says why.
# The controllers, enabled from the root down to the units, as systemd does.
mkdir -p $CG/system.slice
echo "+cpu +memory +pids +io" >$CG/cgroup.subtree_control
echo "+cpu +memory +pids +io" >$CG/system.slice/cgroup.subtree_control
PLAIN=$CG/system.slice/plain.service
mkdir -p $PLAIN
setfattr -n trusted.delegate -v 1 $PLAIN
bash -c 'echo $$ > "$1/cgroup.procs" && exec timeout 180 warren doctor' _ $PLAIN >/tmp/doctor.plain 2>&1
rc=$?
grep 'cgroups:' /tmp/doctor.plain
if [ $rc = 0 ] && grep -q "sessions under $CG/warren;.*DelegateSubgroup=daemon" /tmp/doctor.plain && [ ! -e $CG/warren ] && rmdir_wait $PLAIN; then
	pass delegated-unit-without-subgroup "sessions stay at the root, doctor names DelegateSubgroup=daemon, nothing left"
else
	fail delegated-unit-without-subgroup "exit $rc; $CG/warren $([ -e $CG/warren ] && echo left || echo gone); $(tail -3 /tmp/doctor.plain)"
fi

section "doctor at the root of a container's cgroup namespace"
# The namespace's root is a non-root cgroup holding the container's
# processes: doctor (as the daemon) moves into a leaf and nests beside it.
CTR=$CG/container
mkdir -p $CTR
bash -c 'echo $$ > "$1/cgroup.procs" && exec unshare -C -m bash -c "umount /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec timeout 180 warren doctor --data-dir /var/lib/warren-ctr"' _ $CTR >/tmp/doctor.ctr 2>&1
rc=$?
grep 'cgroups:' /tmp/doctor.ctr
rm -rf /var/lib/warren-ctr
if [ $rc = 0 ] && grep -q "sessions under $CG/warren (nested in the delegated cgroup /; the daemon moves into /daemon" /tmp/doctor.ctr &&
	[ -d $CTR/daemon ] && [ ! -e $CTR/warren ] && rmdir_wait $CTR/daemon && rmdir_wait $CTR; then
	pass container-namespace-root "doctor moved into the namespace's /daemon and nested its parent there"
else
	fail container-namespace-root "exit $rc: $(ls -d $CTR/*/ 2>&1 | tr "\n" " "); $(tail -5 /tmp/doctor.ctr)"
fi

section "daemon in a delegated unit, started in its daemon leaf (systemd 254+: Delegate=yes, DelegateSubgroup=daemon)"
mkdir -p $SVC/daemon
setfattr -n trusted.delegate -v 1 $SVC
if start_daemon $SVC/daemon; then pass serve; else
	fail serve "the daemon did not start: $(tail -5 $LOG)"
	echo "VMCHECK DONE"; poweroff -f
fi
own=$(cat /proc/$daemon/cgroup)
if [ "$own" = "0::/system.slice/warren.service/daemon" ] && [ -d $PARENT ] && [ ! -e $CG/warren ]; then
	pass delegation-placement "daemon in ${own#0::}, sessions' parent $PARENT"
else
	fail delegation-placement "daemon in ${own#0::}; parent dirs: $(ls -d $PARENT $CG/warren 2>&1 | tr '\n' ' ')"
fi

section "create and exec with state"
w session create --id s1
out=$(w exec s1 -- 'cd /tmp; export A=1; cat /proc/self/cgroup')
echo "$out"
out2=$(w exec s1 -- 'echo "$PWD A=$A"')
echo "$out2"
if [ "$out2" = "/tmp A=1" ] && [ "$out" = "0::/workload" ]; then pass exec-state; else fail exec-state "got '$out' then '$out2'"; fi
n=$(ls -d $PARENT/*/ 2>/dev/null | wc -l)
if [ "$n" = 1 ]; then pass session-cgroup-under-delegation "$(ls -d $PARENT/*/)"; else fail session-cgroup-under-delegation "$n session cgroups under $PARENT"; fi

section "memory limit"
w session create --id m --memory 64
out=$(w exec m -- 'x=$(head -c 314572800 /dev/zero | tr "\0" a); echo survived ${#x}')
echo "$out"
s=$(workload_with memory.max $((64 << 20)) || true)
kills=$([ -n "$s" ] && key "$s/workload/memory.events" oom_kill)
if [ -n "$s" ] && [ "${kills:-0}" -gt 0 ] && grep -q "OOM killer" <<<"$out" && ! grep -q survived <<<"$out"; then
	pass memory-oom "memory.max $(cat "$s/workload/memory.max"), oom_kill $kills, reported to the client"
else
	fail memory-oom "cgroup '${s}', oom_kill '${kills}', output: $out"
fi
out=$(w session get m)
grep -q -i oom <<<"$out" && echo "session get: $(grep -i oom <<<"$out" | tr -s ' ' | head -2 | tr '\n' ' ')"

section "pids limit"
w session create --id p --pids 16
out=$(w exec p -- 'sh -c "for i in \$(seq 40); do sleep 2 & done; wait" 2>&1 | sort | uniq -c | head -3; echo done')
echo "$out"
s=$(workload_with pids.max 16 || true)
hits=$([ -n "$s" ] && key "$s/workload/pids.events" max)
if [ -n "$s" ] && [ "${hits:-0}" -gt 0 ]; then
	pass pids-limit "pids.max 16, pids.events max $hits"
else
	fail pids-limit "cgroup '${s}', pids.events max '${hits}'"
fi

section "CPU limit"
w session create --id c --cpus 0.5
s=$(workload_with cpu.max "50000 100000" || true)
if [ -z "$s" ]; then
	fail cpu-limit "no workload with cpu.max 50000 100000: $(cat $PARENT/*/workload/cpu.max | tr '\n' ' ')"
else
	u0=$(key "$s/workload/cpu.stat" usage_usec)
	t0=$(now_ms)
	w exec c -- 'timeout 4 sh -c "while :; do :; done"; echo spun'
	t1=$(now_ms)
	u1=$(key "$s/workload/cpu.stat" usage_usec)
	thr=$(key "$s/workload/cpu.stat" nr_throttled)
	used=$(((u1 - u0) / 1000)) wall=$((t1 - t0))
	# At most half a core over the command's wall time (plus a period's
	# slack), and the kernel throttled it.
	if [ "$thr" -gt 0 ] && [ "$used" -le $((wall / 2 + 100)) ] && [ "$used" -ge 500 ]; then
		pass cpu-limit "cpu.max 50000 100000: ${used} ms of CPU in ${wall} ms, throttled $thr times"
	else
		fail cpu-limit "${used} ms of CPU in ${wall} ms, throttled ${thr} times"
	fi
fi

section "disk limit"
w session create --id d --disk 64
# dd, not busybox head: head reports any failed write as "I/O error".
out=$(w exec d -- 'mkdir -p /var/tmp; dd if=/dev/zero of=/var/tmp/big bs=1M count=100 2>&1 | head -1; ls -l /var/tmp/big; df -k / | tail -1; rm -f /var/tmp/big')
echo "$out"
size=$(awk '$NF == "/var/tmp/big" { print $5 }' <<<"$out")
mode=$(grep ' /var/lib/warren/layers ' /proc/mounts | grep -o prjquota || echo "per-layer images")
if grep -q -E 'Disk quota exceeded|No space left' <<<"$out" && [ -n "$size" ] && [ "$size" -le $((64 << 20)) ]; then
	pass disk-limit "a 100 MiB write into a 64 MiB layer stopped at $size bytes ($mode)"
else
	fail disk-limit "size '$size' ($mode): $out"
fi

section "snapshot (freezer on v2)"
w exec s1 -- 'echo snapdata > /root/snapfile'
out=$(w snapshot create s1 snap1)
echo "$out"
w session create --id s2 --snapshot snap1
got=$(w exec s2 -- 'cat /root/snapfile')
frozen=$(cat $PARENT/*/cgroup.freeze | sort -u | tr '\n' ' ')
after=$(w exec s1 -- 'echo "$PWD A=$A"')
if [ "$got" = snapdata ] && [ "$frozen" = "0 " ] && [ "$after" = "/tmp A=1" ]; then
	pass snapshot "the copy has the file; every session thawed (cgroup.freeze $frozen); s1 runs on"
else
	fail snapshot "copy read '$got', cgroup.freeze values '$frozen', s1 then said '$after'"
fi

section "daemon kill -9 and re-adoption"
kill -9 $daemon
wait $daemon 2>/dev/null
# Why the leaf: the unit's cgroup now enables controllers for the sessions'
# parent, and cgroup v2 refuses it any process, such as a new main process
# that a service manager without DelegateSubgroup= would start there.
if bash -c 'echo $$ > "$1/cgroup.procs"' _ $SVC 2>/dev/null; then
	fail unit-cgroup-refuses-processes "the kernel accepted a process in $SVC"
else
	pass unit-cgroup-refuses-processes "EBUSY: a restart in the unit's own cgroup could not adopt; the daemon leaf can"
fi
if start_daemon $SVC/daemon; then pass restart; else fail restart "$(tail -5 $LOG)"; fi
out=$(w exec s1 -- 'echo "$PWD A=$A"')
if [ "$out" = "/tmp A=1" ]; then pass re-adoption "s1 kept its cwd and variables"; else fail re-adoption "s1 said: $out"; fi
grep -E 'adopt|lost' $LOG | tail -3
if [ "$(cat /proc/$daemon/cgroup)" = "0::/system.slice/warren.service/daemon" ]; then pass restart-placement; else fail restart-placement "$(cat /proc/$daemon/cgroup)"; fi

section "delete and leaks"
w session rm s1 s2 m p c d
sleep 1
left=""
for _ in $(seq 60); do
	left=$(ls -d $PARENT/*/ 2>/dev/null; grep -E '/var/lib/warren/(sessions|layers)/' /proc/mounts | grep -v ' ext4 ' || true)
	[ -z "$left" ] && break
	sleep 0.5
done
if [ -z "$left" ]; then pass delete-leaves-nothing; else fail delete-leaves-nothing "$left"; fi
ls=$(w session ls)
echo "$ls"
kill -TERM $daemon
wait $daemon
rc=$?
[ $rc = 0 ] && pass daemon-stops || fail daemon-stops "exit $rc: $(tail -3 $LOG)"
# The shared layer image stays mounted when this daemon adopted it from the
# one killed above (internal/quota: Close leaves an adopted image mounted).
grep ' /var/lib/warren/layers ' /proc/mounts
mounts=$(grep -E 'overlay|/var/lib/warren/(sessions|layers)/' /proc/mounts || true)
loops=$(losetup -a 2>/dev/null | grep -v -E 'root.img|layers.img' || true)
procs=$(cat $SVC/daemon/cgroup.procs $PARENT/cgroup.procs 2>/dev/null)
if [ -z "$mounts$loops$procs" ] && [ -z "$(ls -d $PARENT/*/ 2>/dev/null)" ]; then
	pass stop-leaves-nothing "no mounts, loop devices, processes or session cgroups"
else
	fail stop-leaves-nothing "mounts [$mounts] loops [$loops] processes [$procs] cgroups [$(ls -d $PARENT/*/ 2>/dev/null)]"
fi
section "Go tests in the guest"
# Static test binaries of the packages run.sh names. Their temporary
# directories are on an ext4 with the project and quota features mounted
# with prjquota (a tmpfs would refuse idmapped mounts on 6.1), so
# internal/quota's project-quota mode runs too: this host's kernel cannot.
mkdir -p /var/tmp/gotest
truncate -s 2G /var/tmp/gotest.img
mke2fs -q -F -t ext4 -O quota,project /var/tmp/gotest.img
mount -o loop,prjquota /var/tmp/gotest.img /var/tmp/gotest && chmod 711 /var/tmp/gotest
for t in /tests/*.test; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .test)
	t0=$(now_ms)
	# In a directory of its own, as go test runs a package's tests (some
	# check that the directory they run in is hidden from sandboxes).
	mkdir -p /var/tmp/gotest/cwd-$name
	(cd /var/tmp/gotest/cwd-$name && TMPDIR=/var/tmp/gotest timeout 600 "$t" -test.count=1 -test.timeout 590s -test.v \
		-test.run "$(cat /tests/$name.run 2>/dev/null || echo .)" >/tmp/$name.out 2>&1)
	rc=$?
	# Skips with their reasons (the line after).
	grep -A1 -E -- '^\s*--- SKIP' /tmp/$name.out | grep -v -- '^--$' | head -40
	secs=$((($(now_ms) - t0) / 1000))
	n=$(grep -c -E -- '^\s*--- PASS' /tmp/$name.out)
	skips=$(grep -c -E -- '^\s*--- SKIP' /tmp/$name.out)
	if [ $rc = 0 ]; then pass "gotest-$name" "$n passed, $skips skipped in ${secs}s"; else
		fail "gotest-$name" "exit $rc after ${secs}s: $(grep -E -- '--- FAIL' /tmp/$name.out | head -5 | tr '\n' ' ')"
		# Each failed test's own lines, and the end of the output.
		awk '/^=== (RUN|CONT)/ { buf = "" } { buf = buf $0 "\n" } /^\s*--- FAIL/ { printf "%s", buf; buf = "" }' /tmp/$name.out | grep -v 'shut down requested' | tail -80
		tail -5 /tmp/$name.out
	fi
done
# The tests clean up after themselves: nothing may stay mounted or open on
# their filesystem.
sleep 1
if umount /var/tmp/gotest 2>/tmp/umount.err; then pass gotest-leaves-nothing; else
	fail gotest-leaves-nothing "$(cat /tmp/umount.err); mounts: $(grep -c /var/tmp/gotest/ /proc/mounts); $(grep /var/tmp/gotest/ /proc/mounts | head -3 | cut -d' ' -f1-3 | tr '\n' ' '); open: $(ls -l /proc/[0-9]*/cwd /proc/[0-9]*/fd/* 2>/dev/null | grep /var/tmp/gotest | head -3 | tr '\n' ' ')"
fi

echo; echo "---- serve log (warnings and errors)"
grep -E 'level=(WARN|ERROR)' $LOG | tail -20
echo "VMCHECK DONE"
poweroff -f
