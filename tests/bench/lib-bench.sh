# shellcheck shell=bash
# lib-bench.sh - sourced by the benchmarks.  bench_setup NAME (the encoder's)
# makes $work (removed on exit), $thr (--threads THREADS, or nothing) and
# $work/dgemm-rate (tests/bench/dgemm-rate.c built against OpenBLAS); needs
# NVG_TOP, THREADS, CC, PKG_CONFIG.  median, bench_rank, bench_sgemm_rate
# TOP (the forward's and the tuning's), bench_7b and bench_7b_config (the
# 7B-shaped benchmarks' dimensions and model), bench_payload (a payload) and
# bench_mem (a command's time, peak RSS and own memory).
bench_setup() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	# shellcheck disable=SC2034 # read by the benchmark that sources this
	thr=${THREADS:+--threads $THREADS}
	# shellcheck disable=SC2046
	"$CC" -O2 -o "$work/dgemm-rate" "$NVG_TOP/tests/bench/dgemm-rate.c" \
		$("$PKG_CONFIG" --cflags --libs openblas)
}

# bench_rank M N BPW: the rank of a two-path payload of an M x N matrix at
# BPW (2·r·(M + N) sign bits of M·N·BPW, r a multiple of 8, at least 8), as
# the benchmarks' blr-writer.py payloads take it
bench_rank() {
	awk -v m="$1" -v n="$2" -v b="$3" \
		'BEGIN { r = int(b * m * n / (2 * (m + n)) / 8) * 8; print r < 8 ? 8 : r }'
}

# median of the numbers on stdin
median() {
	sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# bench_sgemm_rate TOP: ./sgemm-rate (TOP/tests/bench/sgemm-rate.c built
# against OpenBLAS), then the OpenBLAS core and the thread counts printed
bench_sgemm_rate() {
	# shellcheck disable=SC2046
	${CC:-cc} -O2 -o sgemm-rate "$1/tests/bench/sgemm-rate.c" \
		$(${PKG_CONFIG:-pkg-config} --cflags --libs openblas) || return 1
	echo "OpenBLAS: $(OPENBLAS_VERBOSE=2 ./sgemm-rate 8 8 8 1 2>&1 | grep -i core | head -1)"
	echo "threads: ${OPENBLAS_NUM_THREADS:-default}, cpus: $(nproc)"
}

# bench_payload ROWS COLS BPW SEED OUT: a random two-path payload of a
# ROWS x COLS matrix at BPW's rank (tests/blr-writer.py: random signs and
# scales; a forward's time does not depend on the values), every h divided
# down so that its entries' spread (√(0.0035·r) with blr-writer's scales) is
# 1/√COLS and a forward through many of them stays finite; needs NVG_PY
bench_payload() {
	local r
	r=$(bench_rank "$1" "$2" "$3")
	"$NVG_PY" "$NVG_TOP/tests/blr-writer.py" write "$5.raw" "$1" "$2" "$r" 2 "$4" --no-numpy
	"$NVG_PY" -c "
import numpy as np, sys
np.full(int(sys.argv[1]), np.sqrt(0.0035 * int(sys.argv[2]) * int(sys.argv[3])), '<f4').tofile(sys.argv[4])
" "$1" "$r" "$2" "$5.gauge"
	"$NVG_PY" "$NVG_TOP/tests/blr-writer.py" gauge "$5.raw" "$5.gauge" "$5"
	rm -f "$5.raw" "$5.gauge"
}

# bench_mem OUT CMD...: run CMD (its output in OUT.out and OUT.err) and print
# "seconds peak-RSS anonymous file" (KiB): its wall time and peak RSS as
# /usr/bin/time gives them, which count the pages of mapped files it has
# touched (the kernel can drop those and read them again), and the peaks of
# its own (anonymous) memory and of those file pages, sampled from
# /proc/PID/status four times a second (a peak shorter than that can be
# missed)
bench_mem() {
	local out=$1 pid c s na nf a=0 f=0 secs rss
	shift
	/usr/bin/time -f "%e %M" -o "$out.time" "$@" >"$out.out" 2>"$out.err" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		c=$(pgrep -P "$pid" | head -1) # the command is /usr/bin/time's child
		if [ -n "$c" ] && s=$(awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 }
			END { print a + 0, f + 0 }' "/proc/$c/status" 2>/dev/null); then
			read -r na nf <<<"$s"
			[ "$na" -le "$a" ] || a=$na
			[ "$nf" -le "$f" ] || f=$nf
		fi
		sleep 0.25
	done
	wait "$pid" || { cat "$out.err" >&2; return 1; }
	read -r secs rss <"$out.time"
	echo "$secs $rss $a $f"
}

# bench_7b NAME WHAT: bench_setup NAME and into $work; Llama-2-7B's
# dimensions divided by SCALE (d hidden, f FFN, h heads, v vocabulary; exit
# 2 when no head is left), OPENBLAS_NUM_THREADS from THREADS when set; then
# the header "# NAME: WHAT, dimensions / SCALE, threads T" and the sgemm rate
# (bench_sgemm_rate, also in rate.txt)
bench_7b() {
	bench_setup "$1"
	cd "$work" || exit 1
	[ -z "$THREADS" ] || export OPENBLAS_NUM_THREADS=$THREADS
	bench_sgemm_rate "$NVG_TOP" >rate.txt
	# shellcheck disable=SC2034 # read by the benchmark that sources this
	d=$((4096 / SCALE)) f=$((11008 / SCALE)) h=$((32 / SCALE)) v=$((32000 / SCALE))
	[ "$h" -ge 1 ] || { echo "$1: SCALE $SCALE leaves no head" >&2; exit 2; }
	echo "# $1: $2, dimensions / $SCALE, threads ${THREADS:-all}"
	cat rate.txt
}

# bench_7b_config LAYERS: the config.json of bench_7b's model (untied head,
# as Llama-2's), for tests/ref/hfmodel.py
bench_7b_config() {
	echo "{\"model_type\": \"llama\", \"hidden_size\": $d, \"intermediate_size\": $f,
		\"num_hidden_layers\": $1, \"num_attention_heads\": $h, \"num_key_value_heads\": $h,
		\"vocab_size\": $v, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0,
		\"max_position_embeddings\": 4096, \"tie_word_embeddings\": false}"
}
