#!/bin/bash
# slurm-convert.sh on a real Slurm: munged, slurmctld and slurmd started
# here, in this test's directory, as a one-node cluster; the conversion it
# submits ends with the bytes of a local one; a layer's job cancelled while
# it runs leaves the model unmade, and submitting again ends with the same
# bytes.  The daemons are stopped by their pids, on failure too.  Skipped,
# with the reason, only where the daemons cannot start (not root, Slurm or
# munge not installed: make deps installs them).
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

for c in munged slurmctld slurmd sbatch squeue scancel scontrol sinfo; do
	command -v $c >/dev/null ||
		test_skip_all "no $c: the Slurm daemons cannot start (make deps installs slurm-wlm and munge)"
done
[ "$(id -u)" = 0 ] || test_skip_all "not root: slurmd and munged run as root here"

# every wait is bounded: wait_for SECONDS CMD…: CMD true within SECONDS
wait_for() {
	local n=$(($1 * 10))
	shift
	while ! "$@"; do
		n=$((n - 1))
		[ $n -gt 0 ] || return 1
		sleep 0.1
	done
}

# ---- the cluster: its files in sl/, two free ports, the daemons' pids ----
SL=$PWD/sl
mkdir -p "$SL/state" "$SL/spool" && chmod 755 "$SL"
dd if=/dev/urandom of="$SL/munge.key" bs=1024 count=1 2>/dev/null && chmod 400 "$SL/munge.key"
set -- $("$NVG_PY" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
cat >"$SL/slurm.conf" <<EOF
ClusterName=nvgtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
AuthType=auth/munge
AuthInfo=socket=$SL/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd.pid
SlurmctldLogFile=$SL/slurmctld.log
SlurmdLogFile=$SL/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=3600
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=nvgnode NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=2 State=UNKNOWN
PartitionName=nvg Nodes=nvgnode Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$SL/slurm.conf

pids=
stop_daemons() {
	if [ -n "$pids" ] && kill -0 $pids 2>/dev/null; then
		scancel --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null
		wait_for 20 test -z "$(squeue -h 2>/dev/null)"
	fi
	for p in $pids; do
		kill $p 2>/dev/null
	done
	for p in $pids; do
		wait_for 10 eval "! kill -0 $p 2>/dev/null" || kill -KILL $p 2>/dev/null
	done
	pids=
}
trap stop_daemons EXIT
trap 'exit 143' HUP INT TERM

munged -F -f --key-file="$SL/munge.key" --socket="$SL/munge.sock" --pid-file="$SL/munged.pid" \
	--log-file="$SL/munged.log" --seed-file="$SL/munged.seed" >"$SL/munged.out" 2>&1 &
pids="$pids $!"
slurmctld -D -c -f "$SL/slurm.conf" >"$SL/slurmctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -N nvgnode -f "$SL/slurm.conf" >"$SL/slurmd.out" 2>&1 &
pids="$pids $!"

node_idle() {
	sinfo -h -N -o %T >"$SL/sinfo" 2>/dev/null && test "$(cat "$SL/sinfo")" = idle
}
if ! wait_for 60 node_idle; then
	tail -n 3 "$SL"/*.log "$SL"/*.out 2>/dev/null | sed 's/^/# /'
	stop_daemons
	test_skip_all "the one-node Slurm cluster did not come up within 60 s (logs above)"
fi

# state ID: the job's state as slurmctld says
state() {
	scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# jobs_end IDS…: every job has left the queue (at most 300 s)
jobs_end() {
	wait_for 300 eval 'test -z "$(squeue -h -j '"$(echo "$@" | tr ' ' ,)"' -t PD,R,CG 2>/dev/null)"'
}

test_expect_success 'setup: stories260K (two layers), calibration tokens, the local conversion' '
	convert_setup &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=local BPW=2.5 -j2 2>err
'

CONV="$PLAIN FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 MODEL=s2.cmf TOKENS=cal.u32 BPW=2.5"

test_expect_success 'a conversion submitted to Slurm gives the local bytes' '
	bash "$NVG_TOP/pipelines/slurm-convert.sh" $CONV OUT=c >ids &&
	test "$(wc -l <ids)" -eq 3 &&
	jobs_end $(cat ids) &&
	for id in $(cat ids); do
		test "$(state $id)" = COMPLETED || { cat slurm-$id.out; return 1; }
	done &&
	cmp local/model.cmf c/model.cmf &&
	test_cmp local/model.cmf.blr.txt c/model.cmf.blr.txt &&
	test_no_tmp_files c
'

# the wrappers hold layer 1's first encoder (at most 60 s) until "go"
test_expect_success 'setup: tool wrappers that hold layer 1 running' '
	tool_wrappers hb <<-\EOF
	#!/bin/bash
	d=$(dirname "$0")
	if [ "${0##*/}" = nvg-encode ] && [[ " $* " == *"/L1/"* ]] && [ ! -e "$d/go" ]; then
		touch "$d/held"
		for i in $(seq 600); do [ -e "$d/go" ] && break; sleep 0.1; done
	fi
	exec "$(cat "$d/.real")/${0##*/}" "$@"
	EOF
'

test_expect_success 'a layer job cancelled while it runs: no model; submitted again: the same bytes' '
	bash "$NVG_TOP/pipelines/slurm-convert.sh" $CONV OUT=k BIN="$PWD/hb" >ids &&
	set -- $(cat ids) &&
	wait_for 300 test -e hb/held &&
	test "$(state $2)" = RUNNING &&
	scancel $2 &&
	wait_for 60 eval "test \"\$(state $2)\" = CANCELLED" &&
	scancel $3 && jobs_end "$@" &&
	test "$(state $1)" = COMPLETED &&
	test_path_is_missing k/model.cmf &&
	touch hb/go &&
	bash "$NVG_TOP/pipelines/slurm-convert.sh" $CONV OUT=k >ids2 &&
	jobs_end $(cat ids2) &&
	for id in $(cat ids2); do
		test "$(state $id)" = COMPLETED || { cat slurm-$id.out; return 1; }
	done &&
	cmp local/model.cmf k/model.cmf &&
	test_no_tmp_files k
'

test_expect_success 'the daemons stop by their pids' '
	started=$pids &&
	stop_daemons &&
	for p in $started; do
		! kill -0 $p 2>/dev/null || return 1
	done
'

test_done
