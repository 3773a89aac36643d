#!/bin/bash
# convert.mk: one conversion at a time in an OUT.  A second one (a whole
# conversion, one layer's target, slurm-convert.sh) is refused with the
# holder's pid while the first runs; the first ends with the reference bytes;
# a holder killed with SIGKILL does not block the next run, which removes
# the temporaries it left
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

test_expect_success 'setup: stories260K (two layers), calibration tokens, the reference' '
	convert_setup &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=ref BPW=2.5 -j2 2>err
'

# hold_run OUT: a conversion in its own process group (setsid), its tools
# wrapped; the first nvg-encode marks "held" and waits (at most 60 s) for
# "go" before it runs, so the conversion is known to be running, lock held
hold_run() {
	rm -f hb/held hb/go &&
	{ setsid make -s -f "$CONVERT_MK" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 $PLAIN \
		BIN="$PWD/hb" MODEL=s2.cmf TOKENS=cal.u32 OUT=$1 BPW=2.5 -j2 >/dev/null 2>hold.err &
	} &&
	echo $! >hold.pid &&
	for i in $(seq 600); do
		test -e hb/held && return 0
		sleep 0.1
	done
	echo "the held conversion never reached nvg-encode" >&2
	return 1
}

# the pid that OUT/.lock names is a running make's
holder_is_make() {
	sed -n "s/.*(pid \([0-9]*\) on .*/\1/p" "$1" >holder &&
	test -s holder &&
	test "$(cat /proc/$(cat holder)/comm)" = make
}

test_expect_success 'setup: tool wrappers that hold the run at its first encoder' '
	tool_wrappers hb <<-\EOF
	#!/bin/bash
	d=$(dirname "$0")
	if [ "${0##*/}" = nvg-encode ] && [ ! -e "$d/held" ]; then
		touch "$d/held"
		for i in $(seq 600); do [ -e "$d/go" ] && break; sleep 0.1; done
	fi
	exec "$(cat "$d/.real")/${0##*/}" "$@"
	EOF
'

test_expect_success 'a second conversion into a running OUT is refused, naming the holder' '
	hold_run c &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2.5 -j2 2>err &&
	test_grep "^convert: cannot lock OUT '"'c'"': another conversion is running there \(pid [0-9]+ on [^)]*\); wait for it to end or choose another OUT$" err &&
	holder_is_make err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2.5 layer-1 2>err &&
	test_grep "^convert: cannot lock OUT '"'c'"'" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2.5 sweep 2>err &&
	test_grep "^convert: cannot lock OUT '"'c'"'" err &&
	SBATCH=$PWD/no-sbatch test_must_fail bash "$NVG_TOP/pipelines/slurm-convert.sh" $PLAIN \
		FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2.5 2>err &&
	test_grep "^convert: cannot lock OUT '"'c'"'" err &&
	touch hb/go &&
	wait $(cat hold.pid) &&
	cmp ref/model.cmf c/model.cmf &&
	test_cmp ref/model.cmf.blr.txt c/model.cmf.blr.txt
'

test_expect_success 'the lock is free again once the conversion has ended' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2.5 -j2 layer-1 2>err &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2.5 -j2 2>err &&
	cmp ref/model.cmf c/model.cmf
'

test_expect_success 'a holder killed with SIGKILL does not block the next run' '
	hold_run k &&
	kill -KILL -- -$(cat hold.pid) &&
	{ wait $(cat hold.pid); test $? = 137; } &&
	# the others in its group die with it; the kernel frees the lock as they go
	for i in $(seq 100); do
		kill -0 -- -$(cat hold.pid) 2>/dev/null || break
		sleep 0.1
	done &&
	test -s k/.lock &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=k BPW=2.5 -j2 2>err &&
	cmp ref/model.cmf k/model.cmf &&
	test_no_tmp_files k
'

# every naming of the conversion's temporaries: a tool's NAME.tmp.PID (the
# states, Grams, payloads), convert.mk's and convert-lib.sh's NAME.tmp (the
# lists, reports, the sweep's discarded payload; an older version's
# extracted tensor and payload info, which a run it left may still hold)
test_expect_success 'the temporaries a killed run leaves, of every naming, go at the next run' '
	mkdir -p k/sweep &&
	for f in S1.state.tmp.4242 L1/g.q.fit.gram.tmp.4243 L1/q.blr.tmp.4244 source.list.tmp \
		tensors.txt.tmp tensors.txt.body.tmp layers.mk.tmp L1/q.rep.tmp L1/q.rep.w.tmp \
		L1/q.rep.w.tmp.4245 L1/q.info.tmp report.body.tmp report.totals.tmp \
		model.cmf.blr.txt.tmp provenance.json.tmp model.cmf.tmp.4246 params.tmp \
		sweep/L0.q.1.rep.blr.tmp sweep/L0.q.1.rep.blr.tmp.tmp.4247 curves.txt.tmp; do
		echo partial >k/$f || return 1
	done &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=k BPW=2.5 -j2 2>err &&
	test_no_tmp_files k &&
	cmp ref/model.cmf k/model.cmf
'

test_done
