#!/bin/bash
# nvg-encode on numbers no reader refuses but the arithmetic cannot take: a
# NaN weight in a CRC-valid CMF, a CRC-valid context with one finite 1e308,
# weights or Grams beyond what the device's f32 holds.  Each is one line,
# exit 1 (3 where the packer refuses a finite payload), never an abort.
. "$(dirname "$0")/test-lib.sh"

# the OpenCL stack's own process-lifetime allocations are not ours (make SAN=1)
export LSAN_OPTIONS="suppressions=$NVG_TOP/tests/lsan-opencl.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

. "$TEST_DIR/lib-encode.sh"
test_require_data stories260K.bin
ENC="-w w.raw --shape 96x64 --fit fit.gram --sel sel.gram"
Q=model.layers.1.self_attn.q_proj.weight

# poison.py CMF OUT NAME VALUE: weight 5 of NAME set, its CRC made good
cat >poison.py <<'PY'
import json, sys, zlib
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
src, out, k, v = sys.argv[1:5]
with safe_open(src, "np") as f:
    meta = f.metadata()
t = load_file(src)
t[k] = t[k].copy()
t[k].flat[5] = float(v)
crc = json.loads(meta["cmf.crc32"]); crc[k] = zlib.crc32(t[k].tobytes())
meta["cmf.crc32"] = json.dumps(crc)
save_file(t, out, metadata=meta)
PY

# hctx.py IN OUT FIELD K VALUE: entry K of a field (hf l sqd uc) set, CRC made good
cat >hctx.py <<'PY'
import struct, sys, zlib
d = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack_from("<I", d, 8)[0]
tri = n * (n + 1) // 2
off = {"hf": 32, "l": 32 + 8 * tri, "sqd": 32 + 16 * tri, "uc": 32 + 16 * tri + 12 * n}
struct.pack_into("<d", d, off[sys.argv[3]] + 8 * int(sys.argv[4]), float(sys.argv[5]))
struct.pack_into("<I", d, len(d) - 4, zlib.crc32(bytes(d[:-4])))
open(sys.argv[2], "wb").write(d)
PY

test_expect_success 'setup: a layer, its context, stories260K with a NaN and an infinity' '
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 . &&
	hctx-build fit.gram -o fit.hctx &&
	"$NVG_PY" -c "
import numpy as np
w=np.fromfile(\"w.raw\",dtype=\"<f4\").reshape(96,64)
(w*1e18).astype(\"<f4\").tofile(\"wbig.raw\")
(w*1e6).astype(\"<f4\").tofile(\"w1e6.raw\")
np.zeros((96,64),dtype=\"<f4\").tofile(\"wzero.raw\")
d=open(\"fit.gram\",\"rb\").read(); g=np.frombuffer(d[16:],dtype=\"<f4\")
open(\"gbig.gram\",\"wb\").write(d[:16]+(g*1e30).astype(\"<f4\").tobytes())" &&
	cmf-patch import "$NVG_DATA/stories260K.bin" -o s.cmf &&
	"$NVG_PY" poison.py s.cmf nan.cmf $Q nan &&
	"$NVG_PY" poison.py s.cmf inf.cmf $Q inf &&
	cmf-patch verify nan.cmf && cmf-patch verify inf.cmf
'

test_expect_success 'a NaN or infinite weight in a CRC-valid CMF is named, both methods' '
	fails 1 "nan.cmf.: tensor .$Q.: weight .0,5. = nan is not finite" \
		--method dual-svid -m nan.cmf -t $Q --bpw 1 &&
	fails 1 "inf.cmf.: tensor .$Q.: weight .0,5. = inf is not finite" \
		--method dual-svid -m inf.cmf -t $Q --bpw 1 &&
	fails 1 "nan.cmf.: tensor .$Q.: weight .0,5. = nan is not finite" \
		-m nan.cmf -t $Q --fit gbig.gram --sel sel.gram --bpw 1
'

test_expect_success 'a CRC-valid context with one 1e308 names the field it breaks' '
	for f in hf:0:sqd hf:100:hf l:0:l l:2079:l sqd:5:sqd uc:0:uc uc:2079:uc; do
		field=${f%%:*} k=${f#*:} k=${k%%:*} why=${f##*:}
		"$NVG_PY" hctx.py fit.hctx bad.hctx $field $k 1e308 &&
		fails 1 "cannot read context .bad.hctx.: field $why" $ENC --hctx bad.hctx --bpw 1 ||
		return 1
	done
'

test_expect_success 'the device: values beyond f32 are errors, not aborts' '
	fails 1 "cannot encode .wbig.raw.: .*not finite" -w wbig.raw --shape 96x64 \
		--fit fit.gram --sel sel.gram --bpw 1 --device opencl &&
	fails 1 "cannot encode .wzero.raw.: .*beyond f32" -w wzero.raw --shape 96x64 \
		--fit fit.gram --sel sel.gram --bpw 1 --device opencl &&
	fails 1 "cannot encode .w.raw.: .*not finite" -w w.raw --shape 96x64 \
		--fit gbig.gram --sel sel.gram --bpw 1 --device opencl
'

test_expect_success 'the CPU holds them in f64: a finite payload, or the packer refuses' '
	fails 3 "blr refused .wbig.raw.: .*exceeds the f16 range" -w wbig.raw --shape 96x64 \
		--fit fit.gram --sel sel.gram --bpw 1 &&
	nvg-encode -w w.raw --shape 96x64 --fit gbig.gram --sel sel.gram --bpw 1 -o g.blr &&
	test -s g.blr && blr-pack info g.blr >info && test_grep "^shape 96x64$" info
'

test_expect_success 'a rank scale beyond f16: the device refuses it as the CPU does (one packer)' '
	for dev in cpu opencl; do
		fails 3 "blr refused .w1e6.raw.: path 1: rank scale 0 = [0-9.e+]* exceeds the f16 range" \
			-w w1e6.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 1 --device $dev ||
		return 1
	done
'

test_done
