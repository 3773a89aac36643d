#!/bin/bash
# convert.sh - make bench-convert: the whole conversion measured (not a test).
#
# For each budget of BENCH_BPW (0.55 0.8 1.0) and each method (nvg,
# dual-svid): the conversion's time per stage (capture, contexts, encode,
# advance: the summed wall time of each tool's runs, from /usr/bin/time),
# its total time and the peak RSS of any one step, then perplexity and KL
# divergence against the source on held-out TinyStories text.  Then, per
# budget, a plan from plan-alloc over the sweep's curves (every tensor
# encoded at each budget of BENCH_SWEEP on the nvg conversion's Grams; the
# conversion's own budget is reused, not encoded again), converted at the
# same average budget and measured the same way.
#
# Each row is measured by one uninterrupted conversion and kept in
# BENCH_OUT/<method>-<bpw>.row with its settings (and its plan's checksum)
# in .key: a rerun with the same settings prints the kept rows and converts
# only what has none (a conversion cut short is started again from nothing,
# so that its times are whole).
#
# Environment: BENCH_MODEL (smollm2 | stories260K), BENCH_BPW, BENCH_SWEEP
# (auto: 0.7 b, b and 1.25 b for budget b), BENCH_SWEEP_ON (a budget of
# BENCH_BPW: one sweep, on that conversion's Grams, for every plan; by
# default each budget sweeps its own conversion), JOBS, FIT_TOKENS (8192),
# SEL_TOKENS (2048), WINDOW (512), EVAL_TOKENS (8192), BENCH_OUT
# (build/bench-convert), BENCH_PLAN (1: also the plans).
set -eo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${NVG_BIN:-$top/bin}
data=${NVG_DATA:-$top/../shared/data}
out=${BENCH_OUT:-$top/build/bench-convert}
model=${BENCH_MODEL:-smollm2}
budgets=${BENCH_BPW:-0.55 0.8 1.0}
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
	local dir=$1 m=$2 b=$3 plan=${4:-} t0 total key
	key="$m $b fit=$fit sel=$sel window=$window eval=$eval_tokens jobs=$jobs $src $calib plan=${plan:+$(cksum <"$plan")}"
	if [ -s "$dir.row" ] && [ -f "$dir/model.cmf" ] && [ "$(cat "$dir.key" 2>/dev/null)" = "$key" ]; then
		cat "$dir.row"
		return
	fi
	rm -rf "$dir" "$dir.row" "$dir.key"
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
	}' "$BENCH_TIMES" "$dir.eval" "$dir/model.cmf.blr.txt" >"$dir.row.tmp"
	mv "$dir.row.tmp" "$dir.row"
	echo "$key" >"$dir.key"
	cat "$dir.row"
}

for b in $budgets; do
	for m in nvg dual-svid; do
		convert "$out/$m-$b" $m "$b"
	done
	if [ "${BENCH_PLAN:-1}" = 1 ]; then
		pts=$sweep
		# the own budget spelled as convert.mk spells it (1.0 is 1), so that the sweep reuses it
		[ "$pts" = auto ] && pts=$(awk -v b="$b" 'BEGIN { printf "%g %g %g", 0.7 * b, b, 1.25 * b }')
		on=${BENCH_SWEEP_ON:-$b}
		[ -f "$out/nvg-$on/model.cmf" ] || convert "$out/nvg-$on" nvg "$on"
		t0=$(date +%s.%N)
		make -s -f "$top/pipelines/convert.mk" MODEL="$src" TOKENS="$calib" OUT="$out/nvg-$on" BPW="$on" \
			FIT_TOKENS="$fit" SEL_TOKENS="$sel" WINDOW="$window" BIN="$bin" SWEEP_BPW="$pts" \
			-j "$jobs" sweep 2>"$out/sweep-$on.log"
		echo "# sweep on nvg-$on at $pts bpw: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
		"$bin/plan-alloc" --bpw "$b" --plot "$out/plan-$b.svg" -o "$out/plan-$b.plan" \
			"$out/nvg-$on/curves.txt" 2>"$out/plan-$b.summary"
		sed -n 's/^plan-alloc: target/# plan-alloc: target/p' "$out/plan-$b.summary"
		convert "$out/nvg-plan-$b" nvg "$b" "$out/plan-$b.plan"
	fi
done
