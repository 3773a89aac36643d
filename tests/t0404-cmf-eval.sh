#!/bin/bash
# cmf-eval: windows and counts, the base comparison (KL of a model against
# itself is 0 and its agreement 1; a patched model drifts), --json, --limit,
# and the bad inputs: exit 1, one line, no output

. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin tinystories-sample.txt

D="$NVG_DATA"
Q="model.layers.1.self_attn.q_proj.weight"

cat >craft.py <<'PY'
import json, sys
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
src, out, what = sys.argv[1:4]
with safe_open(src, "np") as f:
    meta = f.metadata()
t = load_file(src)
if what == "arch":
    a = json.loads(meta["cmf.arch"]); a["model_type"] = "gpt2"; meta["cmf.arch"] = json.dumps(a)
if what in ("nan", "inf"):
    # one weight of layer 1's down_proj broken, its CRC updated (a valid file)
    import zlib
    k = "model.layers.1.mlp.down_proj.weight"
    t[k] = t[k].copy()
    t[k].flat[5] = float(what)
    crc = json.loads(meta["cmf.crc32"]); crc[k] = zlib.crc32(t[k].tobytes())
    meta["cmf.crc32"] = json.dumps(crc)
save_file(t, out, metadata=meta)
PY

# val KEY FILE: the value of a "key value" line
val() {
	sed -n "s/^$1 //p" "$2"
}

test_expect_success 'setup' '
	cmf-patch import --vocab "$D/tok512.bin" -o s.cmf "$D/stories260K.bin" &&
	head -c 12000 "$D/tinystories-sample.txt" >t.txt &&
	cmf-eval -m s.cmf --text t.txt --tokenize tok.u32 &&
	"$NVG_PY" "$NVG_TOP/tests/blr-writer.py" write p.blr 64 64 16 1 7 &&
	cmf-patch apply -o patched.cmf s.cmf "$Q=p.blr"
'

test_expect_success 'windows: each window of L tokens scores L-1 of them' '
	cmf-eval -q -m s.cmf --tokens tok.u32 --limit 1000 --window 300 >out &&
	test "$(val tokens out)" = 1000 &&
	test "$(val predicted out)" = $((299 * 3 + 99))
'

# the scratch of a window is W² scores: --window 2^20 asked 4 TiB before it
# was sized by the windows the tokens make
test_expect_success 'a window beyond the tokens is one window of them all, at their cost' '
	cmf-eval -q -m s.cmf --base patched.cmf --tokens tok.u32 --limit 1000 --window 1048576 >big &&
	cmf-eval -q -m s.cmf --base patched.cmf --tokens tok.u32 --limit 1000 --window 1000 >one &&
	grep -E "^(tokens|predicted|nll|ppl|base_ppl|kl|top1) " one >one.f &&
	grep -E "^(tokens|predicted|nll|ppl|base_ppl|kl|top1) " big >big.f &&
	test_cmp one.f big.f &&
	test "$(val predicted big)" = 999 &&
	test_expect_code 2 cmf-eval -m s.cmf --tokens tok.u32 --window 1048577 2>err &&
	test_grep "bad --window" err
'

test_expect_success 'a model against itself: KL 0, top-1 agreement 1' '
	cmf-eval -q -m s.cmf --base s.cmf --tokens tok.u32 --limit 2000 --window 256 >self &&
	test "$(val kl self)" = 0 &&
	test "$(val top1 self)" = 1.000000 &&
	test "$(val ppl self)" = "$(val base_ppl self)"
'

test_expect_success 'a patched model against its base: KL > 0, agreement < 1, both perplexities' '
	cmf-eval -q -m patched.cmf --base s.cmf --tokens tok.u32 --limit 2000 --window 256 >cmp &&
	cmf-eval -q -m s.cmf --tokens tok.u32 --limit 2000 --window 256 >base &&
	cmf-eval -q -m patched.cmf --tokens tok.u32 --limit 2000 --window 256 >model &&
	test "$(val base_ppl cmp)" = "$(val ppl base)" &&
	test "$(val ppl cmp)" = "$(val ppl model)" &&
	awk -v k="$(val kl cmp)" -v a="$(val top1 cmp)" "BEGIN { exit !(k > 0 && a < 1 && a > 0.5) }"
'

test_expect_success '--json holds the same figures' '
	cmf-eval -q -m patched.cmf --base s.cmf --tokens tok.u32 --limit 2000 --window 256 --json >j &&
	"$NVG_PY" -c "
import json
r = json.load(open(\"j\"))
lines = dict(l.split() for l in open(\"cmp\"))
assert r[\"predicted\"] == int(lines[\"predicted\"])
for k in (\"nll\", \"ppl\", \"base_ppl\", \"kl\", \"top1\"):
    assert abs(r[k] - float(lines[k])) <= 1e-6 * max(1, abs(r[k])), k
"
'

fails() {
	code=$1; shift
	test_expect_code "$code" "$@" >out 2>err &&
	test_one_line_error err &&
	test ! -s out
}

test_expect_success 'a token id beyond the vocabulary' '
	printf "\001\000\000\000\000\002\000\000" >big.u32 &&
	fails 1 cmf-eval -q -m s.cmf --tokens big.u32 &&
	test_grep "token id 512 at position 1 is beyond the vocabulary" err
'

test_expect_success 'an empty token file' '
	: >empty.u32 &&
	fails 1 cmf-eval -q -m s.cmf --tokens empty.u32 &&
	test_grep "no tokens" err
'

test_expect_success 'a single token makes no window' '
	printf "\001\000\000\000" >one.u32 &&
	fails 1 cmf-eval -q -m s.cmf --tokens one.u32 &&
	test_grep "1 tokens make no window" err
'

test_expect_success 'a model of an architecture the engine does not run' '
	"$NVG_PY" craft.py s.cmf arch.cmf arch &&
	fails 1 cmf-eval -q -m arch.cmf --tokens tok.u32 &&
	test_grep "architecture .gpt2. is not run by the forward" err &&
	fails 1 cmf-eval -q -m s.cmf --base arch.cmf --tokens tok.u32 &&
	test_grep "arch.cmf" err
'

test_expect_success 'a model file that is not a CMF' '
	printf "not a model" >junk.cmf &&
	fails 1 cmf-eval -q -m junk.cmf --tokens tok.u32
'

test_expect_success '--tokenize leaves nothing behind on a bad text' '
	: >emptytext.txt &&
	printf "\377" >bad.txt &&
	cmf-eval -m s.cmf --text bad.txt --tokenize b.u32 &&
	test $(stat -c %s b.u32) = 12
'

test_expect_success 'usage errors exit 2' '
	test_expect_code 2 cmf-eval -m s.cmf 2>err &&
	test_grep "give one of --tokens and --text" err &&
	test_expect_code 2 cmf-eval --tokens tok.u32 2>err &&
	test_expect_code 2 cmf-eval -m s.cmf --tokens tok.u32 --window 1 2>err &&
	test_expect_code 2 cmf-eval -m s.cmf --tokens tok.u32 --tokenize x.u32 2>err &&
	test_path_is_missing x.u32
'

test_expect_success '-h and --version' '
	cmf-eval -h >usage && test_grep "^cmf-eval -m model.cmf" usage &&
	cmf-eval --version >v && test_grep "^cmf-eval \(nvgkit\) " v
'

test_expect_success '-h prints the SYNOPSIS of cmf-eval(1)' '
	test_man_synopsis man1/cmf-eval.1 >syn &&
	tr -s " \t\n" " " <syn | sed "s/^ //; s/ \$//" >want &&
	cmf-eval -h >usage &&
	tr -s " \t\n" " " <usage | sed "s/^ //; s/ \$//" >got &&
	test_cmp want got
'

test_expect_success 'a NaN or Inf weight: exit 1, the weight named, no report (nor JSON)' '
	for w in nan inf; do
		"$NVG_PY" craft.py s.cmf $w.cmf $w &&
		test_expect_code 1 cmf-eval -q -m $w.cmf --base s.cmf --tokens tok.u32 --limit 300 \
			--json >out 2>err &&
		test_one_line_error err &&
		test_grep "tensor .model.layers.1.mlp.down_proj.weight.: weight .0,5. = $w is not finite" err &&
		test ! -s out || return 1
	done
'

test_done
