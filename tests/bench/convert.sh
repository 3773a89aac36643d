#!/bin/bash
# convert.sh - make bench-convert: the whole conversion measured (not a test).
#
# For each budget of BENCH_BPW (0.55 0.8 1.0): nvg with the steps of
# BENCH_STEPS (all: transport and block reconstruction; plain: neither;
# transport; tune: block reconstruction alone, convert.mk's default; any of
# them, in that order;
# ahead: both, the block loss measured after the next block, TUNE_AHEAD=1;
# each with the end-to-end step after the calibration, as convert.mk's
# default is) and
# dual-svid, each with the final-norm calibration when CALIBRATE is not 0
# (its default): the conversion's time per stage (capture, contexts, encode,
# tune: blr-tune --layer, which also advances a tuned layer's states,
# advance: gram-capture --next-state, the source stream's too, calib:
# blr-tune --final-norm, e2e: blr-tune --end-to-end; the summed wall time of each tool's runs, from
# /usr/bin/time), its total time, the CPU seconds of the tools its steps
# run (user and system; make's and the scripts' own are not counted) and
# what share of the slots' time they filled (busy: CPU over total × JOBS ×
# THREADS, THREADS from the environment as convert.mk reads it: where it is
# well under 1 the cores waited on a step that ran alone or on a layer's
# last encode), the peak RSS of any one step, then
# perplexity, KL divergence and top-1 agreement against the source on
# held-out TinyStories text, of the model before the calibration (row
# LABEL), after it (row LABEL+cal) and after the end-to-end step (row
# LABEL+cal+e2e, its time the whole conversion's).  Then, per budget,
# convert.mk's best on the nvg conversion of BENCH_PLAN_STEPS (one variant
# of BENCH_STEPS' names; tune, convert.mk's defaults, unless set), made
# first if missing: the sweep's curves (every tensor
# encoded at each budget of BENCH_SWEEP on the conversion's Grams; its own
# budget reused, not encoded again; SWEEP_ERROR from the environment), a
# plan from plan-alloc at the same budget, converted with every step and
# measured the same way, and which of the two the judge keeps.
#
# Each conversion is measured uninterrupted and its measurements are kept
# in BENCH_OUT/<name>-<bpw>.{times,total,eval,eval-applied} with its
# settings (and its plan's checksum) in .key: a rerun with the same settings
# prints the kept rows and converts only what has none (a conversion cut
# short is started again from nothing, so that its times are whole).
#
# Environment: BENCH_MODEL (smollm2 | stories260K), BENCH_BPW, BENCH_STEPS,
# BENCH_SWEEP (auto: b/1.5, b and 1.5 b for budget b: convert.mk's bracket,
# so that the sweep adds no budget of its own), JOBS, FIT_TOKENS
# (8192), SEL_TOKENS (2048), WINDOW (512), EVAL_TOKENS (8192), BENCH_OUT
# (build/bench-convert), BENCH_PLAN (1: also the plans), BENCH_PLAN_STEPS
# (tune), BENCH_DUAL (1: also
# dual-svid), BENCH_E2E (1: the nvg conversions end with the end-to-end step;
# 0: they stop after the calibration, which saves the step's 20-40 minutes
# on SmolLM2), CALIBRATE.
set -eo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${NVG_BIN:-$top/bin}
data=${NVG_DATA:-$top/../shared/data}
out=${BENCH_OUT:-$top/build/bench-convert}
model=${BENCH_MODEL:-smollm2}
budgets=${BENCH_BPW:-0.55 0.8 1.0}
steps=${BENCH_STEPS:-all}

# the nvg variants of BENCH_STEPS: name, label, convert.mk variables
variant() {
	case $1 in
	all) echo "nvg nvg+tr+tune $all" ;;
	plain) echo "nvg-plain nvg TRANSPORT=0 TUNE=0 $e2e_on" ;;
	transport) echo "nvg-transport nvg+tr TRANSPORT=1 TUNE=0 $e2e_on" ;;
	tune) echo "nvg-tune nvg+tune TRANSPORT=0 TUNE=1 $e2e_on" ;;
	ahead) echo "nvg-ahead nvg+tr+tune-ahead TRANSPORT=1 TUNE=1 TUNE_AHEAD=1 $e2e_on" ;;
	*) echo "bench-convert: BENCH_STEPS: unknown '$1' (all plain transport tune ahead)" >&2; return 1 ;;
	esac
}

for v in $steps ${BENCH_PLAN_STEPS:-tune}; do variant "$v" >/dev/null; done
sweep=${BENCH_SWEEP:-auto}
jobs=${JOBS:-$(nproc)}
fit=${FIT_TOKENS:-8192}
sel=${SEL_TOKENS:-2048}
window=${WINDOW:-512}
eval_tokens=${EVAL_TOKENS:-8192}
mkdir -p "$out"

# the source model and calibration tokens, as the demo makes them (its
# conversions are skipped: BPW is set to a budget it never converts)
DEMO_OUT=$out/demo DEMO_MODEL=$model bash "$top/pipelines/demo.sh" --prepare-only >/dev/null 2>"$out/prepare.log" ||
	true
src=$(sed -n 's/^demo: source \(.*\)$/\1/p' "$out/prepare.log")
calib=$(sed -n 's/^demo: calibration \(.*\)$/\1/p' "$out/prepare.log")
e2e=$(sed -n 's/^demo: e2e tokens \(.*\)$/\1/p' "$out/prepare.log")
[ -r "$src" ] && [ -r "$calib" ] && [ -r "$e2e" ] || { cat "$out/prepare.log" >&2; exit 1; }
# convert.mk's defaults for nvg, spelled out: every step that follows the source
case ${BENCH_E2E:-1} in
1) e2e_on="E2E=1 E2E_TOKENS=$e2e" ;;
0) e2e_on="E2E=0" ;;
*) echo "bench-convert: BENCH_E2E: '${BENCH_E2E}' is not 0 or 1" >&2; exit 1 ;;
esac
all="TRANSPORT=1 TUNE=1 $e2e_on"

# every tool run through /usr/bin/time: wall seconds and peak RSS per call,
# and its start (epoch seconds, the same command after it) in .times.start,
# so that a conversion's timeline can be drawn: which steps waited on which
wrap=$out/wrap
mkdir -p "$wrap"
for t in "$bin"/*; do
	printf '#!/bin/sh\necho "$(date +%%s.%%N) %s $*" >>"$BENCH_TIMES.start"\nexec /usr/bin/time -a -o "$BENCH_TIMES" -f "%%e %%M %%U %%S %s $*" "%s" "$@"\n' \
		"${t##*/}" "${t##*/}" "$t" >"$wrap/${t##*/}"
	chmod +x "$wrap/${t##*/}"
done

echo "OpenBLAS core: $(OPENBLAS_VERBOSE=2 "$bin/cmf-patch" info "$src" 2>&1 >/dev/null | sed -n 's/.*Core: *//p' | head -n 1)"
echo "model $src, $jobs jobs, FIT $fit SEL $sel window $window, eval $eval_tokens tokens"
printf '%-22s %5s %8s %8s %8s %7s %8s %7s %7s %8s %8s %5s %8s %9s %10s %8s %7s\n' method bpw \
	capture contexts encode tune advance calib e2e total cpu busy rss_MiB body_bpw perplexity KL \
	top1

# row LABEL BPW M EVAL DROP [DIR]: one table row from the kept measurements
# M.times and M.total of the conversion in DIR (default M) (DROP: the last
# steps not yet run in the model measured, "calib e2e" or "e2e"; their time
# is not counted)
row() {
	awk -v m="$1" -v b="$2" -v drop="$5" -v slots="$((jobs * ${THREADS:-1}))" '
	FILENAME ~ /times$/ {
		s = "other"
		if ($5 == "gram-capture") s = ($0 ~ /--next-state/) ? "advance" : "capture"
		else if ($5 == "hctx-build") s = "contexts"
		else if ($5 == "nvg-encode") s = "encode"
		else if ($5 == "blr-tune")
			s = ($0 ~ /--final-norm/) ? "calib" : ($0 ~ /--end-to-end/) ? "e2e" : "tune"
		t[s] += $1; c[s] += $3 + $4; if ($2 > rss) rss = $2; next
	}
	FILENAME ~ /total$/ { total = $1; next }
	FILENAME ~ /eval/ { v[$1] = $2; next }
	/^# total blr body/ { body = $5 }
	END {
		n = split(drop, d, " ")
		for (i = 1; i <= n; i++) { total -= t[d[i]]; t[d[i]] = 0; c[d[i]] = 0 }
		for (s in c) cpu += c[s]
		printf "%-22s %5s %8.1f %8.1f %8.1f %7.1f %8.1f %7.1f %7.1f %8.1f %8.1f %5.2f %8.1f %9.4f %10.3f %8.4f %7.4f\n",
			m, b, t["capture"], t["contexts"], t["encode"], t["tune"], t["advance"], t["calib"],
			t["e2e"], total, cpu, (total > 0 ? cpu / (total * slots) : 0), rss / 1024, body,
			v["ppl"], v["kl"], v["top1"]
	}' "$3.times" "$3.total" "$4" "${6:-$3}/model.cmf.blr.txt"
}

# convert DIR LABEL METHOD BPW PLAN [VAR=VALUE...]: the conversion (convert.mk
# with the given variables), its stage times, its evaluation; with the
# final-norm calibration on, a second row for the model before it
convert() {
	local dir=$1 label=$2 m=$3 b=$4 plan=$5 t0 key
	shift 5
	key="$m $b fit=$fit sel=$sel window=$window eval=$eval_tokens jobs=$jobs threads=${THREADS:-1} times=cpu $src $calib plan=${plan:+$(cksum <"$plan")}"
	key="$key calibrate=${CALIBRATE-d} $*"
	if ! [ -f "$dir/model.cmf" ] || ! [ -s "$dir.eval" ] || ! [ -s "$dir.total" ] ||
		[ "$(cat "$dir.key" 2>/dev/null)" != "$key" ]; then
		rm -rf "$dir" "$dir.total" "$dir.key" "$dir.eval" "$dir.eval-applied" "$dir.eval-calibrated"
		export BENCH_TIMES=$dir.times
		rm -f "$BENCH_TIMES" "$BENCH_TIMES.start"
		t0=$(date +%s.%N)
		make -s -f "$top/pipelines/convert.mk" MODEL="$src" TOKENS="$calib" OUT="$dir" BPW="$b" \
			METHOD="$m" ${plan:+PLAN="$plan"} FIT_TOKENS="$fit" SEL_TOKENS="$sel" WINDOW="$window" \
			BIN="$wrap" "$@" -j "$jobs" 2>"$dir.log"
		awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }' >"$dir.total"
		measure "$dir" "$dir"
		echo "$key" >"$dir.key"
	fi
	rows "$label" "$b" "$dir" "$dir"
}

# measure DIR M: the models of the conversion in DIR evaluated into M.eval
# (model.cmf), M.eval-applied (before the calibration) and
# M.eval-calibrated (before the end-to-end step), each where it is a model
# of its own (CALIBRATE=0 E2E=0 writes no applied.cmf; E2E=1 after the
# calibration, calibrated.cmf)
measure() {
	rm -f "$2.eval-applied" "$2.eval-calibrated"
	if [ -f "$1/applied.cmf" ] && ! cmp -s "$1/applied.cmf" "$1/model.cmf"; then
		evaluate "$1/applied.cmf" "$2.eval-applied"
	fi
	if [ -f "$1/calibrated.cmf" ] && grep -q '^1' "$1/e2e.set"; then
		evaluate "$1/calibrated.cmf" "$2.eval-calibrated"
	fi
	evaluate "$1/model.cmf" "$2.eval"
}

# rows LABEL BPW M DIR: the rows of M's measurements, one per model evaluated
rows() {
	if [ -s "$3.eval-calibrated" ]; then
		row "$1" "$2" "$3" "$3.eval-applied" "calib e2e" "$4"
		row "$1+cal" "$2" "$3" "$3.eval-calibrated" "e2e" "$4"
		row "$1+cal+e2e" "$2" "$3" "$3.eval" "" "$4"
	elif [ -s "$3.eval-applied" ]; then
		row "$1" "$2" "$3" "$3.eval-applied" "calib" "$4"
		row "$1+cal" "$2" "$3" "$3.eval" "" "$4"
	else
		row "$1" "$2" "$3" "$3.eval" "" "$4"
	fi
}

# evaluate MODEL FILE: perplexity, KL and top-1 against the source, kept in FILE
evaluate() {
	"$bin/cmf-eval" -q -m "$1" --base "$src" --text "$data/tinystories-sample.txt" \
		--limit "$eval_tokens" --window "$window" >"$2.tmp"
	mv "$2.tmp" "$2"
}

# plan_rows BPW NAME LABEL VAR=VALUE...: convert.mk's best on the nvg
# conversion NAME-BPW of those settings (made first if missing): its sweep
# (timed alone), a plan at BPW, the plan's conversion (its rows, measured
# like every conversion) and the judge's choice between the two on the SEL
# tokens
plan_rows() {
	local b=$1 u=$out/$2-$1 p=$out/$2-plan-$1 label=$3 pts=$sweep t0 key
	shift 3
	[ "$pts" = auto ] && pts=$(awk -v b="$b" 'BEGIN { printf "%g %g %g", b / 1.5, b, 1.5 * b }')
	[ -f "$u/model.cmf" ] || convert "$u" "$label" nvg "$b" "" "$@" >/dev/null
	t0=$(date +%s.%N)
	make -s -f "$top/pipelines/convert.mk" MODEL="$src" TOKENS="$calib" OUT="$u" BPW="$b" \
		FIT_TOKENS="$fit" SEL_TOKENS="$sel" WINDOW="$window" BIN="$bin" SWEEP_BPW="$pts" \
		"$@" -j "$jobs" sweep 2>"$out/sweep-${u##*/}.log"
	echo "# sweep on ${u##*/} at $pts bpw ($(cat "$u/sweep.set") errors): $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
	key="$(cat "$u.key") curves=$(cksum <"$u/curves.txt")"
	if ! [ -s "$u/best.txt" ] || ! [ -s "$p.eval" ] || [ "$(cat "$p.key" 2>/dev/null)" != "$key" ]; then
		rm -f "$p.total" "$p.key" "$p.eval" "$p.eval-applied" "$p.eval-calibrated"
		export BENCH_TIMES=$p.times
		rm -f "$BENCH_TIMES" "$BENCH_TIMES.start"
		t0=$(date +%s.%N)
		make -s -f "$top/pipelines/convert.mk" MODEL="$src" TOKENS="$calib" OUT="$u" BPW="$b" \
			FIT_TOKENS="$fit" SEL_TOKENS="$sel" WINDOW="$window" BIN="$wrap" SWEEP_BPW="$pts" \
			"$@" -j "$jobs" best 2>"$p.log"
		awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }' >"$p.total"
		measure "$u/plan" "$p"
		echo "$key" >"$p.key"
	fi
	sed -n 's/^# plan-alloc: target/# plan-alloc: target/p' "$u/plan.txt"
	rows "$label+plan" "$b" "$p" "$u/plan"
	echo "# best on the SEL tokens: $(awk '$1 != "kept" { printf "%s KL %s, ", $1, $3 } $1 == "kept" { print $0 }' "$u/best.txt")"
}

for b in $budgets; do
	for v in $steps; do
		set -- $(variant "$v")
		convert "$out/$1-$b" "$2" nvg "$b" "" "${@:3}"
	done
	[ "${BENCH_DUAL:-1}" = 0 ] || convert "$out/dual-svid-$b" dual-svid dual-svid "$b" ""
	if [ "${BENCH_PLAN:-1}" = 1 ]; then
		set -- $(variant "${BENCH_PLAN_STEPS:-tune}")
		plan_rows "$b" "$@"
	fi
done
