#!/bin/bash
# convert.mk PATHS_FOLLOW=N (8 by default for nvg with PATHS=auto): a
# tensor of PATHS_FOLLOW_ON (all seven by default) encodes two paths
# only where the same tensor of the layers before chose two paths over one
# (both candidates compared fewer than N layers back), and one of
# PATHS_FOLLOW_ONE (k and v by default) one path only where they chose one;
# its payload is then auto's byte for byte.  The rule is read
# from the reports (convert-lib.sh follow), checked here against a second
# implementation of it over auto's own reports.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

LIB=$NVG_TOP/pipelines/convert-lib.sh

test_expect_success 'setup: stories260K imported, calibration tokens' '
	convert_setup
'

# follow_want AUTO N SHORTS ONE: "L short 2|1|auto" for every report of the
# conversion AUTO, as PATHS_FOLLOW=N PATHS_FOLLOW_ON=SHORTS
# PATHS_FOLLOW_ONE=ONE chooses: for a short of SHORTS, what the last layer
# that compared both chose, fewer than N back, where that is two paths or
# the short is one of ONE (the layers between follow it too, so that the
# chain is never broken)
follow_want() {
	for f in "$1"/L*/*.rep; do
		l=${f#"$1"/L}; l=${l%%/*}; s=${f##*/}; s=${s%.rep}
		echo "$l $s $(sed -n "s/^pick P\([12]\) .*/\1/p" "$f")"
	done | sort -k2,2 -k1,1n | awk -v n="$2" -v on=" $3 " -v one=" $4 " '
	$2 != cur { cur = $2; last = -1 }
	{
		if (index(on, " " $2 " ") && $1 > 0 && last >= 0 && $1 - last < n &&
		    (won == 2 || index(one, " " $2 " "))) { print $1, $2, won; next }
		print $1, $2, "auto"; last = $1; won = $3
	}'
}

# follow_got OUT: "L short 2|1|auto" from the reports of OUT (one candidate
# only: its report names P2 or P1 alone)
follow_got() {
	for f in "$1"/L*/*.rep; do
		l=${f#"$1"/L}; l=${l%%/*}; s=${f##*/}; s=${s%.rep}
		if ! grep -q " P1 " "$f"; then echo "$l $s 2"
		elif ! grep -q " P2 " "$f"; then echo "$l $s 1"
		else echo "$l $s auto"; fi
	done | sort -k2,2 -k1,1n
}

test_expect_success 'PATHS_FOLLOW=3: two paths only where auto chose them at the compared layer before, both again every third layer' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=auto BPW=2.5 PATHS_FOLLOW=0 -j2 2>err &&
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=f3 BPW=2.5 PATHS_FOLLOW=3 -j2 2>err &&
	follow_want auto 3 "q k v o gate up down" "k v" >expect &&
	follow_got f3 >actual &&
	test_cmp expect actual &&
	grep -c " 2$" actual >n2 &&
	test "$(cat n2)" -ge 6 &&
	test "$(grep -c "^[1-9][0-9]* [kv] 1$" actual)" -ge 6 &&
	test "$(grep " 1$" actual | grep -vc " [kv] ")" = 0 &&
	test "$(grep -c "^0 .* auto$" actual)" = 7 &&
	test_grep "^3 gate auto$" actual && test_grep "^4 gate 2$" actual &&
	test_no_tmp_files f3
'

# at 2.5 bpw stories260K's attention chooses one path everywhere, at 1.0 two
test_expect_success 'PATHS_FOLLOW=3 at 1.0 bpw: the attention'"'"'s tensors follow too, auto'"'"'s bytes' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=a10 BPW=1.0 PATHS_FOLLOW=0 -j2 2>err &&
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=f10 BPW=1.0 PATHS_FOLLOW=3 -j2 2>err &&
	follow_want a10 3 "q k v o gate up down" "k v" >expect &&
	follow_got f10 >actual &&
	test_cmp expect actual &&
	grep " 2$" actual | grep -v " gate \| up \| down " >attn &&
	test "$(wc -l <attn)" -ge 8 &&
	for f in a10/L*/*.blr; do cmp "$f" "f10/${f#a10/}" || return 1; done
'

# the report's clip column is the rank rule's for each tensor's own path
# count: at 1.0 bpw two paths of a 64x64 meet the rank floor and one clips
# nothing, so a report of layer 0's q_proj (two paths, from the conversion)
# beside layer 1's encoded with one path shows a clip taken from another
# tensor of the same shape
test_expect_success 'the report: each rank and clip the rule'"'"'s for its shape, budget and path count' '
	rm -rf rp && mkdir -p rp/L0 rp/L1 &&
	cp a10/info.txt a10/source.list rp/ &&
	grep "^model.layers.[01].self_attn.q_proj.weight " a10/tensors.txt >rp/tensors.txt &&
	cp a10/L0/q.blr a10/L0/q.rep rp/L0/ &&
	cmf-patch extract -o w1.raw s.cmf model.layers.1.self_attn.q_proj.weight &&
	nvg-encode --method dual-svid -w w1.raw --shape 64x64 --bpw 1.0 --paths 1 \
		-o rp/L1/q.blr >rp/L1/q.rep &&
	bash "$LIB" report rp nvg 1.0 1 auto "" cal.u32 4096 1024 256 0.03 cpu 2 &&
	grep -v "^#" rp/model.cmf.blr.txt >lines &&
	test_grep "^model.layers.0.self_attn.q_proj.weight 0 64x64 1 [0-9.]* 8 2 floor " lines &&
	test_grep "^model.layers.1.self_attn.q_proj.weight 1 64x64 1 [0-9.]* 8 1 - [0-9.]* | P1 r8 frob [0-9.]*$" lines &&
	while read -r name layer shape req got rank paths clip rest; do
		blr-pack rank --shape $shape --bpw $req --paths $paths >r &&
		test_grep "rank $rank .* clip $clip$" r || return 1
	done <lines
'

test_expect_success 'PATHS_FOLLOW_ON: only the tensors named follow' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=f3d BPW=2.5 PATHS_FOLLOW=3 PATHS_FOLLOW_ON="down" -j2 2>err &&
	follow_want auto 3 down "" >expect &&
	follow_got f3d >actual &&
	test_cmp expect actual &&
	test "$(grep -c " 2$" actual)" = 3 &&
	test "$(grep " 2$" actual | grep -vc " down ")" = 0 &&
	test_grep " paths_follow=3:down$" f3d/params &&
	test "$(prov_value f3d/model.cmf paths_follow_one)" = "[]" &&
	for f in auto/L*/*.blr; do cmp "$f" "f3d/${f#auto/}" || return 1; done
'

test_expect_success 'PATHS_FOLLOW=3: every payload auto'"'"'s byte for byte where the choices agree (all of them here)' '
	for f in auto/L*/*.blr; do cmp "$f" "f3/${f#auto/}" || return 1; done &&
	for f in f3/L*/*.rep; do
		test "$(cut -d"|" -f1 "$f")" = "$(cut -d"|" -f1 "auto/${f#f3/}")" || return 1
	done &&
	cmf-patch verify f3/model.cmf
'

test_expect_success 'PATHS_FOLLOW: stamped, recorded in the report and the provenance; 0 recorded' '
	test_grep " paths_follow=3:down,gate,k,o,q,up,v paths_follow_one=k,v$" f3/params &&
	test_no_grep "paths_follow" auto/params &&
	test "$(prov_value f3/model.cmf paths_follow)" = 3 &&
	test "$(prov_value f3/model.cmf paths_follow_on)" = "[\"down\", \"gate\", \"k\", \"o\", \"q\", \"up\", \"v\"]" &&
	test "$(prov_value auto/model.cmf paths_follow)" = 0 &&
	test "$(prov_value f3/model.cmf paths_follow_one)" = "[\"k\", \"v\"]" &&
	test "$(prov_value auto/model.cmf paths_follow_on)" = null &&
	test "$(prov_value auto/model.cmf paths_follow_one)" = null &&
	test_grep "^# nvgkit BLR conversion: method nvg, target 2.5 bpw, paths auto .down, gate, k, o, q, up, v: two paths where the layers before chose them, k, v: one path too where they chose one, both candidates every 3 layers.," f3/model.cmf.blr.txt &&
	test_no_grep "two paths where" auto/model.cmf.blr.txt
'

test_expect_success 'PATHS_FOLLOW: resuming with another value is refused, naming it; with the stamp'"'"'s, nothing is redone' '
	test_must_fail conv MODEL=s.cmf TOKENS=cal.u32 OUT=f3 BPW=2.5 PATHS_FOLLOW=4 2>err &&
	test_grep "the stamp has .paths_follow=3:down,gate,k,o,q,up,v., this command .paths_follow=4:down,gate,k,o,q,up,v." err &&
	test_must_fail conv MODEL=s.cmf TOKENS=cal.u32 OUT=f3 BPW=2.5 PATHS_FOLLOW=3 PATHS_FOLLOW_ON="gate up" 2>err &&
	test_grep "this command .paths_follow=3:gate,up." err &&
	test_must_fail conv MODEL=s.cmf TOKENS=cal.u32 OUT=auto BPW=2.5 PATHS_FOLLOW=4 2>err &&
	test_grep "a stamp without paths_follow was made with PATHS_FOLLOW=0" err &&
	test_must_fail conv MODEL=s.cmf TOKENS=cal.u32 OUT=auto BPW=2.5 2>err &&
	test_grep "this command .paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v..; give the stamp.s settings to resume it (.*; a stamp without paths_follow was made with PATHS_FOLLOW=0)" err &&
	test_must_fail conv MODEL=s.cmf TOKENS=cal.u32 OUT=f3 BPW=2.5 PATHS_FOLLOW=3 PATHS_FOLLOW_ONE=v 2>err &&
	test_grep "the stamp has .paths_follow_one=k,v., this command .paths_follow_one=v.\); give the stamp.s settings to resume it \(.*; paths_follow_one=k,v is PATHS_FOLLOW_ONE=.k v.\), or choose" err &&
	cp -p f3/L4/down.blr before.blr &&
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=f3 BPW=2.5 PATHS_FOLLOW=3 -j2 2>err &&
	test_no_grep "encode" err &&
	cmp before.blr f3/L4/down.blr
'

test_expect_success 'PATHS_FOLLOW=8, every tensor, the default of nvg with PATHS=auto; 0 with PATHS=1 or 2 and dual-svid, not refused there' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=f8 BPW=2.5 -j2 2>err &&
	test_grep " paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" f8/params &&
	test "$(prov_value f8/model.cmf paths_follow)" = 8 &&
	follow_want auto 8 "q k v o gate up down" "k v" >expect &&
	follow_got f8 >actual &&
	test_cmp expect actual &&
	test "$(grep -c " 2$" actual)" -ge 6 &&
	for f in auto/L*/*.blr; do cmp "$f" "f8/${f#auto/}" || return 1; done &&
	for v in "PATHS=1" "PATHS=2" "METHOD=dual-svid"; do
		conv MODEL=s2.cmf TOKENS=cal.u32 OUT=p0 BPW=2.5 $v layers 2>err &&
		test_grep "^method=" p0/params && test_no_grep "paths_follow" p0/params &&
		rm -rf p0 || return 1
	done
'

test_expect_success 'PATHS_FOLLOW: a conversion begun when the default was the MLP'"'"'s three is refused, naming the settings that resume it, and resumes with them, nothing redone' '
	cp -rp f8 old8 &&
	sed -i "s/ paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$/ paths_follow=8:down,gate,up/" old8/params &&
	test_must_fail conv MODEL=s.cmf TOKENS=cal.u32 OUT=old8 BPW=2.5 2>err &&
	test_grep "; paths_follow=8:down,gate,up is PATHS_FOLLOW=8 PATHS_FOLLOW_ON=.down gate up.; a stamp with paths_follow but without paths_follow_one was made with PATHS_FOLLOW_ONE=..\), or choose another OUT" err &&
	test_no_grep "a stamp without paths_follow" err &&
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=old8 BPW=2.5 PATHS_FOLLOW=8 PATHS_FOLLOW_ON="down gate up" -j2 2>err &&
	test_no_grep "encode" err &&
	test_grep " paths_follow=8:down,gate,up$" old8/params
'

test_expect_success 'PATHS_FOLLOW: a conversion begun before k and v followed one path is refused, naming PATHS_FOLLOW_ONE=, and resumes with it, nothing redone' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=two8 BPW=2.5 PATHS_FOLLOW_ONE= -j2 2>err &&
	test_grep " paths_follow=8:down,gate,k,o,q,up,v$" two8/params &&
	follow_want auto 8 "q k v o gate up down" "" >expect &&
	follow_got two8 >actual &&
	test_cmp expect actual &&
	test "$(grep -c " 1$" actual)" = 0 &&
	test_must_fail conv MODEL=s.cmf TOKENS=cal.u32 OUT=two8 BPW=2.5 2>err &&
	test_grep "this command .paths_follow_one=k,v.\); give the stamp.s settings to resume it \(.*; a stamp with paths_follow but without paths_follow_one was made with PATHS_FOLLOW_ONE=..\), or choose another OUT" err &&
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=two8 BPW=2.5 PATHS_FOLLOW_ONE= -j2 2>err &&
	test_no_grep "encode" err &&
	for f in two8/L*/*.blr; do cmp "$f" "f8/${f#two8/}" || return 1; done
'

test_expect_success 'PATHS_FOLLOW=0 and 1 encode both candidates everywhere, the bytes of auto' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=f1 BPW=2.5 PATHS_FOLLOW=1 -j2 2>err &&
	test_no_grep "paths_follow" f1/params &&
	for f in f1/L*/*.rep; do test_grep " P2 .* P1 " "$f" || return 1; done &&
	for f in f1/L*/*.blr; do cmp "$f" "auto/${f#f1/}" || return 1; done
'

# the rule itself on reports made by hand: what breaks a chain of two-path
# choices, and how far back it looks
test_expect_success 'follow: two paths after a compared two-path choice; auto after one path, a refusal, a missing report, or too far back' '
	mkdir -p fx/L0 fx/L1 fx/L2 fx/L3 &&
	echo "pick P2 r8 | sel: init 0.5 P2 0.4 P1 0.41 | stored fit 0.3 sel 0.4" >fx/L0/d.rep &&
	echo "pick P2 r8 | sel: P2 only | stored fit 0.3 sel 0.4" >fx/L1/d.rep &&
	echo "pick P2 r8 | sel: P2 only | stored fit 0.3 sel 0.4" >fx/L2/d.rep &&
	test "$(bash "$LIB" follow fx 1 d 2)" = 2 &&
	test "$(bash "$LIB" follow fx 2 d 3)" = 2 &&
	test "$(bash "$LIB" follow fx 2 d 2)" = auto &&
	test "$(bash "$LIB" follow fx 3 d 4)" = 2 &&
	test "$(bash "$LIB" follow fx 3 d 3)" = auto &&
	test "$(bash "$LIB" follow fx 0 d 8)" = auto &&
	test "$(bash "$LIB" follow fx 1 d 1)" = auto &&
	echo "pick P1 r16 | sel: init 0.5 P2 0.42 P1 0.41 | stored fit 0.3 sel 0.41" >fx/L0/d.rep &&
	test "$(bash "$LIB" follow fx 3 d 8)" = auto &&
	echo "pick P2 r8 | sel: init 0.5 P2 0.4 P1 0.41 | stored fit 0.3 sel 0.4" >fx/L0/d.rep &&
	echo refused >fx/L1/d.rep &&
	test "$(bash "$LIB" follow fx 3 d 8)" = auto &&
	rm fx/L1/d.rep &&
	test "$(bash "$LIB" follow fx 3 d 8)" = auto &&
	test "$(bash "$LIB" follow fx 2 d 8)" = auto &&
	test "$(bash "$LIB" follow fx 1 d 8)" = 2
'

test_expect_success 'follow: a chain of 40 layers after the one compared is followed to its end under 9999, refreshed under 8' '
	mkdir -p fz/L0 &&
	echo "pick P2 r8 | sel: init 0.5 P2 0.4 P1 0.41 | stored fit 0.3 sel 0.4" >fz/L0/d.rep &&
	for l in $(seq 1 39); do
		mkdir -p fz/L$l &&
		echo "pick P2 r8 | sel: P2 only | stored fit 0.3 sel 0.4" >fz/L$l/d.rep || return 1
	done &&
	test "$(bash "$LIB" follow fz 40 d 9999)" = 2 &&
	test "$(bash "$LIB" follow fz 40 d 41)" = 2 &&
	test "$(bash "$LIB" follow fz 40 d 40)" = auto &&
	test "$(bash "$LIB" follow fz 9 d 8)" = auto &&
	test "$(bash "$LIB" follow fz 7 d 8)" = 2 &&
	printf "pick P2 r8 | sel: P2 only | stored fit 0.3 sel 0.4" >fz/L20/d.rep &&
	test "$(bash "$LIB" follow fz 40 d 9999)" = 2 &&
	: >fz/L20/d.rep &&
	test "$(bash "$LIB" follow fz 40 d 9999)" = auto
'

test_expect_success 'follow with ONE 1: one path after a compared one-path choice, as two after two; never across a change of count' '
	mkdir -p fy/L0 fy/L1 fy/L2 fy/L3 &&
	echo "pick P1 r16 | sel: init 0.5 P2 0.42 P1 0.41 | stored fit 0.3 sel 0.41" >fy/L0/d.rep &&
	echo "pick P1 r16 | sel: P1 only | stored fit 0.3 sel 0.41" >fy/L1/d.rep &&
	test "$(bash "$LIB" follow fy 1 d 8 1)" = 1 &&
	test "$(bash "$LIB" follow fy 2 d 8 1)" = 1 &&
	test "$(bash "$LIB" follow fy 2 d 2 1)" = auto &&
	test "$(bash "$LIB" follow fy 1 d 8 0)" = auto &&
	test "$(bash "$LIB" follow fy 1 d 8)" = auto &&
	test "$(bash "$LIB" follow fy 2 d 8 0)" = auto &&
	echo "pick P2 r8 | sel: P2 only | stored fit 0.3 sel 0.4" >fy/L2/d.rep &&
	test "$(bash "$LIB" follow fy 3 d 8 1)" = auto &&
	echo "pick P2 r8 | sel: init 0.5 P2 0.4 P1 0.41 | stored fit 0.3 sel 0.4" >fy/L1/d.rep &&
	test "$(bash "$LIB" follow fy 3 d 8 1)" = 2 &&
	test "$(bash "$LIB" follow fy 2 d 8 1)" = 2 &&
	echo "pick P1 r16 | sel: P1 only | stored fit 0.3 sel 0.41" >fy/L2/d.rep &&
	test "$(bash "$LIB" follow fy 3 d 8 1)" = auto &&
	echo refused >fy/L1/d.rep &&
	test "$(bash "$LIB" follow fy 2 d 8 1)" = auto
'

test_expect_success 'PATHS_FOLLOW refused: not an integer, out of range, with PATHS=1 or 2, with dual-svid; PATHS_FOLLOW_ON: not shorts, or none; PATHS_FOLLOW_ONE: not of PATHS_FOLLOW_ON' '
	conv_refused fbad "PATHS_FOLLOW=x:PATHS_FOLLOW .x. is not an integer from 0 to 9999" \
		"PATHS_FOLLOW=-1:PATHS_FOLLOW .-1. is not an integer" \
		"PATHS_FOLLOW=08:PATHS_FOLLOW .08. is not an integer" \
		"PATHS_FOLLOW=10000:PATHS_FOLLOW .10000. is not an integer" \
		"PATHS_FOLLOW=4 PATHS=2:PATHS_FOLLOW follows the choices of PATHS=auto of nvg" \
		"PATHS_FOLLOW=4 PATHS=1:PATHS_FOLLOW follows the choices of PATHS=auto of nvg" \
		"PATHS_FOLLOW=4 METHOD=dual-svid:PATHS_FOLLOW follows the choices of PATHS=auto of nvg" \
		"PATHS_FOLLOW=4 PATHS_FOLLOW_ON=mlp:PATHS_FOLLOW_ON .mlp. is not a list of q k v o gate up down" \
		"PATHS_FOLLOW=4 PATHS_FOLLOW_ON=:PATHS_FOLLOW_ON .. is not a list of q k v o gate up down" \
		"PATHS_FOLLOW=4 PATHS_FOLLOW_ON=down PATHS_FOLLOW_ONE=k:PATHS_FOLLOW_ONE .k. is not a list of PATHS_FOLLOW_ON.s .down.\.  Stop" \
		"PATHS_FOLLOW=4 PATHS_FOLLOW_ONE=mlp:PATHS_FOLLOW_ONE .mlp. is not a list of PATHS_FOLLOW_ON.s .q k v o gate up down.\.  Stop"
'

test_done
