#!/bin/bash
# cmf-patch on bad input: exit 1, one line naming file, field and value,
# nothing written.  Usage errors exit 2.

. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin stories260K.gguf

# st.py OUT HEADER [DATALEN] [HLEN]: a safetensors-like file from a header text
cat >st.py <<'EOF'
import sys, struct
hdr = sys.argv[2].encode()
n = int(sys.argv[3]) if len(sys.argv) > 3 else 0
hl = int(sys.argv[4]) if len(sys.argv) > 4 else len(hdr)
open(sys.argv[1], "wb").write(struct.pack("<Q", hl) + hdr + bytes(n))
EOF

# gguf.py OUT KIND: a stories260K.gguf copy broken one way
cat >gguf.py <<'EOF'
import sys, struct
d = bytearray(open(sys.argv[3], "rb").read())
k = sys.argv[2]
if k == "magic": d[0:4] = b"GGUG"
if k == "version": d[4:8] = struct.pack("<I", 7)
if k == "count": d[8:16] = struct.pack("<Q", 1 << 50)
if k == "kvcount": d[16:24] = struct.pack("<Q", 1 << 50)
if k == "type" or k == "align":
    # the first tensor info is token_embd.weight: name, n_dims, dims, type, offset
    i = d.index(b"token_embd.weight") + len(b"token_embd.weight")
    nd = struct.unpack_from("<I", d, i)[0]
    t = i + 4 + 8 * nd
    if k == "type": d[t:t + 4] = struct.pack("<I", 10)
    else: d[t + 4:t + 12] = struct.pack("<Q", 4)
if k == "short": d = d[:len(d) - 1000]
if k == "nan": d[-4:] = struct.pack("<I", 0x7fc00000)
open(sys.argv[1], "wb").write(d)
EOF

# fails_cleanly OUT CMD...: exit 1, one line on stderr, OUT not written
fails_cleanly() {
	out=$1
	shift
	test_expect_code 1 "$@" 2>err &&
	test_one_line_error err &&
	test_path_is_missing "$out" &&
	test_no_tmp_files
}

T='"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'

test_expect_success 'a header length beyond the file' '
	"$NVG_PY" st.py h1.cmf "{$T}" 8 4096 &&
	fails_cleanly o.cmf cmf-patch apply h1.cmf a=x -o o.cmf &&
	test_grep "h1.cmf.*header length 4096" err
'

test_expect_success 'an absurdly large header length' '
	"$NVG_PY" st.py h2.cmf "{$T}" 8 1099511627776 &&
	fails_cleanly o.cmf cmf-patch truncate --layers 1 -o o.cmf h2.cmf &&
	test_grep "header length 1099511627776" err
'

test_expect_success 'JSON that does not parse' '
	"$NVG_PY" st.py j.cmf "{\"a\":{\"dtype\":" 0 &&
	fails_cleanly o.cmf cmf-patch export -o o.cmf j.cmf &&
	test_grep "j.cmf.*does not parse" err
'

test_expect_success 'a range outside the buffer' '
	"$NVG_PY" st.py r.cmf "{$T}" 4 &&
	fails_cleanly o.cmf cmf-patch export -o o.cmf r.cmf &&
	test_grep "tensor .a.*outside the data buffer" err
'

test_expect_success 'overlapping ranges' '
	"$NVG_PY" st.py ov.cmf "{$T,\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}" 8 &&
	fails_cleanly o.cmf cmf-patch list ov.cmf &&
	test_grep "overlap" err
'

test_expect_success 'a hole' '
	"$NVG_PY" st.py ho.cmf "{$T,\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}" 16 &&
	fails_cleanly o.cmf cmf-patch info ho.cmf &&
	test_grep "hole" err
'

test_expect_success 'an unknown dtype' '
	"$NVG_PY" st.py dt.cmf "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}" 2 &&
	fails_cleanly o.cmf cmf-patch list dt.cmf &&
	test_grep "F8_E4M3" err
'

test_expect_success 'a shape whose product overflows' '
	"$NVG_PY" st.py ovf.cmf "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,8]}}" 8 &&
	fails_cleanly o.cmf cmf-patch list ovf.cmf &&
	test_grep "overflows" err
'

test_expect_success 'a shape that disagrees with the bytes' '
	"$NVG_PY" st.py sh.cmf "{\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,8]}}" 8 &&
	fails_cleanly o.cmf cmf-patch list sh.cmf &&
	test_grep "tensor .a.*= 6.*8 bytes" err
'

test_expect_success 'duplicate names' '
	"$NVG_PY" st.py du.cmf "{$T,\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}" 12 &&
	fails_cleanly o.cmf cmf-patch list du.cmf &&
	test_grep "duplicate tensor name .a" err
'

test_expect_success 'GGUF with a bad magic' '
	"$NVG_PY" gguf.py g.gguf magic "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import --from gguf -o o.cmf g.gguf &&
	test_grep "g.gguf.*magic 0x47554747" err
'

test_expect_success 'GGUF with a bad version' '
	"$NVG_PY" gguf.py g.gguf version "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf g.gguf &&
	test_grep "version 7" err
'

test_expect_success 'GGUF counts beyond the file' '
	"$NVG_PY" gguf.py g.gguf count "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf g.gguf &&
	test_grep "tensor_count 1125899906842624" err &&
	"$NVG_PY" gguf.py g.gguf kvcount "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf g.gguf &&
	test_grep "metadata_kv_count" err
'

test_expect_success 'GGUF with misaligned data' '
	"$NVG_PY" gguf.py g.gguf align "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf g.gguf &&
	test_grep "token_embd.weight.*offset 4.*alignment 32" err
'

test_expect_success 'GGUF with an unsupported tensor type, named' '
	"$NVG_PY" gguf.py g.gguf type "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf g.gguf &&
	test_grep "token_embd.weight.*Q2_K" err
'

test_expect_success 'GGUF cut short' '
	"$NVG_PY" gguf.py g.gguf short "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf g.gguf &&
	test_grep "beyond the data section" err
'

test_expect_success 'GGUF with a NaN weight' '
	"$NVG_PY" gguf.py g.gguf nan "$NVG_DATA/stories260K.gguf" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf g.gguf &&
	test_grep "tensor .model.layers.*element 63 is nan" err
'

test_expect_success 'safetensors with an infinite weight' '
	mkdir inf &&
	"$NVG_PY" -c "
import json, numpy as np
from safetensors.numpy import save_file
a = np.ones((4, 8), np.float16); a[2, 3] = np.inf
save_file({\"model.embed_tokens.weight\": a}, \"inf/model.safetensors\")
json.dump({\"model_type\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16, \"num_hidden_layers\": 1,
           \"num_attention_heads\": 2, \"vocab_size\": 4}, open(\"inf/config.json\", \"w\"))
" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf inf &&
	test_grep "model.embed_tokens.weight.: element 19 is infinite" err
'

test_expect_success 'a llama2.c file whose size disagrees with its header' '
	head -c 1056536 "$NVG_DATA/stories260K.bin" >short.bin &&
	fails_cleanly o.cmf cmf-patch import --from llama2c -o o.cmf short.bin &&
	test_grep "size 1056536 bytes disagrees with its header.*1056540 bytes" err
'

test_expect_success 'a llama2.c vocabulary of the wrong size' '
	head -c 6000 "$NVG_DATA/tok512.bin" >tok.bin &&
	fails_cleanly o.cmf cmf-patch import --vocab tok.bin -o o.cmf "$NVG_DATA/stories260K.bin" &&
	test_grep "tok.bin.*token" err
'

test_expect_success 'config.json missing a needed key' '
	mkdir m &&
	"$NVG_PY" -c "
import json, numpy as np
from safetensors.numpy import save_file
save_file({\"x\": np.zeros(2, np.float32)}, \"m/model.safetensors\")
json.dump({\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1,
           \"num_attention_heads\": 2, \"vocab_size\": 4}, open(\"m/config.json\", \"w\"))
" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf m/model.safetensors &&
	test_grep "m/config.json: missing key .intermediate_size" err
'

test_expect_success 'config.json that disagrees with a tensor' '
	mkdir w &&
	"$NVG_PY" -c "
import json, numpy as np
from safetensors.numpy import save_file
z = lambda *s: np.zeros(s, np.float32)
L = \"model.layers.0.\"
save_file({\"model.embed_tokens.weight\": z(4, 8), \"model.norm.weight\": z(8),
           L + \"input_layernorm.weight\": z(8), L + \"post_attention_layernorm.weight\": z(8),
           L + \"self_attn.q_proj.weight\": z(8, 8), L + \"self_attn.k_proj.weight\": z(8, 8),
           L + \"self_attn.v_proj.weight\": z(4, 8), L + \"self_attn.o_proj.weight\": z(8, 8),
           L + \"mlp.gate_proj.weight\": z(16, 8), L + \"mlp.up_proj.weight\": z(16, 8),
           L + \"mlp.down_proj.weight\": z(8, 16)}, \"w/model.safetensors\")
json.dump({\"model_type\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16, \"num_hidden_layers\": 1,
           \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"vocab_size\": 4}, open(\"w/config.json\", \"w\"))
" &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf w/model.safetensors &&
	test_grep "k_proj.weight. has shape 8x8, the arch says 4x8" err
'

test_expect_success 'safetensors without config.json' '
	mkdir n && cp m/model.safetensors n/ &&
	fails_cleanly o.cmf cmf-patch import -o o.cmf n/model.safetensors &&
	test_grep "n/config.json" err
'

test_expect_success 'a CRC mismatch in verify' '
	cmf-patch import -o ok.cmf "$NVG_DATA/stories260K.gguf" &&
	"$NVG_PY" -c "
d = bytearray(open(\"ok.cmf\", \"rb\").read()); d[-100] ^= 1; open(\"bad.cmf\", \"wb\").write(d)
" &&
	test_expect_code 1 cmf-patch verify bad.cmf 2>err &&
	test_one_line_error err &&
	test_grep "bad.cmf.*tensor .model.norm.weight.: CRC-32 [0-9a-f]{8}, cmf.crc32 says [0-9a-f]{8}" err
'

test_expect_success 'usage errors exit 2' '
	test_expect_code 2 cmf-patch 2>err &&
	test_expect_code 2 cmf-patch frobnicate x 2>err &&
	test_grep "unknown subcommand" err &&
	test_expect_code 2 cmf-patch import --dtype f8 -o o.cmf ok.cmf 2>err &&
	test_expect_code 2 cmf-patch truncate -o o.cmf ok.cmf 2>err &&
	test_expect_code 2 cmf-patch apply ok.cmf a=b 2>err &&
	test_expect_code 2 cmf-patch apply ok.cmf nonsense -o o.cmf 2>err &&
	test_path_is_missing o.cmf
'

test_expect_success 'extract of an unknown name fails' '
	fails_cleanly x.f32 cmf-patch extract -o x.f32 ok.cmf no.such.tensor &&
	test_grep "no tensor .no.such.tensor" err
'

test_expect_success '-h prints exactly the SYNOPSIS of cmf-patch(1), --version the version' '
	test_man_synopsis man1/cmf-patch.1 200 >expect &&
	test $(wc -l <expect) -eq 10 &&
	cmf-patch -h >actual &&
	test_cmp expect actual &&
	cmf-patch --version >v &&
	test_grep "^cmf-patch \\(nvgkit\\) " v
'

test_done
