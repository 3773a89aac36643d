#!/bin/bash
# convert.sh - make bench-convert: the whole conversion measured (not a test).
#
# For each budget of BENCH_BPW (0.55 0.8 1.0) and each method (nvg,
# dual-svid): the conversion's time per stage (capture, contexts, encode,
# advance: the summed wall time of each tool's runs, from /usr/bin/time),
# its total time and the peak RSS of any one step, then perplexity and KL
# divergence against the source on held-out TinyStories text.  Then, per
# budget, a plan from plan-alloc over the sweep's curves (every tensor
# encoded at each budget of BENCH_SWEEP on the nvg conversion's Grams),
# converted at the same average budget and measured the same way.
#
# Environment: BENCH_MODEL (smollm2 | stories260K), BENCH_BPW, BENCH_SWEEP,
# JOBS, FIT_TOKENS (16384), SEL_TOKENS (4096), WINDOW (512), EVAL_TOKENS
# (16384), BENCH_OUT (build/bench-convert), BENCH_PLAN (1: also the plans).
set -eo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${NVG_BIN:-$top/bin}
data=${NVG_DATA:-$top/../shared/data}
out=${BENCH_OUT:-$top/build/bench-convert}
model=${BENCH_MODEL:-smollm2}
budgets=${BENCH_BPW:-0.55 0.8 1.0}
sweep=${BENCH_SWEEP:-0.4 0.55 0.7 0.8 1 1.25 1.5}
jobs=${JOBS:-$(nproc)}
fit=${FIT_TOKENS:-16384}
sel=${SEL_TOKENS:-4096}
window=${WINDOW:-512}
eval_tokens=${EVAL_TOKENS:-16384}
mkdir -p "$out"

# the source model and calibration tokens, as the demo makes them (its
# conversions are skipped: BPW is set to a budget it never converts)
DEMO_OUT=$out/demo DEMO_MODEL=$model bash "$top/pipelines/demo.sh" --prepare-only >/dev/null 2>"$out/prepare.log" ||
	true
src=$(sed -n 's/^demo: source \(.*\)$/\1/p' "$out/prepare.log")
calib=$(sed -n 's/^demo: calibration \(.*\)$/\1/p' "$out/prepare.log")
[ -r "$src" ] && [ -r "$calib" ] || { cat "$out/prepare.log" >&2; exit 1; }

# every tool run through /usr/bin/time: wall seconds and peak RSS per call
wrap=$out/wrap
mkdir -p "$wrap"
for t in "$bin"/*; do
	printf '#!/bin/sh\nexec /usr/bin/time -a -o "$BENCH_TIMES" -f "%%e %%M %s $*" "%s" "$@"\n' \
		"${t##*/}" "$t" >"$wrap/${t##*/}"
	chmod +x "$wrap/${t##*/}"
done

echo "OpenBLAS core: $(OPENBLAS_VERBOSE=2 "$bin/cmf-patch" info "$src" 2>&1 >/dev/null | sed -n 's/.*Core: *//p' | head -n 1)"
echo "model $src, $jobs jobs, FIT $fit SEL $sel window $window, eval $eval_tokens tokens"
printf '%-10s %5s %8s %8s %8s %8s %8s %9s %9s %10s %8s %7s\n' method bpw capture contexts \
	encode advance total rss_MiB body_bpw perplexity KL top1

# convert DIR METHOD BPW [PLAN]: the conversion, its stage times, its evaluation
convert() {
	local dir=$1 m=$2 b=$3 plan=${4:-} t0 total
	export BENCH_TIMES=$dir.times
	rm -f "$BENCH_TIMES"
	t0=$(date +%s.%N)
	make -s -f "$top/pipelines/convert.mk" MODEL="$src" TOKENS="$calib" OUT="$dir" BPW="$b" \
		METHOD="$m" ${plan:+PLAN="$plan"} FIT_TOKENS="$fit" SEL_TOKENS="$sel" WINDOW="$window" \
		BIN="$wrap" -j "$jobs" 2>"$dir.log"
	total=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
	"$bin/cmf-eval" -q -m "$dir/model.cmf" --base "$src" --text "$data/tinystories-sample.txt" \
		--limit "$eval_tokens" --window "$window" >"$dir.eval"
	awk -v m="$m${plan:+ +plan}" -v b="$b" -v total="$total" '
	FILENAME ~ /times$/ {
		s = "other"
		if ($3 == "gram-capture") s = ($0 ~ /--next-state/) ? "advance" : "capture"
		else if ($3 == "hctx-build") s = "contexts"
		else if ($3 == "nvg-encode") s = "encode"
		t[s] += $1; if ($2 > rss) rss = $2; next
	}
	FILENAME ~ /eval$/ { v[$1] = $2; next }
	/^# total blr body/ { body = $5 }
	END {
		printf "%-10s %5s %8.1f %8.1f %8.1f %8.1f %8.1f %9.1f %9.4f %10.3f %8.4f %7.4f\n", m, b,
			t["capture"], t["contexts"], t["encode"], t["advance"], total, rss / 1024, body,
			v["ppl"], v["kl"], v["top1"]
	}' "$BENCH_TIMES" "$dir.eval" "$dir/model.cmf.blr.txt"
}

for b in $budgets; do
	for m in nvg dual-svid; do
		convert "$out/$m-$b" $m "$b"
	done
	if [ "${BENCH_PLAN:-1}" = 1 ]; then
		make -s -f "$top/pipelines/convert.mk" MODEL="$src" TOKENS="$calib" OUT="$out/nvg-$b" BPW="$b" \
			FIT_TOKENS="$fit" SEL_TOKENS="$sel" WINDOW="$window" BIN="$bin" SWEEP_BPW="$sweep" \
			-j "$jobs" sweep 2>"$out/sweep-$b.log"
		"$bin/plan-alloc" --bpw "$b" --plot "$out/plan-$b.svg" -o "$out/plan-$b.plan" \
			"$out/nvg-$b/curves.txt" 2>"$out/plan-$b.summary"
		convert "$out/nvg-plan-$b" nvg "$b" "$out/plan-$b.plan"
	fi
done
