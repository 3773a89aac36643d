#!/bin/bash
# bench-forward.sh - tokens per second of cmf-eval and of gram-capture (one
# layer, all four leads) on stories260K and SmolLM2-135M at window 512, the
# matrix-product GFLOP/s they achieve against the sgemm rate measured in the
# same run, the cost of a capture over the forward of its layer, peak RSS.
# stories260K on 32768 tokens, SmolLM2 on 4096 (eight windows: the model's
# loading, 0.5 GB, stays a small part of the time).
# Medians of RUNS runs (default 3).  Not a test: run by `make bench`.
#
# LLAMA_BIN=DIR (llama.cpp's llama-perplexity and llama-quantize, built by
# tests/bench/llama-yardstick.sh) adds #12's yardstick: SmolLM2's GGUF
# requantized to F32, llama-perplexity on the same text at window 512 (8
# windows, logits at every position) alternating with cmf-eval, each one's
# tokens/s without the model's loading, and their ratio.

set -u
TOP=${NVG_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${NVG_BIN:-$TOP/bin}
DATA=${NVG_DATA:-$TOP/../shared/data}
NVG_PY=${NVG_PY:-$TOP/build/venv/bin/python3}
BUILD=${NVG_BUILD:-$TOP/build}
RUNS=${RUNS:-3}
W=$BUILD/bench-forward
mkdir -p "$W" && cd "$W" || exit 1

# shellcheck source=lib-bench.sh
. "$TOP/tests/bench/lib-bench.sh"
bench_sgemm_rate "$TOP" || exit 1

# run LABEL CMD...: RUNS times; medians of seconds, of the tool's tokens/s and
# GFLOP/s (from its json or -v line), and peak RSS
run() {
	label=$1; shift
	: >t.s; : >t.rss; : >t.tps; : >t.gf
	for i in $(seq "$RUNS"); do
		/usr/bin/time -f "%e %M" -o t.time "$@" >t.out 2>t.err || { cat t.err; return 1; }
		read -r s rss <t.time
		echo "$s" >>t.s; echo "$rss" >>t.rss
		sed -n 's/.*"tokens_per_s":\([0-9.e+]*\).*/\1/p' t.out >>t.tps
		sed -n 's/.*"gflops":\([0-9.e+]*\).*/\1/p' t.out >>t.gf
		tr '\r' '\n' <t.err | sed -n 's/.* \([0-9.]*\) GFLOP\/s$/\1/p' >>t.gf
		tr '\r' '\n' <t.err | sed -n 's/.*, \([0-9]*\) tokens\/s, ETA.*/\1/p' | tail -1 >>t.tps
	done
	printf '%-44s %8.2f s %10s tok/s %8s GFLOP/s %8d KiB peak RSS\n' "$label" \
		"$(median <t.s)" "$(median <t.tps)" "$(median <t.gf)" "$(median <t.rss)"
	median <t.s >"$label.s"
	median <t.gf >"$label.gf"
}

# setup: both models, held-out tokens
"$BIN/cmf-patch" import --vocab "$DATA/tok512.bin" -o s.cmf "$DATA/stories260K.bin" || exit 1
# shellcheck source=../lib-smollm2.sh
. "$TOP/tests/lib-smollm2.sh"
smollm2_gguf || exit 1
[ -s sm.cmf ] || "$BIN/cmf-patch" import -o sm.cmf "$GGUF" || exit 1
head -c 200000 "$DATA/tinystories-sample.txt" >t.txt
"$BIN/cmf-eval" -m s.cmf --text t.txt --tokenize s.u32 || exit 1
"$BIN/cmf-eval" -m sm.cmf --text t.txt --tokenize sm.u32 || exit 1

echo
for shape in "512 64 64" "512 172 64" "512 576 576" "512 1536 576" "512 576 1536" "512 4096 576"; do
	./sgemm-rate $shape 9
done | tee sgemm.txt
SG=$(awk '$2 == 512 && $3 == 1536 { print $5 }' sgemm.txt)
echo

# bench MODEL TOKENS LIMIT NAME: eval, then layer 2's capture from its state
bench() {
	m=$1 tok=$2 lim=$3 name=$4
	head -c $((4 * lim)) "$tok" >b.u32
	run "$name eval (window 512)" "$BIN/cmf-eval" -q -m "$m" --tokens b.u32 --window 512 --json
	"$BIN/gram-capture" -q -m "$m" --tokens b.u32 -l 1 --window 512 --next-state S2 ||
		return 1
	run "$name layer 2 forward only" "$BIN/gram-capture" -v -m "$m" --tokens b.u32 -l 2 \
		--window 512 --state S2 --next-state S3
	run "$name layer 2 capture, 4 leads" "$BIN/gram-capture" -v -m "$m" --tokens b.u32 -l 2 \
		--window 512 --state S2 -o G
	awk -v a="$(cat "$name layer 2 capture, 4 leads.s")" -v b="$(cat "$name layer 2 forward only.s")" \
		'BEGIN { printf "%-44s %8.2f x the layer'"'"'s forward\n", "'"$name"' capture cost", a / b }'
	awk -v g="$(cat "$name eval (window 512).gf")" -v s="$SG" \
		'BEGIN { printf "%-44s %8.1f %% of the measured sgemm rate (%s GFLOP/s)\n", "'"$name"' eval", 100 * g / s, s }'
}

# llama_tps LOG: the tokens/s of a llama-perplexity run of 8 windows of 512,
# from its log's timestamps (minutes.seconds.milliseconds) at the start of
# the scoring and at its final estimate
llama_tps() {
	awk '/perplexity: calculating perplexity/ { split($1, t, "."); a = t[1] * 60 + t[2] + t[3] / 1000 }
	     /Final estimate/ { split($1, t, "."); b = t[1] * 60 + t[2] + t[3] / 1000 }
	     END { if (b > a) printf "%.1f\n", 4096 / (b - a); else exit 1 }' "$1"
}

# yardstick: cmf-eval on SmolLM2's 4096 tokens and llama.cpp's F32 forward
# on the same text, alternating
yardstick() {
	echo
	[ -s sm-f32.gguf ] || "$LLAMA_BIN/llama-quantize" --allow-requantize "$GGUF" sm-f32.gguf F32 \
		>quantize.log 2>&1 || { echo "llama-quantize failed: $W/quantize.log"; return 1; }
	head -c 16384 sm.u32 >b.u32
	: >y.ours; : >y.llama
	for _ in $(seq "$RUNS"); do
		"$BIN/cmf-eval" -q -m sm.cmf --tokens b.u32 --window 512 --json |
			sed -n 's/.*"tokens_per_s":\([0-9.e+]*\).*/\1/p' >>y.ours
		if ! "$LLAMA_BIN/llama-perplexity" -m sm-f32.gguf -f t.txt -c 512 -b 512 \
			--chunks 8 -t "$(nproc)" >llama.log 2>&1 || ! llama_tps llama.log >>y.llama; then
			echo "llama-perplexity failed: $W/llama.log"
			return 1
		fi
	done
	awk -v a="$(median <y.ours)" -v b="$(median <y.llama)" 'BEGIN {
		printf "%-44s %8.1f tok/s\n", "SmolLM2-135M cmf-eval (window 512)", a
		printf "%-44s %8.1f tok/s\n", "SmolLM2-135M llama.cpp F32 llama-perplexity", b
		printf "%-44s %8.2f x llama.cpp'"'"'s rate\n", "SmolLM2-135M cmf-eval", a / b }'
}

bench s.cmf s.u32 32768 stories260K
bench sm.cmf sm.u32 4096 SmolLM2-135M
if [ -n "${LLAMA_BIN:-}" ]; then
	yardstick || exit 1
fi
