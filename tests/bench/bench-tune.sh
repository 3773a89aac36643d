#!/bin/bash
# bench-tune.sh - the cost of a step of blr-tune on SmolLM2-135M: the block
# reconstruction of one layer (--layer 0, its seven projections tuned) and
# the end-to-end step (--end-to-end, all 210 tuned together), the two steps
# of the default conversion whose time grows with their step count.  Each
# runs twice, with S1 and S2 steps (5 and 45; 2 and 10); a step's seconds
# are the difference of the two times over S2 - S1 (the loading, the
# source's forward and the SEL measurements cancel), its GFLOP/s that of
# the flops the tool counts, set against the sgemm rate measured in the same
# run at a product of the forward's.  The payloads are written by
# tests/blr-writer.py (random signs and scales, two paths at the rank of
# BPW, default 1.0), so that the products run through a real conversion's
# ranks; the times do not depend on the values (subnormals are flushed).
# Medians of RUNS runs (default 3).  Not a test: run by `make bench`.

set -u
TOP=${NVG_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${NVG_BIN:-$TOP/bin}
DATA=${NVG_DATA:-$TOP/../shared/data}
NVG_PY=${NVG_PY:-$TOP/build/venv/bin/python3}
BUILD=${NVG_BUILD:-$TOP/build}
RUNS=${RUNS:-3}
BPW=${BPW:-1.0}
W=$BUILD/bench-tune
mkdir -p "$W" && cd "$W" || exit 1
# shellcheck source=../lib-smollm2.sh
. "$TOP/tests/lib-smollm2.sh"

# shellcheck source=lib-bench.sh
. "$TOP/tests/bench/lib-bench.sh"
bench_sgemm_rate "$TOP" || exit 1

smollm2_gguf || exit 1
[ -s sm.cmf ] || "$BIN/cmf-patch" import -o sm.cmf "$GGUF" || exit 1
head -c 400000 "$DATA/tinystories-train-sample.txt" >t.txt
[ -s sm.u32 ] || "$BIN/cmf-eval" -m sm.cmf --text t.txt --tokenize sm.u32 || exit 1

# every projection of every layer: NAME OUT IN, and its payload at BPW's rank
# (two paths: 2·r·(out + in) sign bits of out·in·BPW, r a multiple of 8)
"$BIN/cmf-patch" info sm.cmf >info.txt || exit 1
key() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" info.txt; }
layers=$(key layers) d=$(key hidden) f=$(key intermediate) kv=$(($(key kv_heads) * $(key head_dim)))
: >all.patch
: >l0.patch
for ((l = 0; l < layers; l++)); do
	for p in "self_attn.q_proj $d $d" "self_attn.k_proj $kv $d" "self_attn.v_proj $kv $d" \
		"self_attn.o_proj $d $d" "mlp.gate_proj $f $d" "mlp.up_proj $f $d" "mlp.down_proj $d $f"; do
		set -- $p
		pl=L$l.${1#*.}.blr
		r=$(bench_rank "$2" "$3" "$BPW")
		[ -s "$pl" ] || "$NVG_PY" "$TOP/tests/blr-writer.py" write "$pl" "$2" "$3" "$r" 2 "$((l + 1))" \
			--no-numpy || exit 1
		echo "--patch model.layers.$l.$1.weight=$pl" >>all.patch
		[ "$l" = 0 ] && echo "--patch model.layers.$l.$1.weight=$pl" >>l0.patch
	done
done

SG=$(./sgemm-rate 512 "$f" "$d" 9 | awk '{ print $5 }')
echo "sgemm 512x${f}x$d: $SG GFLOP/s (median of 9)"
echo

# timed STEPS CMD...: one run of blr-tune with --steps STEPS; "seconds GFLOP
# peak-KiB" from /usr/bin/time and the tool's report line
timed() {
	local s=$1
	shift
	/usr/bin/time -f "%e %M" -o t.time "$@" --steps "$s" >t.out 2>t.err || { cat t.err; return 1; }
	read -r sec rss <t.time
	awk -v s="$sec" -v rss="$rss" \
		'{ for (i = 1; i < NF; i++) if ($(i + 1) == "s" && $(i + 3) == "GFLOP/s") g = $i * $(i + 2) }
		END { if (g == "") exit 1; print s, g, rss }' t.out t.err
}

# per_step LABEL S1 S2 CMD...: RUNS pairs of runs; medians of a step's seconds
# and GFLOP/s, and of the peak RSS of the longer run
per_step() {
	local label=$1 s1=$2 s2=$3 a b
	shift 3
	: >t.steps
	for _ in $(seq "$RUNS"); do
		a=$(timed "$s1" "$@") && b=$(timed "$s2" "$@") || { echo "bench-tune: $label failed" >&2; return 1; }
		echo "$a $b" | awk -v n=$((s2 - s1)) '{ print ($4 - $1) / n, ($5 - $2) / ($4 - $1), $6 }' >>t.steps
	done
	awk -v l="$label" -v s="$(cut -d' ' -f1 t.steps | median)" -v g="$(cut -d' ' -f2 t.steps | median)" \
		-v r="$(cut -d' ' -f3 t.steps | median)" -v sg="$SG" \
		'BEGIN { printf "%-44s %8.2f s/step %8.1f GFLOP/s %6.1f %% of sgemm %8d KiB peak RSS\n", l, s, g, 100 * g / sg, r }'
}

mkdir -p tl
# shellcheck disable=SC2046
per_step "blr-tune --layer 0 ($BPW bpw, FIT 8192)" 5 45 "$BIN/blr-tune" --layer 0 -q -m sm.cmf \
	--tokens sm.u32 --fit-tokens 8192 --sel-tokens 2048 --window 512 --eval-every 1000 \
	$(cat l0.patch) -o tl || exit 1
# shellcheck disable=SC2046
per_step "blr-tune --end-to-end ($BPW bpw, 210 payloads)" 2 10 "$BIN/blr-tune" --end-to-end -q \
	-m sm.cmf --base sm.cmf --tokens sm.u32 --fit-tokens 4096 --sel-tokens 1024 --window 512 \
	--eval-every 1000 $(cat all.patch) -o e2e.cmf || exit 1
