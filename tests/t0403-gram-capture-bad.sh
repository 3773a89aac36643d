#!/bin/bash
# gram-capture refuses bad input: exit 1, one line naming what is wrong,
# nothing written (no Gram, no state, no temporary file)

. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin tinystories-sample.txt

D="$NVG_DATA"

# craft.py SRC OUT what: a copy of a CMF with its metadata changed
cat >craft.py <<'PY'
import json, sys
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
src, out, what = sys.argv[1:4]
with safe_open(src, "np") as f:
    meta = f.metadata()
if what == "arch":
    a = json.loads(meta["cmf.arch"]); a["model_type"] = "gpt2"; meta["cmf.arch"] = json.dumps(a)
elif what == "nofallback":
    v = json.loads(meta["cmf.tokenizer"])
    for i, p in enumerate(v["tokens"]):
        if p.startswith("<0x"):
            v["tokens"][i] = "<unused%d>" % i
            v["types"][i] = 5
    meta["cmf.tokenizer"] = json.dumps(v)
save_file(load_file(src), out, metadata=meta)
PY

# a state with another width: the header of S_1 with width 32 and a body to match
cat >narrow.py <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
h = bytearray(b[:56]); rows = struct.unpack_from("<Q", h, 48)[0]
struct.pack_into("<I", h, 12, 32)
open(sys.argv[2], "wb").write(bytes(h) + bytes(4 * 32 * rows))
PY

# fails CODE OUTPUTS... -- CMD: exit CODE, one line on stderr, no OUTPUTS, no temporaries
fails() {
	code=$1; shift
	outs=
	while [ "$1" != -- ]; do outs="$outs $1"; shift; done
	shift
	test_expect_code "$code" "$@" 2>err &&
	test_one_line_error err &&
	test_path_is_missing $outs &&
	test_no_tmp_files
}

test_expect_success 'setup' '
	cmf-patch import --vocab "$D/tok512.bin" -o s.cmf "$D/stories260K.bin" &&
	head -c 3000 "$D/tinystories-sample.txt" >t.txt &&
	cmf-eval -m s.cmf --text t.txt --tokenize tok.u32 &&
	head -c 2000 tok.u32 >other.u32 && tail -c 2000 tok.u32 >tail.u32 &&
	head -c 2000 tok.u32 >a.u32 &&
	gram-capture -q -m s.cmf --tokens a.u32 -l 0 --window 64 --next-state S1 &&
	"$NVG_PY" "$NVG_TOP/tests/blr-writer.py" write q0.blr 64 64 8 1 1 &&
	"$NVG_PY" "$NVG_TOP/tests/blr-writer.py" write narrow.blr 32 64 8 1 1 &&
	"$NVG_PY" craft.py s.cmf arch.cmf arch &&
	"$NVG_PY" craft.py s.cmf nofb.cmf nofallback &&
	"$NVG_PY" narrow.py S1 narrow.state
'

test_expect_success 'a token id beyond the vocabulary' '
	printf "\001\000\000\000\000\002\000\000" >big.u32 &&
	fails 1 P.q.gram N -- gram-capture -q -m s.cmf --tokens big.u32 -l 0 -o P --next-state N &&
	test_grep "token id 512 at position 1 is beyond the vocabulary \(0\.\.511\)" err
'

test_expect_success 'an empty token file' '
	: >empty.u32 &&
	fails 1 P.q.gram -- gram-capture -q -m s.cmf --tokens empty.u32 -l 0 -o P &&
	test_grep "no tokens" err
'

test_expect_success 'a token file that is not whole u32 ids' '
	printf "\001\000\000" >odd.u32 &&
	fails 1 P.q.gram -- gram-capture -q -m s.cmf --tokens odd.u32 -l 0 -o P &&
	test_grep "not a multiple of 4" err
'

test_expect_success 'fewer tokens than FIT+SEL ask for (how many, how many needed)' '
	fails 1 P.q.fit.gram -- gram-capture -q -m s.cmf --tokens a.u32 -l 0 \
		--fit-tokens 400 --sel-tokens 200 -o P &&
	test_grep "500 tokens, FIT 400 \+ SEL 200 need 600" err
'

test_expect_success 'a state from other tokens' '
	fails 1 P.q.gram N -- gram-capture -q -m s.cmf --tokens tail.u32 -l 1 --window 64 \
		--state S1 -o P --next-state N &&
	test_grep "CRC-32" err
'

test_expect_success 'a state from another window size' '
	fails 1 P.q.gram -- gram-capture -q -m s.cmf --tokens a.u32 -l 1 --window 128 --state S1 -o P &&
	test_grep "window size 64, this run has 128" err
'

test_expect_success 'a state of another width' '
	fails 1 P.q.gram -- gram-capture -q -m s.cmf --tokens a.u32 -l 1 --window 64 \
		--state narrow.state -o P &&
	test_grep "width 32, this run has 64" err
'

test_expect_success 'a state for another layer' '
	fails 1 P.q.gram -- gram-capture -q -m s.cmf --tokens a.u32 -l 2 --window 64 --state S1 -o P &&
	test_grep "state is for layer 1, this run has 2" err
'

test_expect_success 'a truncated state' '
	head -c 1000 S1 >cut.state &&
	fails 1 P.q.gram -- gram-capture -q -m s.cmf --tokens a.u32 -l 1 --window 64 --state cut.state -o P &&
	test_grep "cut.state" err
'

test_expect_success '-l beyond the layers' '
	fails 1 P.q.gram -- gram-capture -q -m s.cmf --tokens a.u32 -l 5 -o P &&
	test_grep "layer 5 is beyond the model.s layers 0\.\.4" err
'

test_expect_success 'a patch of a tensor outside layer L' '
	fails 1 P.q.gram N -- gram-capture -q -m s.cmf --tokens a.u32 -l 1 --window 64 --state S1 \
		--patch model.layers.0.self_attn.q_proj.weight=q0.blr -o P --next-state N &&
	test_grep "not a projection of layer 1" err
'

test_expect_success 'a patch of the wrong shape' '
	fails 1 P.q.gram N -- gram-capture -q -m s.cmf --tokens a.u32 -l 1 --window 64 --state S1 \
		--patch model.layers.1.self_attn.q_proj.weight=narrow.blr -o P --next-state N &&
	test_grep "want 64 × 64" err
'

test_expect_success 'a model of an architecture the engine does not run' '
	fails 1 P.q.gram -- gram-capture -q -m arch.cmf --tokens a.u32 -l 0 -o P &&
	test_grep "architecture .gpt2. is not run" err
'

test_expect_success 'text with a byte that has no token and no byte fallback' '
	printf "Once \303\274" >u.txt &&
	fails 1 P.q.gram -- gram-capture -q -m nofb.cmf --text u.txt -l 0 -o P &&
	test_grep "byte 0xc3 at offset 5 has no token and no byte fallback" err
'

test_expect_success 'activation rows that are not a multiple of 4·N bytes' '
	head -c 1000 S1 >rows.f32 &&
	fails 1 R.gram -- gram-capture -n 64 -o R rows.f32 &&
	test_grep "1000 bytes, not a multiple of 4·64" err
'

test_expect_success 'fewer activation rows than the split asks for' '
	head -c 2560 S1 >rows10.f32 &&
	fails 1 R.fit.gram R.sel.gram -- gram-capture -n 64 --fit-tokens 8 --sel-tokens 4 -o R rows10.f32 &&
	test_grep "10 rows of width 64, the split needs 12" err
'

test_expect_success 'non-finite activation rows are named' '
	printf "\000\000\300\177" >nan.f32 && head -c 252 S1 >>nan.f32 &&
	fails 1 R.gram -- gram-capture -n 64 -o R nan.f32 &&
	test_grep "row 0, channel 0 is nan" err
'

test_expect_success 'merging Grams of different widths' '
	gram-capture -q -m s.cmf --tokens a.u32 -l 0 --window 64 -o G &&
	fails 1 M.gram -- gram-capture --merge -o M.gram G.q.gram G.down.gram
'

test_expect_success 'usage errors exit 2' '
	test_expect_code 2 gram-capture -m s.cmf --tokens a.u32 -o P 2>err &&
	test_grep "^gram-capture: -m needs -l L" err && test_path_is_missing P.q.gram &&
	test_expect_code 2 gram-capture -m s.cmf --tokens a.u32 -l 0 --fit-tokens 10 -o P 2>err &&
	test_expect_code 2 gram-capture -n 0 -o P 2>err &&
	test_expect_code 2 gram-capture --bogus 2>err &&
	cp S1 S1.copy &&
	test_expect_code 2 gram-capture -m s.cmf --tokens a.u32 -l 1 --window 64 --state S1.copy \
		--next-state ./S1.copy 2>err &&
	test_grep "would overwrite the input state" err && cmp S1 S1.copy &&
	test_expect_code 2 gram-capture -n 4 2>err
'

test_expect_success '-n rows whose mean square is beyond f32: refused, no Gram of inf written' '
	"$NVG_PY" -c "
import numpy as np
np.full((4, 3), 3e38, dtype=np.float32).tofile(\"big.f32\")" &&
	test_expect_code 1 gram-capture -n 3 -o big big.f32 2>err &&
	test_one_line_error err &&
	test_grep "beyond f32" err &&
	test_path_is_missing big.gram && test_no_tmp_files .
'

test_done
