#!/bin/bash
# Runs in the guest that scripts/vm-cgroup2 boots, as PID 1 and root, on the
# host's own files (read-only) with a pure cgroup v2 hierarchy. Each step
# writes results/<step>.log and results/<step>.rc into the host's work
# directory (/run/vm here); the host reads them once the guest has powered
# off. results/done says the script got to the end.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp LANG=C.UTF-8
vm=/run/vm
res=$vm/results
bin=$vm/bin
kiln=$bin/kiln
mkdir -p "$res"
landlock=on
# shellcheck source=/dev/null
. "$vm/env"
# Kernel messages (OOM kills are expected) go to results/dmesg.log instead.
echo 1 >/proc/sys/kernel/printk

poweroff() {
	sync
	echo o >/proc/sysrq-trigger
	sleep 60
}
trap poweroff EXIT

# step NAME FUNCTION: runs FUNCTION with its output in results/NAME.log and
# its status in results/NAME.rc.
step() {
	local name=$1 fn=$2 t0=${EPOCHREALTIME/./} rc
	echo "== $name"
	"$fn" >"$res/$name.log" 2>&1 </dev/null
	rc=$?
	echo "$rc" >"$res/$name.rc"
	local ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
	printf '== %s: %s (%d.%03ds)\n' "$name" "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED, exit $rc")" \
		$((ms / 1000)) $((ms % 1000))
}

# The cgroup setup: cgroup2 only, with kiln's controllers, and this script
# (so every test) moved out of the root group into a leaf, as systemd does.
setup() {
	echo "kernel: $(uname -r)"
	echo "cgroup mounts:"
	grep -E ' - cgroup2? ' /proc/self/mountinfo
	if grep -qE ' - cgroup ' /proc/self/mountinfo; then
		echo "a cgroup v1 hierarchy is mounted; this guest must be pure cgroup v2"
		return 1
	fi
	local have
	have=$(cat /sys/fs/cgroup/cgroup.controllers)
	echo "root cgroup.controllers: $have"
	echo "root cgroup.subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
	for c in memory pids cpu; do
		if [[ " $have " != *" $c "* ]]; then
			echo "controller $c is not available"
			return 1
		fi
	done
	mkdir /sys/fs/cgroup/init.scope && echo 0 >/sys/fs/cgroup/init.scope/cgroup.procs || return 1
	echo "this script runs in: $(cat /proc/self/cgroup)"
}

# gotest NAME: runs bin/NAME.test verbosely from a copy of its package
# directory's test data, as go test would. Extra arguments go to the binary.
gotest() {
	local name=$1
	shift
	cd "$vm/pkg/$name" && "$bin/$name.test" -test.v -test.count=1 -test.timeout=150s "$@"
}

# Everything but the one test that runs only on v1 hosts (it checks cgroup2
# without controllers next to v1, and skips on a v2 host by design).
cgroups_tests() { gotest cgroups -test.skip '^TestKernelV2WithoutControllers$'; }
native_tests() { gotest native; }

kiln_run() {
	local out rc
	out=$(timeout 60 "$kiln" run --lang python -c 'print(1)' 2>"$TMPDIR/err")
	rc=$?
	echo "exit $rc; stdout: $out"
	echo "stderr:"
	cat "$TMPDIR/err"
	if [ "$rc" -ne 0 ] || [ "$out" != 1 ]; then
		echo "want exit 0 and stdout 1"
		return 1
	fi
}

kiln_memory() {
	local rc
	timeout 60 "$kiln" run --memory 64M --lang python \
		-c 'b = bytearray(300 << 20); print("allocated", len(b) >> 20, "MiB and was not killed")' \
		>"$TMPDIR/out" 2>"$TMPDIR/err"
	rc=$?
	echo "exit $rc"
	echo "stdout:"
	cat "$TMPDIR/out"
	echo "stderr:"
	cat "$TMPDIR/err"
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || ! grep -q 'memory limit' "$TMPDIR/err" || grep -q allocated "$TMPDIR/out"; then
		echo 'want a failed run and "memory limit" on stderr'
		return 1
	fi
}

kiln_pids() {
	local rc
	timeout 60 "$kiln" run --pids 16 --lang python -c '
import os, time
n = 0
try:
    for _ in range(64):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("fork failed after", n, "children:", e)
' >"$TMPDIR/out" 2>"$TMPDIR/err"
	rc=$?
	echo "exit $rc"
	echo "stdout:"
	cat "$TMPDIR/out"
	echo "stderr:"
	cat "$TMPDIR/err"
	if [ "$rc" -eq 124 ] || ! grep -q 'fork failed' "$TMPDIR/out" || ! grep -q 'process limit' "$TMPDIR/err"; then
		echo 'want a failed fork and "process limit" on stderr'
		return 1
	fi
}

kiln_doctor() {
	local rc
	timeout 60 "$kiln" doctor >"$TMPDIR/out" 2>&1
	rc=$?
	cat "$TMPDIR/out"
	echo "exit $rc"
	[ "$rc" -eq 0 ] || { echo "want exit 0"; return 1; }
	grep -qE '^ +ok +cgroups: cgroup v2 ' "$TMPDIR/out" || { echo 'want "ok  cgroups: cgroup v2"'; return 1; }
	if [ "$landlock" = on ]; then
		grep -qE '^ +(ok|partial) +Landlock ABI [0-9]+' "$TMPDIR/out" || { echo "want Landlock (the guest kernel has it)"; return 1; }
	else
		grep -qE '^ +absent +Landlock' "$TMPDIR/out" || { echo "want Landlock absent (booted without it)"; return 1; }
	fi
}

# Nothing kiln or the tests made may be left in the hierarchy.
leftovers() {
	local left
	left=$(find /sys/fs/cgroup -mindepth 1 -type d ! -path /sys/fs/cgroup/init.scope)
	echo "groups left: ${left:-none}"
	echo "root cgroup.subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
	# kiln's shared root group (kiln/) may stay, empty; nothing below it.
	if grep -v '^/sys/fs/cgroup/kiln$' <<<"$left" | grep -q .; then
		echo "groups were left behind"
		return 1
	fi
}

echo "== guest up: $(uname -r), $(nproc) CPUs, $(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024)) MiB"
step setup setup
if [ "$(cat "$res/setup.rc")" -eq 0 ]; then
	step cgroups cgroups_tests
	step native native_tests
	step kiln-run kiln_run
	step kiln-memory kiln_memory
	step kiln-pids kiln_pids
	step kiln-doctor kiln_doctor
	step leftovers leftovers
fi
dmesg >"$res/dmesg.log" 2>&1
echo ok >"$res/done"
