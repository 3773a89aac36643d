#!/bin/bash
# convert.mk: -j2 gives the bytes of -j1, a conversion killed at several
# points resumes to the same bytes, and the Slurm script runs the same
# targets, one job per layer, chained
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

test_expect_success 'setup: stories260K (two layers), calibration tokens' '
	convert_setup
'

test_expect_success 'the reference: -j1' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=j1 BPW=2.5 -j1 2>err &&
	cmf-patch verify j1/model.cmf &&
	cp err j1.err
'

# every encode waits for all of its layer's contexts (order-only), so make
# builds the contexts first and then starts the encodes in ENC_L's order,
# the longest first; -j1 shows make's order without races between starts
# (before, -j2 started the short k and v while down_proj's context was
# still being built, and the layer ended with down_proj alone)
test_expect_success 'a layer'"'"'s contexts first, then its encodes in ENC_L'"'"'s order' '
	for l in 0 1; do
		grep "^convert: layer $l/2 [a-z]*: \(input context\|encode\)" j1.err >lines &&
		awk "/: encode / { e = 1 } /: input context/ && e { exit 1 }" lines &&
		sed -n "s/^ENC_$l := //p" j1/layers.mk >expect &&
		sed -n "s|^convert: layer $l/2 \([a-z]*\): encode .*|\1|p" lines | paste -s -d " " >actual &&
		test_cmp expect actual || return 1
	done
'

# the second of ENC_L waits only for its own context: at -j2 its encode runs
# while the first's context is built.  The wrapper holds down_proj's context
# back until gate_proj's encode has ended (a minute at most, then gives up),
# so that the order does not rest on the speed of the machine
test_expect_success 'at -j2 the second of ENC_L is encoded while the first'"'"'s context is built' '
	test "$(sed -n "s/^ENC_0 := //p" j1/layers.mk)" = "down gate up q o k v" &&
	tool_wrappers kc <<-\EOF &&
	#!/bin/bash
	d=$(dirname "$0")
	t=${0##*/}
	case "$t $*" in
	"hctx-build "*" -o "*/L0/down.hctx)
		for i in $(seq 600); do
			test -e "$d/gate-done" && break
			sleep 0.1
		done
		test -e "$d/gate-done" && touch "$d/held" ;;
	esac
	"$(cat "$d/.real")/$t" "$@" || exit
	case "$t $*" in
	"nvg-encode "*" -t model.layers.0.mlp.gate_proj.weight "*) touch "$d/gate-done" ;;
	esac
	EOF
	make -s -f "$CONVERT_MK" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 $PLAIN BIN="$PWD/kc" \
		MODEL=s2.cmf TOKENS=cal.u32 OUT=jc BPW=2.5 -j2 2>err &&
	test -e kc/held &&
	cmp j1/model.cmf jc/model.cmf
'

test_expect_success '-j2 gives the same bytes' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=j2 BPW=2.5 -j2 2>err &&
	cmp j1/model.cmf j2/model.cmf &&
	test_cmp j1/model.cmf.blr.txt j2/model.cmf.blr.txt
'

# kill_at K: a conversion in its own process group (setsid), run with BIN
# pointing at wrappers of every tool; the wrapper that starts the K-th tool
# of this run marks "killed" and kills the whole group (make, the tools in
# flight, itself) before its tool runs.  The point of interruption is a
# count of steps, not a time, so it does not depend on the machine's speed.
# A whole conversion here starts 35 tools; the first four runs below
# complete at most 1+3+5+8 = 17 of them, so the 12th start of the last run
# is always reached.
kill_at() {
	rm -f kb/count kb/killed &&
	echo 0 >kb/count &&
	{ KILL_AT=$1 setsid make -s -f "$CONVERT_MK" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 \
		$PLAIN BIN="$PWD/kb" MODEL=s2.cmf TOKENS=cal.u32 OUT=k BPW=2.5 -j2 >/dev/null 2>&1 & } &&
	pg=$! &&
	wait $pg
	# the tools of the group may outlive its make by a moment, holding OUT's lock
	for i in $(seq 100); do
		kill -0 -- -$pg 2>/dev/null || break
		sleep 0.1
	done
	test -e kb/killed
}

test_expect_success 'setup: tool wrappers that kill the run at a given step' '
	tool_wrappers kb <<-\EOF
	#!/bin/bash
	# count this tool start; the KILL_AT-th kills the run, else run the tool
	d=$(dirname "$0")
	exec 9>>"$d/.lock"
	flock 9
	n=$(( $(cat "$d/count") + 1 ))
	echo $n >"$d/count"
	flock -u 9
	if [ "$n" = "$KILL_AT" ]; then touch "$d/killed"; kill -TERM 0; exit 143; fi
	exec "$(cat "$d/.real")/${0##*/}" "$@"
	EOF
'

test_expect_success 'killed at several steps, rerun: the same bytes' '
	for k in 2 4 6 9 12; do
		kill_at $k || { echo "not interrupted at step $k" >&2; return 1; }
		test_path_is_missing k/model.cmf || return 1
	done &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=k BPW=2.5 -j2 2>err &&
	cmp j1/model.cmf k/model.cmf &&
	test_cmp j1/model.cmf.blr.txt k/model.cmf.blr.txt &&
	test_no_tmp_files k
'

test_expect_success 'a finished conversion reruns nothing' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=j1 BPW=2.5 -j2 >out 2>err &&
	test_no_grep "encode|capture|advance" err &&
	cmp j1/model.cmf j2/model.cmf
'

test_expect_success 'a lost intermediate is made again, to the same bytes' '
	rm j2/L1/gate.rep j2/L1/gate.blr j2/S1.state &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=j2 BPW=2.5 -j2 2>err &&
	test_grep "layer 1/2 gate: encode" err &&
	cmp j1/model.cmf j2/model.cmf
'

test_expect_success 'slurm-convert.sh: one job per layer, chained, then the model' '
	mkdir sb &&
	cat >sb/sbatch <<-\EOF &&
	#!/bin/bash
	# a fake sbatch: records each call, answers a job id
	n=$(( $(cat "$SB_LOG" 2>/dev/null | wc -l) + 100 ))
	for a in "$@"; do printf "%s\n" "$a"; done >"$SB_DIR/call.$n"
	echo "$*" >>"$SB_LOG"
	echo "$n;cluster"
	EOF
	chmod +x sb/sbatch &&
	SB_LOG=$PWD/sb.log SB_DIR=$PWD/sb PATH=$PWD/sb:$PATH \
		bash "$NVG_TOP/pipelines/slurm-convert.sh" -j 2 -s "--time=10" $PLAIN \
		FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 MODEL=s2.cmf TOKENS=cal.u32 OUT=sl BPW=2.5 >ids &&
	printf "100\n101\n102\n" >expect &&
	test_cmp expect ids &&
	test "$(wc -l <sb.log)" -eq 3 &&
	test_grep "^--job-name=nvg-L0$" sb/call.100 && test_no_grep "dependency" sb/call.100 &&
	test_grep "^--dependency=afterok:100$" sb/call.101 &&
	test_grep "^--dependency=afterok:100:101$" sb/call.102 &&
	test_grep "^--time=10$" sb/call.101 &&
	test_grep "^--wrap=make -f .*convert.mk .*OUT=sl .* -j 2 layer-0$" sb/call.100 &&
	test_grep "^--wrap=make -f .*convert.mk .* -j 2 layer-1$" sb/call.101 &&
	test_grep "^--wrap=make -f .*convert.mk .* -j 2 all$" sb/call.102 &&
	test_path_is_missing sl/L0/q.rep
'

test_expect_success 'the jobs run in order give the reference bytes, one layer each' '
	sed -n "s/^--wrap=//p" sb/call.100 >job0 &&
	bash job0 2>err0 &&
	test -f sl/L0/down.rep && test -f sl/S1.state &&
	test_path_is_missing sl/L1/q.rep sl/model.cmf &&
	sed -n "s/^--wrap=//p" sb/call.101 >job1 && bash job1 2>err1 &&
	test -f sl/L1/q.rep && test_path_is_missing sl/model.cmf &&
	sed -n "s/^--wrap=//p" sb/call.102 >job2 && bash job2 2>err2 &&
	cmp j1/model.cmf sl/model.cmf
'

test_expect_success 'slurm-convert.sh: dual-svid chains too, with tokens or without (OUT'"'"'s lock)' '
	for t in "tok TOKENS=cal.u32" "free"; do
		set -- $t &&
		SB_LOG=$PWD/sb.$1.log SB_DIR=$PWD/sb PATH=$PWD/sb:$PATH \
			bash "$NVG_TOP/pipelines/slurm-convert.sh" -n FIT_TOKENS=1024 SEL_TOKENS=512 \
			WINDOW=128 MODEL=s2.cmf METHOD=dual-svid ${2-} OUT=sl.$1 BPW=2.5 >ids.$1 2>cmds.$1 ||
		return 1
	done &&
	test_grep "job-name=nvg-L1 --cpus-per-task=1 --dependency=afterok:nvg-L0 " cmds.tok &&
	test_grep "job-name=nvg-L1 --cpus-per-task=1 --dependency=afterok:nvg-L0 " cmds.free &&
	test_path_is_missing sb.tok.log sb.free.log
'

# a job runs -j N encoders of THREADS threads each: Slurm is asked for N × THREADS
test_expect_success 'slurm-convert.sh asks for -j × THREADS CPUs a job' '
	SB_DIR=$PWD/sb PATH=$PWD/sb:$PATH bash "$NVG_TOP/pipelines/slurm-convert.sh" -n -j 3 \
		FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 MODEL=s2.cmf METHOD=dual-svid \
		OUT=sl.thr BPW=2.5 THREADS=2 >ids 2>cmds &&
	test_grep "job-name=nvg-L1 --cpus-per-task=6 .*-j 3 " cmds &&
	THREADS=4 SB_DIR=$PWD/sb PATH=$PWD/sb:$PATH bash "$NVG_TOP/pipelines/slurm-convert.sh" \
		-n -j 2 FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 MODEL=s2.cmf METHOD=dual-svid \
		OUT=sl.thr BPW=2.5 >ids 2>cmds &&
	test_grep "job-name=nvg-L0 --cpus-per-task=8 " cmds &&
	test_expect_code 2 bash "$NVG_TOP/pipelines/slurm-convert.sh" -n OUT=sl.thr THREADS=0 2>err &&
	test_grep "THREADS .0. is not a positive integer" err
'

test_expect_success 'slurm-convert.sh refuses a bad command line before submitting' '
	test_expect_code 2 bash "$NVG_TOP/pipelines/slurm-convert.sh" MODEL=s2.cmf 2>err &&
	test_grep "OUT is required" err &&
	test_expect_code 2 bash "$NVG_TOP/pipelines/slurm-convert.sh" -j 0 OUT=x 2>err &&
	SB_LOG=$PWD/sb2.log PATH=$PWD/sb:$PATH test_must_fail bash "$NVG_TOP/pipelines/slurm-convert.sh" \
		MODEL=s2.cmf OUT=bad BPW=2.5 2>err &&
	test_grep "missing variables: TOKENS-or-TEXT" err &&
	test_path_is_missing sb2.log
'

test_done
