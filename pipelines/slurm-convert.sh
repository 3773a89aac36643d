#!/bin/bash
# slurm-convert.sh - submit a conversion to Slurm: one job per layer, each
# depending on the one before (layer L is calibrated on the states that
# layer L-1's job leaves), then one job for the report and the model.  Every
# job runs the same make targets as a local conversion, so a failed or
# cancelled job is resumed by submitting again.  Each job holds OUT's lock
# (convert.mk) while it runs, so even layers that need no state from the
# layer before (dual-svid without data) run one after another: a job that
# found OUT locked would fail rather than wait.
#
#   pipelines/slurm-convert.sh [-j N] [-s 'SBATCH OPTIONS'] [-n] VAR=VALUE…
#
# VAR=VALUE are convert.mk's variables (MODEL, TOKENS or TEXT, OUT, BPW, …).
# -j N runs a layer's tensors N at a time inside its job, each on THREADS
# threads (convert.mk's THREADS, from VAR=VALUE or the environment, 1 when
# neither gives it), and asks Slurm for N × THREADS CPUs; -s passes more
# options to every sbatch; -n prints the sbatch commands instead of running
# them.  SBATCH names the sbatch program.
# The job ids go to standard output, one a line, the last the final job's.
set -eo pipefail

here=$(cd "$(dirname "$0")" && pwd)
jobs=1
extra=
dry=0
usage() {
	echo "usage: slurm-convert.sh [-j N] [-s 'SBATCH OPTIONS'] [-n] VAR=VALUE…" >&2
	exit 2
}
while getopts "j:s:nh" opt; do
	case $opt in
	j) [[ $OPTARG =~ ^[1-9][0-9]*$ ]] || usage; jobs=$OPTARG ;;
	s) extra=$OPTARG ;;
	n) dry=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || usage
out=
threads=${THREADS:-1}
for a in "$@"; do
	[[ $a == *=* ]] || { echo "slurm-convert: '$a' is not VAR=VALUE" >&2; exit 2; }
	case $a in
	OUT=*) out=${a#OUT=} ;;
	THREADS=*) threads=${a#THREADS=} ;;
	esac
done
[ -n "$out" ] || { echo "slurm-convert: OUT is required" >&2; exit 2; }
[[ $threads =~ ^[1-9][0-9]{0,2}$ ]] ||
	{ echo "slurm-convert: THREADS '$threads' is not a positive integer" >&2; exit 2; }
# a job's CPUs: its N encoders at THREADS each (the steps that run alone
# take THREADS × N too, convert.mk's STEP_THREADS)
cpus=$((jobs * threads))

# the layer rules, made here: they only list the model (and check the
# command line, the plan, OUT and its lock before anything is submitted)
make -s -f "$here/convert.mk" "$@" layers
layers=$(sed -n 's/^LAYERS :=//p' "$out/layers.mk")
[ -n "$layers" ] || { echo "slurm-convert: no layers in $out/layers.mk" >&2; exit 1; }

mk="make -f $(printf '%q' "$here/convert.mk")"
for a in "$@"; do
	mk="$mk $(printf '%q' "$a")"
done
sb=${SBATCH:-sbatch}

# submit NAME DEPENDENCY TARGET: prints the job id
submit() {
	local dep=()
	[ -n "$2" ] && dep=(--dependency="afterok:$2")
	if [ $dry = 1 ]; then
		echo "$sb --parsable --job-name=$1 --cpus-per-task=$cpus ${dep[*]} $extra --wrap=\"$mk -j $jobs $3\"" >&2
		echo "$1"
		return
	fi
	# shellcheck disable=SC2086 # extra is a list of options
	"$sb" --parsable --job-name="$1" --cpus-per-task="$cpus" "${dep[@]}" $extra \
		--wrap="$mk -j $jobs $3" | cut -d';' -f1
}

prev=
all=
for l in $layers; do
	id=$(submit "nvg-L$l" "$prev" "layer-$l")
	echo "$id"
	prev=$id
	all=${all:+$all:}$id
done
submit nvg-final "$all" all
