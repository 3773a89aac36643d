#!/bin/bash
# demo-blr-pack.sh - the main job until the conversion pipeline exists: one
# real weight matrix of stories260K through the BLR container and back.
#   layer 0's w1 (172 x 64) -> rank rule -> a data-free payload (numpy) ->
#   blr-pack verify, info, unpack -> relative Frobenius error
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
data=${NVG_DATA:-$top/../shared/data}
py=${NVG_PY:-$top/build/venv/bin/python3}
bin=${NVG_BIN:-$top/bin}
model=$data/stories260K.bin
[ -r "$model" ] || { echo "demo: missing '$model' (set NVG_DATA)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/nvgkit-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT

# llama2.c v0: 7 int32, then token_embedding 512x64, rms_att 5x64, wq 5x64x64,
# wk 5x32x64, wv 5x32x64, wo 5x64x64, rms_ffn 5x64, then w1 5x172x64
off=$(( 28 + 4 * (512*64 + 5*64 + 5*64*64 + 2*5*32*64 + 5*64*64 + 5*64) ))
"$py" -c "import numpy as np, sys; np.fromfile(sys.argv[1], '<f4', 172*64, offset=$off).tofile(sys.argv[2])" \
	"$model" "$work/w1.f32"
for bpw in 4 2 1; do
	"$bin/blr-pack" rank --shape 172x64 --bpw $bpw --paths 1 >"$work/rank"
	read -r _ _ _ r _ <"$work/rank"
	"$py" "$top/tests/blr-writer.py" svid "$work/w1.f32" 172 64 "$r" "$work/w1.blr"
	"$bin/blr-pack" verify --shape 172x64 "$work/w1.blr"
	"$bin/blr-pack" unpack -o "$work/w1.hat.f32" "$work/w1.blr"
	err=$("$py" -c "import numpy as np, sys; w, v = (np.fromfile(f, '<f4') for f in sys.argv[1:]); print('%.4f' % (np.linalg.norm(w - v) / np.linalg.norm(w)))" \
		"$work/w1.f32" "$work/w1.hat.f32")
	echo "stories260K layers.0.w1 172x64 at $bpw bpw: $(cat "$work/rank") | rel. Frobenius error $err"
done
"$bin/blr-pack" info "$work/w1.blr"
