#!/bin/bash
# the device encoder on real stories260K layer-0 tensors with real Grams
# (captured by the model's own forward over TinyStories text): parity with
# the CPU encoder, and the q/k/v tensors of one input in flight together
. "$(dirname "$0")/test-lib.sh"

# the OpenCL stack's own process-lifetime allocations are not ours (make SAN=1)
export LSAN_OPTIONS="suppressions=$NVG_TOP/tests/lsan-opencl.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

test_require_data stories260K.bin tok512.bin tinystories-train-sample.txt

sel_of() { sed -n "s/.* sel \([0-9.]*\)$/\1/p" "$1"; }
pick_of() { sed -n "s/^pick \(P[12] r[0-9]*\) .*/\1/p" "$1"; }
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * (b < 0 ? -b : b)) }'; }

test_expect_success 'setup: the model, layer 0 Grams, contexts and tensors' '
	cmf-patch import --from llama2c --vocab "$NVG_DATA/tok512.bin" -o s.cmf \
		"$NVG_DATA/stories260K.bin" 2>/dev/null &&
	gram-capture -q -m s.cmf --text "$NVG_DATA/tinystories-train-sample.txt" -l 0 \
		--fit-tokens 4096 --sel-tokens 2048 -o L0 &&
	for lead in q o gate down; do
		hctx-build L0.$lead.fit.gram -o $lead.hctx || return 1
	done &&
	for t in self_attn.q_proj self_attn.k_proj self_attn.v_proj self_attn.o_proj \
		 mlp.gate_proj mlp.up_proj mlp.down_proj; do
		cmf-patch extract -o ${t#*.}.raw s.cmf model.layers.0.$t.weight || return 1
	done
'

# the SEL error of the device payload within 1% (relative) of the CPU
# payload's, at the same rank and path count (f32 against f64 moves a few
# discrete sign decisions; on these tensors the two agree to the report's
# 4 decimals or close to it).  The device takes every ITQ step and ALS sweep,
# so the CPU encoder is set to (--itq-tol 0 --als-tol 0): the same algorithm
for case in "q_proj 64x64 q 1.5" "k_proj 32x64 q 3" "o_proj 64x64 o 2" "v_proj 32x64 q 1" \
	    "gate_proj 172x64 gate 1.5" "down_proj 64x172 down 3" "up_proj 172x64 gate 0.55"; do
	set -- $case
	test_expect_success "parity on layer 0 $1 ($2) at $4 bpw" "
		C='--hctx $3.hctx --fit L0.$3.fit.gram --sel L0.$3.sel.gram --bpw $4' &&
		nvg-encode -w $1.raw --shape $2 \$C --itq-tol 0 --als-tol 0 -o cpu.blr >cpu.line &&
		nvg-encode -w $1.raw --shape $2 \$C --device opencl -o gpu.blr >gpu.line &&
		blr-pack verify --shape $2 gpu.blr &&
		test \"\$(pick_of cpu.line)\" = \"\$(pick_of gpu.line)\" &&
		within \$(sel_of gpu.line) \$(sel_of cpu.line) 0.01 ||
		{ cat cpu.line gpu.line; false; }
	"
done

# at the rank cap (r = min(m,n): o_proj at 3 bpw, P1 r64) every direction of
# the latent Gram is kept, including those whose eigenvalues f32 cannot
# resolve; their eigenvectors, and so the start of ITQ, differ between f32
# and f64, and the fit lands elsewhere: within 3% here (it came out 1.45%
# better on the device), a valid payload at the same rank
test_expect_success 'at the rank cap: same rank, SEL within 3%' '
	C="--hctx o.hctx --fit L0.o.fit.gram --sel L0.o.sel.gram --bpw 3" &&
	nvg-encode -w o_proj.raw --shape 64x64 $C --itq-tol 0 --als-tol 0 -o cpu.blr >cpu.line &&
	nvg-encode -w o_proj.raw --shape 64x64 $C --device opencl -o gpu.blr >gpu.line &&
	blr-pack verify --shape 64x64 gpu.blr &&
	test "$(pick_of cpu.line)" = "P1 r64" && test "$(pick_of gpu.line)" = "P1 r64" &&
	within $(sel_of gpu.line) $(sel_of cpu.line) 0.03
'

test_expect_success 'both on a real tensor: the [cmp] line' '
	nvg-encode -w gate_proj.raw --shape 172x64 --hctx gate.hctx --fit L0.gate.fit.gram \
		--sel L0.gate.sel.gram --bpw 1.5 --device both -o b.blr >b.line &&
	test_grep "^\[cmp\] gate_proj.raw sel cpu [0-9.]+ gpu [0-9.]+ rel [-+][0-9.]+%$" b.line
'

test_expect_success 'q, k and v in flight together: the payloads of one at a time' '
	C="--hctx q.hctx --fit L0.q.fit.gram --sel L0.q.sel.gram --bpw 1.5 --device opencl" &&
	nvg-encode -w q_proj.raw --shape 64x64 $C -o q1.blr >/dev/null &&
	nvg-encode -w k_proj.raw --shape 32x64 $C -o k1.blr >/dev/null &&
	nvg-encode -w v_proj.raw --shape 32x64 $C -o v1.blr >/dev/null &&
	nvg-encode $C --jobs 3 -w q_proj.raw --shape 64x64 -o q3.blr \
		-w k_proj.raw --shape 32x64 -o k3.blr -w v_proj.raw --shape 32x64 -o v3.blr >all.line &&
	cmp q1.blr q3.blr && cmp k1.blr k3.blr && cmp v1.blr v3.blr &&
	test "$(wc -l <all.line)" = 3
'

test_expect_success 'tensors of a model (-m, -t): each its own kv budget, in flight' '
	C="-m s.cmf --hctx q.hctx --fit L0.q.fit.gram --sel L0.q.sel.gram --bpw 1 --kv-factor 2" &&
	L=model.layers.0.self_attn &&
	nvg-encode $C -t $L.q_proj.weight -o mq1.blr >mq1.line &&
	nvg-encode $C -t $L.k_proj.weight -o mk1.blr >mk1.line &&
	nvg-encode $C --device opencl --jobs 2 -t $L.q_proj.weight -o mq2.blr \
		-t $L.k_proj.weight -o mk2.blr >m2.line &&
	nvg-encode $C --device opencl -t $L.q_proj.weight -o mq3.blr >mq3.line &&
	nvg-encode $C --device opencl -t $L.k_proj.weight -o mk3.blr >mk3.line &&
	cmp mq2.blr mq3.blr && cmp mk2.blr mk3.blr &&
	cat mq3.line mk3.line >expect && test_cmp expect m2.line &&
	test "$(pick_of mq1.line)" = "$(pick_of mq3.line)" &&
	test "$(pick_of mk1.line)" = "$(pick_of mk3.line)" &&
	nvg-encode $C --kv-factor 1 -t $L.k_proj.weight -o mk4.blr >mk4.line &&
	test_must_fail test_cmp mk1.line mk4.line
'

test_done
